"""`jaxenvs.games.matches`: win / draw / loss per seat on a hand-written two-player game whose outcome
probabilities are known exactly (tests/turn_based_toys.py's `PickGame`), illegal-move counting,
and the refusal to report games that did not end.

Tolerances: a rate from `N` games is accepted within 4.5 binomial standard deviations
(`sqrt(p (1 - p) / N)`) of its exact value (a false alarm about once in 150,000 checks); outcomes
of probability 0 must not occur at all.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs import spaces, struct
from jaxenvs.core import Environment
from jaxenvs.games.matches import head_to_head, play, play_games
from jaxenvs.games.opponents import random_legal
from turn_based_toys import PickGame

N = 2000


def rbg_key(seed):
    """A key of the `unsafe_rbg` implementation: programs drawing from it compile about twice as
    fast as with threefry keys (test_play_reports_returns_plies_and_stops_every_game uses those)."""
    return jax.random.key(seed, impl="unsafe_rbg")


def lowest_legal(key, obs):
    """Deterministic: the lowest legal action (0 when none)."""
    return jnp.argmax(obs["action_mask"] != 0).astype(jnp.int32)


def always_zero(key, obs):
    """Ignores the mask: plays action 0 whatever is legal."""
    return jnp.zeros((), jnp.int32)


def assert_rates(stats, exact, n):
    for name, p in exact.items():
        got = stats[name]
        if p in (0.0, 1.0):
            assert got == p, f"{name}: got {got}, exactly {p} expected"
        else:
            tol = 4.5 * np.sqrt(p * (1 - p) / n)
            assert abs(got - p) <= tol, f"{name}: got {got:.4f}, exact {p:.4f}, tolerance {tol:.4f}"


@pytest.fixture(scope="module")
def env():
    return PickGame()


def test_random_vs_random_matches_the_exact_outcome_probabilities(env):
    # a = 3 (1/4) draws; otherwise player 1 wins with probability 1/2
    res = head_to_head(env, random_legal, random_legal, rbg_key(0), N)
    assert_rates(res["seat0"], dict(win=3 / 8, draw=1 / 4, loss=3 / 8), N)
    assert_rates(res["seat1"], dict(win=3 / 8, draw=1 / 4, loss=3 / 8), N)
    assert res["seat0"]["illegal_a"] == res["seat0"]["illegal_b"] == 0.0


def test_a_deterministic_policy_against_random_per_seat(env):
    res = head_to_head(env, lowest_legal, random_legal, rbg_key(1), N)
    # seat 0: A picks 0, B answers 1 (B wins) or 2 (A wins), each 1/2
    assert_rates(res["seat0"], dict(win=0.5, draw=0.0, loss=0.5), N)
    # seat 1: B picks a uniformly; a=3 draw; a=0 -> A plays 1 and wins; a=1 -> A plays 0 and loses;
    # a=2 -> A plays 0 = (2 + 1) % 3 and wins
    assert_rates(res["seat1"], dict(win=0.5, draw=0.25, loss=0.25), N)
    for seat in ("seat0", "seat1"):
        s = res[seat]
        assert s["win"] + s["draw"] + s["loss"] == pytest.approx(1.0)
        assert s["mean_return"] == pytest.approx(s["win"] - s["loss"])
        assert s["games"] == N


def test_illegal_moves_are_counted_for_the_seat_that_made_them(env):
    res = head_to_head(env, always_zero, random_legal, rbg_key(2), N)
    # seat 0: 0 is always legal for player 0 -> as lowest_legal
    assert res["seat0"]["illegal_a"] == 0.0
    assert_rates(res["seat0"], dict(win=0.5, draw=0.0, loss=0.5), N)
    # seat 1: after a = 0 (prob 1/4) playing 0 is illegal and loses; a = 1: 0 legal, loses;
    # a = 2: 0 legal, wins; a = 3: draw
    assert_rates(res["seat1"], dict(win=0.25, draw=0.25, loss=0.5), N)
    assert abs(res["seat1"]["illegal_a"] - 0.25) <= 4.5 * np.sqrt(0.25 * 0.75 / N)
    assert res["seat1"]["illegal_b"] == 0.0


def test_play_reports_returns_plies_and_stops_every_game(env):
    run = play(env, (lowest_legal, lowest_legal), num_games=8)
    out = jax.device_get(run(jax.random.key(3)))
    # a = 0, b = 1 = (0 + 1) % 3: player 1 wins in 2 plies, every game (deterministic)
    np.testing.assert_array_equal(out["returns"], np.tile([-1.0, 1.0], (8, 1)))
    np.testing.assert_array_equal(out["plies"], np.full(8, 2))
    assert out["finished"].all() and not out["illegal"].any()
    # zero-sum: returns of every game sum to 0
    assert np.all(out["returns"].sum(-1) == 0)


def test_unfinished_games_raise_and_bad_arguments_are_refused(env):
    with pytest.raises(RuntimeError, match="did not end within max_plies=1"):
        head_to_head(env, lowest_legal, lowest_legal, jax.random.key(4), 8, max_plies=1)
    out = play(env, (lowest_legal, lowest_legal), 8, max_plies=1)(jax.random.key(4))  # the same program, cached
    assert not np.asarray(out["finished"]).any() and (np.asarray(out["plies"]) == 1).all()
    with pytest.raises(ValueError, match="one policy per seat"):
        play(env, (lowest_legal,), 4)
    with pytest.raises(ValueError, match="num_games and max_plies must be >= 1"):
        play(env, (lowest_legal, lowest_legal), 0)


# ---- each seat's policy runs on its own plies only ------------------------------------------
def counting(policy, calls, seat):
    """``policy`` that records, on the host, one entry per game it is asked about (a `jax.debug`
    callback runs once per element of the vmapped batch): whether that game's mask had a move."""
    def counted(key, obs):
        jax.debug.callback(lambda m: calls[seat].append(bool(np.any(m))), obs["action_mask"])
        return policy(key, obs)

    return counted


def seat_calls(env, policies, games, key, every_ply=False):
    calls = {0: [], 1: []}
    run = jax.jit(lambda k: play_games(env, tuple(counting(p, calls, i) for i, p in enumerate(policies)), games, k,
                                       every_ply=every_ply))
    out = jax.device_get(run(key))
    jax.effects_barrier()
    return out, calls


@pytest.mark.parametrize("game", ["TicTacToe-v0", "KuhnPoker-v0"])
def test_each_seat_policy_runs_on_its_own_plies_only(game):
    env, games = jaxenvs.make(game, autoreset=False), 6
    out, calls = seat_calls(env, (random_legal, random_legal), games, rbg_key(5))
    base, every = seat_calls(env, (random_legal, random_legal), games, rbg_key(5), every_ply=True)
    for k in ("returns", "plies", "illegal", "finished"):  # the same games either way
        np.testing.assert_array_equal(out[k], base[k])
    t = int(out["plies"].max())  # loop iterations
    # the games alternate in step: seat s moves at plies s, s + 2, ... (Kuhn poker: after the 2 deals)
    first = 2 if game == "KuhnPoker-v0" else 0
    own = [len(range(first + s, t, 2)) for s in (0, 1)]
    assert [len(calls[s]) for s in (0, 1)] == [games * own[0], games * own[1]]
    assert [len(every[s]) for s in (0, 1)] == [games * t, games * t]  # the baseline: every seat, every ply
    # every call was for a game where the seat moves, or one already over (frozen in the batch)
    assert sum(calls[0]) + sum(calls[1]) == int(out["plies"].sum()) - first * games


@struct.dataclass
class StarterState:
    starter: jnp.ndarray  # int32: the seat that opens (drawn at reset)
    ply: jnp.ndarray  # int32: 0, 1, then 2 (over)
    a: jnp.ndarray  # int32: the opener's pick, -1 before


class RandomStarter(Environment):
    """Two plies: the opener (drawn at reset, so movers differ across a batch) picks a in {0, 1},
    then the other seat picks b; the opener wins if b == a, else the other seat wins."""

    traits = PickGame.traits

    def reset_env(self, key, params):
        state = StarterState(starter=jax.random.bernoulli(key).astype(jnp.int32), ply=jnp.int32(0), a=jnp.int32(-1))
        return self._obs(state), state

    def current_player(self, state, params=None):
        return jnp.where(state.ply == 0, state.starter, 1 - state.starter).astype(jnp.int32)

    def legal_action_mask(self, state, params=None):
        return jnp.broadcast_to(((jnp.arange(2) == self.current_player(state)) & (state.ply < 2))[:, None], (2, 2))

    def _obs(self, state):
        return {"observation": jnp.broadcast_to(jnp.stack([state.ply, state.a]), (2, 2)).astype(jnp.int32),
                "action_mask": self.legal_action_mask(state).astype(jnp.uint8)}

    def step_env(self, key, state, action, params):
        mover = self.current_player(state)
        act = action[mover]
        illegal = (act < 0) | (act > 1)
        ends = illegal | (state.ply == 1)
        opener_wins = act == state.a
        r_mover = jnp.where(illegal, -1.0, jnp.where(opener_wins, -1.0, 1.0))
        reward = jnp.where(ends, jnp.where(jnp.arange(2) == mover, r_mover, -r_mover), 0.0).astype(jnp.float32)
        new = StarterState(starter=state.starter, ply=jnp.where(ends, 2, 1).astype(jnp.int32),
                           a=jnp.where(state.ply == 0, act, state.a).astype(jnp.int32))
        return self._obs(new), new, reward, ends, jnp.zeros((), bool), {"illegal_action": illegal}

    def observation_space(self, params=None):
        return spaces.Dict({"observation": spaces.Box(-1, 2, (2,), np.int32),
                            "action_mask": spaces.Box(0, 1, (2,), np.uint8)})

    def action_space(self, params=None):
        return spaces.Discrete(2)


def test_movers_that_differ_across_the_batch_are_all_asked():
    env, games = RandomStarter(), 16
    out, calls = seat_calls(env, (random_legal, random_legal), games, rbg_key(6))
    base, _ = seat_calls(env, (random_legal, random_legal), games, rbg_key(6), every_ply=True)
    for k in ("returns", "plies", "illegal", "finished"):
        np.testing.assert_array_equal(out[k], base[k])
    assert not out["illegal"].any() and out["finished"].all()
    # both seats open somewhere in the batch: both are asked about every game on both plies
    assert len(calls[0]) == len(calls[1]) == 2 * games and sum(calls[0]) + sum(calls[1]) == 2 * games
