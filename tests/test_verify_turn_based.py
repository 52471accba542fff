"""verify_port against turn-based references: TicTacToe-v0 and ConnectFour-v0 against PettingZoo's
AEC games, KuhnPoker-v0 against OpenSpiel's kuhn_poker, each passing; and one mutant per kind of
bug (a wrong win line, a wrong mask after a move, a wrong chance probability, an information-state
tensor bit) failing with the game and ply that differ. The reference plays once per game
(`ReferenceCache`) for the port and its mutant."""

from __future__ import annotations

import dataclasses
import json
import re

import jax.numpy as jnp
import pytest

import jaxenvs
from jaxenvs.envs import connect_four, kuhn_poker, tic_tac_toe
from jaxenvs.testing import PortMismatch, ReferenceCache, verify_port

from helpers import require

require("scipy")
require("pettingzoo")
N_GAMES = {"TicTacToe-v0": 200, "ConnectFour-v0": 150, "KuhnPoker-v0": 200}


@pytest.fixture(scope="module")
def cache():
    return ReferenceCache()


def _tictactoe_reference():
    from jaxenvs.adapters.pettingzoo import classic_env

    return classic_env("tictactoe_v3")


def _connect_four_reference():
    from jaxenvs.adapters.pettingzoo import classic_env

    return classic_env("connect_four_v3")


def _kuhn_reference():
    return require("pyspiel").load_game("kuhn_poker")


# ---- mutants ------------------------------------------------------------------------------------


class WrongWinLine(tic_tac_toe.TicTacToe):
    """The anti-diagonal (2, 4, 6) replaced by (2, 4, 7)."""

    def step_env(self, key, state, action, params):
        lines = jnp.asarray(tic_tac_toe.LINE_MASKS[:-1].tolist() + [(1 << 2) | (1 << 4) | (1 << 7)], jnp.int32)
        player = state.current_player
        move = action[player]
        mine, theirs = state.marks[player], state.marks[1 - player]
        bit = jnp.left_shift(jnp.int32(1), jnp.clip(move, 0, 8))
        legal = (move >= 0) & (move < 9) & ((bit & (mine | theirs)) == 0) & ~state.terminated
        mine = mine | jnp.where(legal, bit, 0)
        won = legal & jnp.any((mine & lines) == lines)
        full = (mine | theirs) == tic_tac_toe.FULL_BOARD
        mover_reward = jnp.where(legal, jnp.where(won, 1.0, 0.0), -1.0).astype(jnp.float32)
        is_mover = jnp.arange(2) == player
        state = tic_tac_toe.EnvState(jnp.where(is_mover, mine, state.marks), 1 - player, ~legal | won | full)
        reward = jnp.where(is_mover, mover_reward, -mover_reward)
        return self._obs(state), state, reward, state.terminated, jnp.zeros((), bool), {"illegal_action": ~legal}


class FullAtFive(connect_four.ConnectFour):
    """The mask calls a column full once it holds 5 pieces (of 6); step still accepts the move."""

    def legal_action_mask(self, state, params=None):
        moves = (jnp.arange(2) == state.current_player) & ~state.terminated
        return moves[:, None] & (state.heights < connect_four.ROWS - 1)[None, :]


class SkewedDeal(kuhn_poker.KuhnPoker):
    """The first deal gives the King with probability 0.4 (and the others 0.3) in chance_outcomes."""

    def chance_outcomes(self, state, params=None):
        first = jnp.array([0.3, 0.3, 0.4], jnp.float32)
        return jnp.where(state.cards[0] < 0, jnp.where(self.is_chance_node(state), first, 0.0), super().chance_outcomes(state))


class ThirdBetBitLost(kuhn_poker.KuhnPoker):
    """The information-state tensor leaves out the Bet bit of the third action (pass, bet, bet)."""

    def _obs(self, state):
        obs = super()._obs(state)
        tensor = obs["observation"].at[:, 2 + 3 + 2 * 2 + 1].set(0.0)
        return {**obs, "observation": tensor}


# ---- tests --------------------------------------------------------------------------------------

CASES = {
    "TicTacToe-v0": (_tictactoe_reference, WrongWinLine, "reward and end of game (every ply)"),
    "ConnectFour-v0": (_connect_four_reference, FullAtFive, "legal-action mask"),
    "KuhnPoker-v0": (_kuhn_reference, SkewedDeal, "chance nodes and outcome probabilities"),
}


def _reference(env_id):
    make, _, _ = CASES[env_id]
    return make() if env_id == "KuhnPoker-v0" else make


@pytest.mark.parametrize("env_id", list(CASES))
def test_port_passes_every_ply(env_id, cache):
    report = verify_port(jaxenvs.make(env_id), _reference(env_id), num_episodes=N_GAMES[env_id], reference_cache=cache)
    assert report.verdict == "pass" and report.tiers == ("exact",)
    assert all(s.tier == "exact" and s.p_value == 1.0 and s.n_port > 0 for s in report.statistics)
    names = {s.name for s in report.statistics}
    assert {"mover (current_player)", "legal-action mask", "reward and end of game (every ply)"} <= names
    if env_id == "KuhnPoker-v0":
        assert {"chance nodes and outcome probabilities", "returns (every state)",
                "observation per agent (information_state_tensor)"} <= names
        assert f"{2 * N_GAMES[env_id]} chance plies" in report.notes[0]  # two deals a game
        n = 2 * N_GAMES[env_id]
        assert f"({n} of {n} chance plies" in report.notes[-1]  # every observation after a deal compared
    else:
        assert "observation per agent (observation)" in names
        assert " illegal moves" in report.notes[0] and " 0 illegal moves" not in report.notes[0]
    assert report.num_episodes == N_GAMES[env_id] and report.states_checked > N_GAMES[env_id]
    certificate = json.loads(report.to_json())
    assert certificate["verdict"] == "pass" and certificate["tiers"] == ["exact"]
    assert "lockstep (every ply)" in str(report)


@pytest.mark.parametrize("env_id", list(CASES))
def test_mutant_fails_naming_the_game_and_ply(env_id, cache):
    _, cls, statistic = CASES[env_id]
    with pytest.raises(PortMismatch) as e:
        verify_port(cls(), _reference(env_id), num_episodes=N_GAMES[env_id], reference_cache=cache)
    assert e.value.statistic == statistic, str(e.value)
    assert e.value.report.verdict == "fail"
    assert re.search(r"at game \d+, (initial state|after ply \d+ \(plies so far: \[)", str(e.value)), str(e.value)
    if env_id == "TicTacToe-v0":  # the evidence replays: the last mover holds (2, 4, 6) or (2, 4, 7)
        plies = [int(a) for a in str(e.value).split("plies so far: [")[1].split("]")[0].split(", ")]
        mover_cells = set(plies[(len(plies) - 1) % 2 :: 2])
        assert {2, 4, 6} <= mover_cells or {2, 4, 7} <= mover_cells, str(e.value)


def test_information_state_bit_is_caught(cache):
    with pytest.raises(PortMismatch) as e:
        verify_port(ThirdBetBitLost(), _kuhn_reference(), num_episodes=N_GAMES["KuhnPoker-v0"], reference_cache=cache)
    assert e.value.statistic == "observation per agent (information_state_tensor)"
    assert "plies so far: [chance" in str(e.value) and "agent 0" in str(e.value)


def test_turn_based_refusals():
    env = jaxenvs.make("TicTacToe-v0")
    with pytest.raises(ValueError, match="policy cannot be used with a turn-based reference"):
        verify_port(env, _tictactoe_reference, policy=lambda k, o: 0)

    class Shuffled(tic_tac_toe.TicTacToe):
        traits = dataclasses.replace(tic_tac_toe.TicTacToe.traits, chance="stochastic")

    with pytest.raises(ValueError, match="chance='stochastic'"):
        verify_port(Shuffled(), _tictactoe_reference)
    with pytest.raises(PortMismatch, match="action space"):
        verify_port(jaxenvs.make("ConnectFour-v0"), _tictactoe_reference)
    kuhn_as_deterministic = type("Deterministic", (kuhn_poker.KuhnPoker,), {
        "traits": dataclasses.replace(kuhn_poker.KuhnPoker.traits, chance="deterministic")})
    with pytest.raises(PortMismatch, match="chance outcomes: the reference has chance nodes"):
        verify_port(kuhn_as_deterministic(), _kuhn_reference())


@pytest.mark.parametrize("env_id", ["TicTacToe-v0", "ConnectFour-v0"])
def test_aec_adapter_terminal_mask_matches_pettingzoo(env_id):
    """Replayed games: after the end, the selected agent's action_mask lists the empty cells /
    open columns as PettingZoo's tictactoe_v3 / connect_four_v3 do; every live ply matches too."""
    import numpy as np

    from jaxenvs.adapters.pettingzoo import AECEnv

    ours, ref = AECEnv(env_id), CASES[env_id][0]()
    rng = np.random.default_rng(0)
    terminal = 0
    for g in range(25):
        ours.reset(seed=g)
        ref.reset(seed=g)
        while True:
            r_mask = ref.observe(ref.agent_selection)["action_mask"]
            o_mask = ours.observe(ours.agent_selection)["action_mask"]
            np.testing.assert_array_equal(o_mask, r_mask, err_msg=f"game {g}")
            if any(ref.last()[2:4]):
                terminal += 1
                assert r_mask.any() or env_id == "TicTacToe-v0"  # a full board lists nothing
                break
            move = int(rng.choice(np.flatnonzero(r_mask)))
            ref.step(move)
            ours.step(move)
    assert terminal == 25


def test_turn_based_power_rule_a_mutant_never_passes(cache):
    """Below the games detect needs the verdict is inconclusive (never pass); a mutant fails or
    is inconclusive at every game count; the faithful port passes from the needed count on."""
    from jaxenvs.testing import PortInconclusive
    from jaxenvs.testing.port_verification import games_needed

    need = games_needed(0.05, 0.95)
    assert need == 59
    for games in (10, 20, 40):
        try:
            r = verify_port(WrongWinLine(), _tictactoe_reference, num_episodes=games, detect=0.05,
                            raise_inconclusive=False, reference_cache=cache)
            assert r.verdict == "inconclusive"
        except PortMismatch:
            pass
    with pytest.raises(PortInconclusive, match="59 games would do"):
        verify_port(jaxenvs.make("TicTacToe-v0"), _tictactoe_reference, num_episodes=20, detect=0.05, reference_cache=cache)
    r = verify_port(jaxenvs.make("TicTacToe-v0"), _tictactoe_reference, num_episodes=need, detect=0.05, reference_cache=cache)
    assert r.verdict == "pass" and all(s.detectable <= 0.05 for s in r.statistics)


def test_pgx_reference(cache):
    """Pgx as the reference: the port passes, the wrong win line fails (Pgx's random first player
    mapped to seat 0)."""
    pgx = require("pgx")
    ref = pgx.make("tic_tac_toe")
    report = verify_port(jaxenvs.make("TicTacToe-v0"), ref, num_episodes=60, detect=0.05)
    assert report.verdict == "pass" and report.reference.startswith("pgx tic_tac_toe")
    with pytest.raises(PortMismatch):
        verify_port(WrongWinLine(), ref, num_episodes=60, detect=0.05)
