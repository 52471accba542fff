"""`jaxenvs.adapters.pettingzoo.AECEnv`: PettingZoo's own API test, and TicTacToe-v0 / ConnectFour-v0
played through it in lockstep with PettingZoo's ``classic.tictactoe_v3`` / ``connect_four_v3``
(same actions, legal and illegal): agent selection, observations, masks, rewards (per step and
accumulated), terminations, truncations and the removal of dead agents compared at every call."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from pettingzoo.test import api_test

import jaxenvs
from jaxenvs.adapters.pettingzoo import AECEnv, ParallelEnv, classic_env

GAMES = {"TicTacToe-v0": "tictactoe_v3", "ConnectFour-v0": "connect_four_v3"}
# What api_test says of a dict observation and of agents named "0", "1": it waives the first two
# for PettingZoo's own classic games by name (its env_obs_dicts / env_obs_space lists).
WAIVED_BY_NAME = (
    "Observation is not a NumPy array",
    "Observation space for each agent probably should be gymnasium.spaces.box or gymnasium.spaces.discrete",
    'We recommend agents to be named in the format <descriptor>_<number>, like "player_0"',
)


def _pettingzoo(module: str):
    return classic_env(module)


def _api_test_warnings(env) -> set[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        api_test(env, num_cycles=300)
    return {str(w.message) for w in caught}


@pytest.mark.parametrize("env_id", sorted(GAMES))
def test_api_test_passes_with_no_warning_pettingzoos_own_game_lacks(env_id):
    ours = _api_test_warnings(AECEnv(env_id))
    theirs = _api_test_warnings(_pettingzoo(GAMES[env_id]))
    assert ours - theirs <= set(WAIVED_BY_NAME), ours - theirs


def _compare(ours, theirs, names, at, done, illegal_by):
    """Everything both envs expose, agent by agent. Where PettingZoo's TerminateIllegalWrapper
    differs after an illegal move (``illegal_by``: the agent that made it), the game's rule is
    checked instead: the other agent gets +1, not 0, and the episode is terminated, not also
    truncated."""
    assert ours.agents == [names[a] for a in theirs.agents], at
    for a in theirs.agents:
        mine, pz = ours.observe(names[a]), theirs.observe(a)
        np.testing.assert_array_equal(mine["observation"], pz["observation"], err_msg=at)
        assert mine["action_mask"].dtype == np.int8 and pz["action_mask"].dtype == np.int8
        # after the end too: PettingZoo still lists the selected agent's free cells / open columns
        # (after an illegal move its TerminateIllegalWrapper keeps the mover selected, the game
        # selects the next agent: which agent's row lists them differs)
        if illegal_by is None:
            np.testing.assert_array_equal(mine["action_mask"], pz["action_mask"], err_msg=at)
        else:
            assert mine["action_mask"].sum() in (0, pz["action_mask"].sum() or mine["action_mask"].sum()), at
        plus_one = illegal_by is not None and a != illegal_by
        assert ours.rewards[names[a]] == (1.0 if plus_one else theirs.rewards[a]), at
        assert ours._cumulative_rewards[names[a]] == (1.0 if plus_one else theirs._cumulative_rewards[a]), at
        assert ours.terminations[names[a]] == theirs.terminations[a], at
        assert ours.truncations[names[a]] == (False if illegal_by is not None else theirs.truncations[a]), at


def _lockstep(env_id: str, n_games: int, illegal_prob: float, seed: int = 0) -> dict:
    """Play ``n_games`` random games through both AEC envs with the same actions, asserting
    equality at every turn (`_compare`); returns counts of what was covered."""
    ours, theirs = AECEnv(env_id), _pettingzoo(GAMES[env_id])
    names = dict(zip(theirs.possible_agents, ours.possible_agents))
    rng = np.random.default_rng(seed)
    seen = {"illegal": 0, "turns": 0, "outcomes": set()}
    for g in range(n_games):
        ours.reset(seed=g)
        theirs.reset(seed=g)
        illegal_by = None
        _compare(ours, theirs, names, f"{env_id} game {g} reset", False, None)
        while True:
            at = f"{env_id} game {g} turn {seen['turns']}"
            agent = theirs.agent_selection
            assert ours.agent_selection == names[agent], at
            obs_t, rew_t, *_ = theirs.last()
            _, rew_o, term_o, trunc_o, _ = ours.last()
            assert rew_o == rew_t and not term_o and not trunc_o, at
            mask = obs_t["action_mask"]
            legal, masked = np.flatnonzero(mask), np.flatnonzero(mask == 0)
            illegal = len(masked) > 0 and rng.random() < illegal_prob
            action = int(rng.choice(masked if illegal else legal))
            theirs.step(action)
            ours.step(action)
            seen["turns"] += 1
            assert ours.infos[names[agent]]["illegal_action"] is illegal, at
            illegal_by = agent if illegal else None
            done = any(theirs.terminations.values()) or any(theirs.truncations.values())
            _compare(ours, theirs, names, at, done, illegal_by)
            if done:
                break
        seen["illegal"] += illegal_by is not None
        if illegal_by is None:
            seen["outcomes"].add(tuple(theirs.rewards[a] for a in theirs.possible_agents))
        # the dead agents leave one by one, each stepped with None (PettingZoo keeps the illegal
        # mover selected first, the game selects the next agent: the order may differ)
        final = {a: theirs._cumulative_rewards[a] for a in theirs.agents}
        for env in (ours, theirs):
            left = []
            while env.agents:
                a = env.agent_selection
                _, total, term, trunc, _ = env.last()
                if env is ours:
                    a_pz = {v: k for k, v in names.items()}[a]
                    assert total == (1.0 if illegal_by not in (None, a_pz) else final[a_pz]) and term, at
                env.step(None)
                left.append(a)
            assert sorted(left) == (sorted(names[a] for a in final) if env is ours else sorted(final)), at
        with pytest.raises(RuntimeError, match="episode is over"):
            ours.step(0)
    return seen


@pytest.mark.parametrize("env_id, n_games", [("TicTacToe-v0", 150), ("ConnectFour-v0", 40)])
def test_lockstep_against_pettingzoo(env_id, n_games):
    seen = _lockstep(env_id, n_games, illegal_prob=0.02)
    assert seen["illegal"] >= 2 and seen["turns"] > 5 * n_games
    assert {(1, -1), (-1, 1)} <= seen["outcomes"]  # both seats win somewhere


def _same_everywhere(ours, theirs, at):
    """Every agent's view, the removed agents' too: agent selection, live agents, each agent's
    observation (its values: ours are int32, as every jaxenvs observation, PettingZoo's int8) and
    mask (int8 both), and the live agents' rewards (per step and accumulated), terminations and
    truncations, exactly."""
    assert ours.agent_selection == theirs.agent_selection, at
    assert ours.agents == theirs.agents, at
    for a in theirs.possible_agents:
        mine, pz = ours.observe(a), theirs.observe(a)
        assert mine["action_mask"].dtype == pz["action_mask"].dtype == np.int8, at
        for k in ("observation", "action_mask"):
            np.testing.assert_array_equal(mine[k], pz[k], err_msg=f"{at}: agent {a} {k}")
    for a in theirs.agents:
        assert ours.rewards[a] == theirs.rewards[a], (at, a)
        assert ours._cumulative_rewards[a] == theirs._cumulative_rewards[a], (at, a)
        assert ours.terminations[a] == theirs.terminations[a] and ours.truncations[a] == theirs.truncations[a], (at, a)


@pytest.mark.parametrize("env_id", sorted(GAMES))
def test_strict_replay_observes_every_agent_at_every_ply(env_id):
    """Random legal games (several seeds) through both AEC envs, every agent observed after every
    call, through the end of the game and the dead agents' ``step(None)`` calls: nothing differs,
    terminal observations included (after the end PettingZoo selects the agent after the last
    mover and lists the free cells in that agent's mask only)."""
    ours, theirs = AECEnv(env_id), _pettingzoo(GAMES[env_id])
    assert ours.possible_agents != theirs.possible_agents  # "0", "1" against "player_0", "player_1"
    names = dict(zip(ours.possible_agents, theirs.possible_agents))
    ours = _Renamed(ours, names)
    rng = np.random.default_rng(1)
    outcomes = set()
    for seed in range(6):
        ours.reset(seed=seed)
        theirs.reset(seed=seed)
        _same_everywhere(ours, theirs, f"{env_id} seed {seed} reset")
        ply = 0
        while theirs.agents:
            _, _, terminated, truncated, _ = theirs.last()
            if terminated or truncated:
                action = None
            else:
                action = int(rng.choice(np.flatnonzero(theirs.observe(theirs.agent_selection)["action_mask"])))
            if action is None and len(theirs.agents) == len(theirs.possible_agents):
                final = tuple(theirs._cumulative_rewards[a] for a in theirs.possible_agents)
            theirs.step(action)
            ours.step(action)
            ply += 1
            _same_everywhere(ours, theirs, f"{env_id} seed {seed} ply {ply}")
        outcomes.add(final)
    assert len(outcomes) >= 2  # games won by either seat or drawn, not one ending replayed


class _Renamed:
    """An `AECEnv` seen with PettingZoo's agent names (``names``: ours -> theirs), so that the two
    views compare key by key."""

    def __init__(self, env, names):
        self.env, self.to, self.back = env, names, {v: k for k, v in names.items()}

    def __getattr__(self, name):
        value = getattr(self.env, name)
        if name in ("agents", "possible_agents"):
            return [self.to[a] for a in value]
        if name == "agent_selection":
            return self.to[value]
        if name in ("rewards", "_cumulative_rewards", "terminations", "truncations", "infos"):
            return {self.to[a]: v for a, v in value.items()}
        return value

    def observe(self, agent):
        return self.env.observe(self.back[agent])


def test_misuse_is_refused_with_the_rule():
    game = AECEnv("TicTacToe-v0")
    game.reset(seed=0)
    with pytest.raises(ValueError, match="must pass an action"):
        game.step(None)
    with pytest.raises(ValueError, match=r"action 9 is outside the action space Discrete\(9\)"):
        game.step(9)
    game.step(4)
    assert game.agent_selection == "1" and not game.infos["1"]["illegal_action"]
    with pytest.raises(ValueError, match="turn-based environments"):
        AECEnv("RockPaperScissors-v0")
    with pytest.raises(ValueError, match="turn-based environments"):
        AECEnv("GridWorld-v0")


def test_before_reset_every_call_says_reset_first():
    game = AECEnv("TicTacToe-v0")
    with pytest.raises(RuntimeError, match=r"call reset\(\) before observe\(\)"):
        game.observe("0")
    with pytest.raises(RuntimeError, match=r"call reset\(\) before last\(\)"):
        game.last()
    with pytest.raises(RuntimeError, match=r"call reset\(\) before step\(\)"):
        game.step(0)
    game.reset(seed=0)
    obs, reward, terminated, truncated, info = game.last()
    assert obs["action_mask"].tolist() == [1] * 9 and (reward, terminated, truncated) == (0.0, False, False)
    with pytest.raises(ValueError, match=r"observe: unknown agent 'player_0'; the agents are \['0', '1'\]"):
        game.observe("player_0")


def test_parallel_env_of_a_turn_based_game_applies_only_the_movers_action():
    """PettingZoo's turn-based parallel convention: every live agent passes an action, the mover's
    is applied, the other's ignored whatever its value (here: a cell that is taken, or the same)."""
    par, aec = ParallelEnv("TicTacToe-v0"), AECEnv("TicTacToe-v0")
    obs, _ = par.reset(seed=0)
    aec.reset(seed=0)
    rng = np.random.default_rng(0)
    for turn in range(9):
        mover = aec.agent_selection
        other = "1" if mover == "0" else "0"
        assert obs[other]["action_mask"].sum() == 0 and obs[mover]["action_mask"].sum() == 9 - turn
        move = int(rng.choice(np.flatnonzero(obs[mover]["action_mask"])))
        obs, rewards, terms, _, infos = par.step({mover: move, other: int(rng.integers(9))})
        aec.step(move)
        for a in ("0", "1"):
            np.testing.assert_array_equal(obs[a]["observation"], aec.observe(a)["observation"])
            if not terms[a]:  # after the end the AEC view lists the selected agent's moves as PettingZoo's games do
                np.testing.assert_array_equal(obs[a]["action_mask"], aec.observe(a)["action_mask"])
            assert rewards[a] == aec.rewards[a] and terms[a] == aec.terminations[a]
        assert not infos[mover]["illegal_action"]
        if terms["0"]:
            break
    assert terms["0"] and par.agents == []


def test_render_matches_the_environment():
    raw = jaxenvs.make("TicTacToe-v0", autoreset=False)
    game = AECEnv("TicTacToe-v0", render_mode="ansi")
    game.reset(seed=0)
    game.step(4)
    assert game.render() == raw.render_text(game.state) and "agent 1 (O) to move" in game.render()
