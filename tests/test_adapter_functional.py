"""jaxenvs.adapters.functional.from_functional: one tiny hand-written env per style (gymnax,
TimeStep with and without a discount, Brax, Pgx), each through `check_env`; the flags, masks,
seats and rewards mapped exactly; `verify_port` of each single-agent toy against a Gymnasium
reference with a transition table (the model tier); the style errors; and the ``--port
module:factory`` command-line path of ``jaxenvs check`` and ``jaxenvs verify``.

The corridor every single-agent toy implements: cells 0..4, start in cell 2, action 0 moves left
and 1 right, cells 0 and 4 are absorbing (terminated), reaching cell 4 pays 1; the library's own
time limit cuts the episode after `LIMIT` steps (truncated), in each library's own words.
"""

from __future__ import annotations

import os
import sys
import textwrap
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import require

import jaxenvs  # noqa: E402
from jaxenvs import spaces, struct  # noqa: E402
from jaxenvs.adapters.functional import STYLES, detect_style, from_functional, to_space  # noqa: E402
from jaxenvs.checker import check_env  # noqa: E402

LIMIT = 4
CELLS, START, GOAL = 5, 2, 4


def _move(pos, action):
    pos = jnp.clip(pos + jnp.where(action == 1, 1, -1), 0, CELLS - 1).astype(jnp.int32)
    return pos, (pos == 0) | (pos == GOAL), jnp.where(pos == GOAL, 1.0, 0.0).astype(jnp.float32)


# ---- gymnax style -----------------------------------------------------------------------------------
@struct.dataclass
class GState:
    pos: jax.Array
    time: jax.Array


@struct.dataclass
class GParams:
    max_steps_in_episode: int = LIMIT


class GymnaxCorridor:
    """gymnax 1.0's protocol, with jaxenvs spaces (gymnax-style code of one's own)."""

    default_params = GParams()

    def reset_env(self, key, params):
        state = GState(jnp.int32(START), jnp.int32(0))
        return state.pos, state

    def step_env(self, key, state, action, params):
        pos, done, reward = _move(state.pos, action)
        state = GState(pos, state.time + 1)
        return pos, state, reward, done, {"discount": 1.0 - done.astype(jnp.float32)}

    def is_truncated(self, state, params):
        return state.time >= params.max_steps_in_episode

    def observation_space(self, params):
        return spaces.Discrete(CELLS)

    def action_space(self, params):
        return spaces.Discrete(2)


# ---- TimeStep style: Jumanji's (state, TimeStep) with a discount, and Navix's TimeStep without ---------
class TimeStep(NamedTuple):
    step_type: Any
    reward: Any
    discount: Any
    observation: Any


class JState(NamedTuple):
    pos: Any
    t: Any


class Spec:
    """A dm_env-style DiscreteArray spec (what Jumanji's specs look like to duck typing)."""

    def __init__(self, n):
        self.num_values, self.shape, self.dtype = n, (), np.int32


class JumanjiCorridor:
    observation_spec = Spec(CELLS)
    action_spec = Spec(2)

    def reset(self, key):
        return JState(jnp.int32(START), jnp.int32(0)), TimeStep(jnp.int32(0), jnp.float32(0), jnp.float32(1), jnp.int32(START))

    def step(self, state, action):
        pos, done, reward = _move(state.pos, action)
        t = state.t + 1
        last = done | (t >= LIMIT)
        ts = TimeStep(jnp.where(last, 2, 1).astype(jnp.int32), reward, jnp.where(done, 0.0, 1.0).astype(jnp.float32), pos)
        return JState(pos, t), ts


@struct.dataclass
class NTimestep:
    t: Any
    observation: Any
    reward: Any
    step_type: Any  # Navix's: 0 transition, 1 truncation, 2 termination


class NavixCorridor:
    """Navix's protocol: reset(key, cache=None) -> Timestep, step(timestep, action), spaces with
    minimum/maximum (a Discrete's n computed from them)."""

    class _Discrete:
        def __init__(self, n):
            self.shape, self.dtype, self.minimum, self.maximum = (), np.int32, jnp.asarray(0), jnp.asarray(n - 1)

        @property
        def n(self):
            return self.maximum + 1

    observation_space = _Discrete(CELLS)
    action_space = _Discrete(2)

    def reset(self, key, cache=None):
        return NTimestep(jnp.int32(0), jnp.int32(START), jnp.float32(0), jnp.int32(0))

    def step(self, timestep, action):
        pos, done, reward = _move(timestep.observation, action)
        t = timestep.t + 1
        kind = jnp.where(done, 2, jnp.where(t >= LIMIT, 1, 0)).astype(jnp.int32)
        return NTimestep(t, pos, reward, kind)


# ---- Brax style --------------------------------------------------------------------------------------
@struct.dataclass
class BState:
    pipeline_state: Any
    obs: Any
    reward: Any
    done: Any
    metrics: dict
    info: dict


class BraxCorridor:
    """Brax's protocol (float observation, actions in [-1, 1]: positive moves right), with
    EpisodeWrapper's bookkeeping: done at the limit and info["truncation"] = 1 when not terminal."""

    observation_size, action_size = 1, 1

    def reset(self, key):
        return BState(jnp.int32(START), jnp.full((1,), START, jnp.float32), jnp.float32(0), jnp.float32(0),
                      {"pos": jnp.float32(START)}, {"steps": jnp.float32(0), "truncation": jnp.float32(0)})

    def step(self, state, action):
        pos, done, reward = _move(state.pipeline_state, (action[0] > 0).astype(jnp.int32))
        steps = state.info["steps"] + 1
        cut = (steps >= LIMIT) & ~done
        return BState(pos, pos.astype(jnp.float32)[None], reward, (done | cut).astype(jnp.float32),
                      {"pos": pos.astype(jnp.float32)}, {"steps": steps, "truncation": cut.astype(jnp.float32)})


# ---- Pgx style: a two-player take-away game ---------------------------------------------------------
@struct.dataclass
class PState:
    current_player: Any
    observation: Any
    rewards: Any
    terminated: Any
    truncated: Any
    legal_action_mask: Any
    stones: Any
    first: Any


class PgxTakeAway:
    """Pgx's protocol: 3 stones, a player takes 1 (action 0) or 2 (action 1, illegal with one stone
    left); who takes the last stone wins (+1, the other -1). Pgx draws the first player from the
    key; an illegal move ends the game, mover -1 and other +1. observe(state, p) = (stones, 1 if p
    moves)."""

    num_players, num_actions = 2, 2

    def observe(self, state, player):
        return jnp.stack([state.stones, (player == state.current_player).astype(jnp.int32)])

    def _state(self, stones, mover, first, rewards, terminated):
        mask = jnp.array([True, False]) | (stones >= 2)
        s = PState(mover, None, rewards, terminated, jnp.zeros((), bool), mask, stones, first)
        return s.replace(observation=self.observe(s, mover))

    def init(self, key):
        first = jax.random.bernoulli(key).astype(jnp.int32)
        return self._state(jnp.int32(3), first, first, jnp.zeros(2, jnp.float32), jnp.zeros((), bool))

    def step(self, state, action, key=None):
        illegal = ~state.legal_action_mask[action]
        stones = jnp.maximum(state.stones - (action + 1), 0).astype(jnp.int32)
        won = stones == 0
        sign = jnp.where(illegal, -1.0, jnp.where(won, 1.0, 0.0))
        rewards = jnp.where(jnp.arange(2) == state.current_player, sign, -sign).astype(jnp.float32)
        ended = illegal | won
        mover = jnp.where(ended, state.current_player, 1 - state.current_player).astype(jnp.int32)
        return self._state(jnp.where(illegal, state.stones, stones), mover, state.first, rewards, ended)


TOYS = {"gymnax": GymnaxCorridor, "timestep": JumanjiCorridor, "navix": NavixCorridor, "brax": BraxCorridor,
        "pgx": PgxTakeAway}
SINGLE = ("gymnax", "timestep", "navix", "brax")


@pytest.fixture(scope="module")
def envs():
    return {name: from_functional(toy()) for name, toy in TOYS.items()}


def _rollout(env, actions, seed=0):
    """Each step's (obs, reward, terminated, truncated) for ``actions``, eagerly."""
    obs, state = env.reset(jax.random.key(seed))
    out = [(np.asarray(obs).tolist(),)]
    for i, a in enumerate(actions):
        obs, state, r, te, tr, _ = env.step(jax.random.key(100 + i), state, jnp.asarray(a), None)
        out.append((np.asarray(obs).tolist(), float(np.asarray(r).ravel()[0]), bool(te), bool(tr)))
    return out


def test_styles_are_detected(envs):
    assert {name: detect_style(TOYS[name]()) for name in TOYS} == {
        "gymnax": "gymnax", "timestep": "timestep", "navix": "timestep", "brax": "brax", "pgx": "pgx"}
    assert STYLES == ("pgx", "gymnax", "brax", "timestep")
    assert type(envs["gymnax"]).__name__ == "GymnaxEnv"  # the gymnax/ ids' own wrapper, not a twin


@pytest.mark.parametrize("name", list(TOYS))
def test_check_env_passes_every_style(envs, name):
    report = check_env(envs[name], num_steps=12, num_envs=2)
    assert report.terminated > 0
    if name != "pgx":
        assert report.truncated > 0  # the library's own time limit reached the truncated flag


@pytest.mark.parametrize("name", SINGLE)
def test_terminated_and_truncated_are_mapped_exactly(envs, name):
    env = envs[name]
    # right, right: cell 4 reached on step 2 (terminated, reward 1); left-right x2: cut at LIMIT
    a = (lambda x: np.array([1.0 if x else -1.0], np.float32)) if name == "brax" else (lambda x: np.int32(x))
    won = _rollout(env, [a(1), a(1)])
    assert [s[1:] for s in won[1:]] == [(0.0, False, False), (1.0, True, False)]
    cut = _rollout(env, [a(0), a(1), a(0), a(1)])
    assert [s[1:] for s in cut[1:]] == [(0.0, False, False)] * 3 + [(0.0, False, True)]
    first = won[0][0] if name != "brax" else won[0][0][0]
    assert first == START


def test_dm_env_discount_decides_the_flag_at_last():
    class Toy(JumanjiCorridor):
        def step(self, state, action):  # LAST always, discount 1 on odd steps: truncated, 0: terminated
            t = state.t + 1
            ts = TimeStep(jnp.int32(2), jnp.float32(0), (t % 2).astype(jnp.float32), state.pos)
            return JState(state.pos, t), ts

    env = from_functional(Toy())
    obs, state = env.reset(jax.random.key(0))
    _, state1, _, te1, tr1, _ = env.step(jax.random.key(1), state, jnp.int32(0))
    _, _, _, te2, tr2, _ = env.step(jax.random.key(1), state1, jnp.int32(0))
    assert (bool(te1), bool(tr1), bool(te2), bool(tr2)) == (False, True, True, False)


def test_pgx_seats_masks_rewards_and_illegal_moves(envs):
    env = envs["pgx"]
    assert env.traits.dynamics == "sequential" and env.traits.action_style == "full_action_set"
    assert env.traits.chance == "deterministic"  # the toy's step ignores its key (read off the jaxpr)
    firsts = set()
    for seed in range(8):
        obs, state = env.reset(jax.random.key(seed))
        firsts.add(int(state.seats[0]))
        assert int(env.current_player(state)) == 0  # seat 0 moves first whichever Pgx player it is
        assert obs["observation"].tolist() == [[3, 1], [3, 0]]
        assert obs["action_mask"].tolist() == [[1, 1], [0, 0]] and obs["action_mask"].dtype == jnp.uint8
        # seat 0 takes 2, seat 1 has one stone left: only "take 1" legal, and it wins
        obs, state, r, te, tr, info = env.step(jax.random.key(0), state, jnp.array([1, 0]))
        assert obs["action_mask"].tolist() == [[0, 0], [1, 0]] and r.tolist() == [0.0, 0.0] and not te
        assert int(env.current_player(state)) == 1 and not bool(info["illegal_action"])
        obs, state, r, te, tr, info = env.step(jax.random.key(0), state, jnp.array([0, 0]))
        assert r.tolist() == [-1.0, 1.0] and bool(te) and not bool(tr)
        assert obs["action_mask"].tolist() == [[0, 0], [0, 0]]  # every row zero after the end
    assert firsts == {0, 1}
    obs, state = env.reset(jax.random.key(0))
    _, state, *_ = env.step(jax.random.key(0), state, jnp.array([1, 0]))
    _, _, r, te, _, info = env.step(jax.random.key(0), state, jnp.array([0, 1]))  # seat 1 takes 2 of 1
    assert bool(info["illegal_action"]) and bool(te) and r.tolist() == [1.0, -1.0]


def test_timestep_action_mask_becomes_the_contracts_mask():
    class Obs(NamedTuple):
        board: Any
        action_mask: Any

    class Masked(JumanjiCorridor):
        def reset(self, key):
            state, ts = super().reset(key)
            return state, ts._replace(observation=Obs(ts.observation, jnp.array([False, True])))

        def step(self, state, action):
            state, ts = super().step(state, action)
            return state, ts._replace(observation=Obs(ts.observation, jnp.array([True, state.pos < 3])))

    env = from_functional(Masked(), observation_space={"board": Spec(CELLS), "action_mask": spaces.MultiBinary(2)})
    assert env.traits.action_style == "full_action_set"
    obs, state = env.reset(jax.random.key(0))
    assert obs["observation"].tolist() == START and obs["action_mask"].tolist() == [0, 1]
    assert env.legal_action_mask(state).tolist() == [False, True]
    _, state, _, _, _, info = env.step(jax.random.key(0), state, jnp.int32(0))
    assert bool(info["illegal_action"])  # 0 was masked out; the library's own rule then applies
    assert env.legal_action_mask(state).tolist() == [True, True]
    check_env(env, num_steps=8, num_envs=2)


def test_spaces_are_converted():
    assert to_space(Spec(3)) == spaces.Discrete(3)
    assert to_space(NavixCorridor._Discrete(7)) == spaces.Discrete(7)
    box = to_space(type("B", (), {"shape": (2,), "dtype": np.bool_, "minimum": False, "maximum": True})())
    assert box == spaces.Box(0, 1, (2,), np.uint8)
    env = from_functional(BraxCorridor())
    assert env.action_space() == spaces.Box(-1.0, 1.0, (1,), np.float32)
    assert env.observation_space() == spaces.Box(-np.inf, np.inf, (1,), np.float32)
    with pytest.raises(TypeError, match="cannot convert the space 'x'.*accepted: jaxenvs, gymnax and Gymnasium"):
        to_space("x")


def test_what_cannot_be_adapted_is_named():
    with pytest.raises(TypeError, match=r"cannot adapt builtins\.int .*accepted: a jaxenvs Environment; a Pgx env"):
        from_functional(3)

    class NotATimeStep:
        def reset(self, key):
            return jnp.zeros(2)

        def step(self, state, action):
            return state

    with pytest.raises(TypeError, match="reset returned ShapeDtypeStruct, neither a TimeStep"):
        from_functional(NotATimeStep())
    with pytest.raises(ValueError, match=r"style must be one of \('pgx', 'gymnax', 'brax', 'timestep'\)"):
        from_functional(BraxCorridor(), style="dm")
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['zero_sum'\]"):
        from_functional(BraxCorridor(), traits={"zero_sum": True})
    with pytest.raises(TypeError, match="takes an environment instance, got the class BraxCorridor"):
        from_functional(BraxCorridor)
    grid = jaxenvs.make("GridWorld-v0")
    assert from_functional(grid) is grid


def test_declared_traits_are_held_by_the_checker():
    env = from_functional(PgxTakeAway(), traits={"utility": "zero_sum", "reward_style": "terminal"})
    assert (env.traits.utility, env.traits.reward_style, env.traits.dynamics) == ("zero_sum", "terminal", "sequential")
    liar = from_functional(JumanjiCorridor(), traits={"chance": "stochastic"})  # its step ignores the key
    with pytest.raises(AssertionError, match="key"):
        check_env(liar, num_steps=10, num_envs=2)


# ---- verify_port on the toys against a Gymnasium corridor with a transition table -------------------
def _corridor_reference():
    require("gymnasium")
    import gymnasium as gym
    from gymnasium.wrappers import TimeLimit

    class Corridor(gym.Env):
        observation_space, action_space = gym.spaces.Discrete(CELLS), gym.spaces.Discrete(2)

        def __init__(self):
            self.P = {s: {a: [(1.0, *self._next(s, a))] for a in range(2)} for s in range(CELLS)}
            self.initial_state_distrib = np.eye(CELLS)[START]

        @staticmethod
        def _next(s, a):
            n = min(max(s + (1 if a == 1 else -1), 0), CELLS - 1)
            return n, float(n == GOAL), n in (0, GOAL)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.s = START
            return self.s, {}

        def step(self, a):
            self.s, r, done = self._next(self.s, int(a))
            return self.s, r, done, False, {}

    return lambda: TimeLimit(Corridor(), LIMIT)


@pytest.mark.parametrize("name", ["gymnax", "timestep", "navix"])
def test_verify_port_passes_each_style_against_the_reference(envs, name):
    require("scipy")
    from jaxenvs.testing import verify_port

    r = verify_port(envs[name], _corridor_reference(), num_episodes=100, budget_s=30.0)
    assert r.verdict == "pass" and "model" in r.tiers


def test_verify_port_fails_a_style_mapped_wrong(envs):
    require("scipy")
    from jaxenvs.testing import PortMismatch, verify_port

    class Swapped(JumanjiCorridor):  # a truncation reported as a termination (discount 0 at the limit)
        def step(self, state, action):
            state, ts = super().step(state, action)
            return state, ts._replace(discount=jnp.where(ts.step_type == 2, 0.0, 1.0).astype(jnp.float32))

    with pytest.raises(PortMismatch):
        verify_port(from_functional(Swapped()), _corridor_reference(), num_episodes=100, budget_s=30.0)


# ---- the command line: --port module:factory --------------------------------------------------------
PORT_MODULE = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    from test_adapter_functional import JumanjiCorridor, _corridor_reference
    import jaxenvs

    def corridor():
        return JumanjiCorridor()

    def grid(size=5):
        return jaxenvs.make("GridWorld-v0", size=size)

    def reference():
        return _corridor_reference()()

    def not_an_env():
        return 42

    def broken():
        raise RuntimeError("no such level")
    """
)


@pytest.fixture
def port_dir(tmp_path, monkeypatch):
    (tmp_path / "my_ports.py").write_text(PORT_MODULE.format(tests=os.path.dirname(os.path.abspath(__file__))))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "my_ports", raising=False)
    return tmp_path


def _cli(capsys, *args):
    from jaxenvs.cli import main

    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def test_check_and_verify_a_port_from_a_factory(port_dir, capsys):
    require("scipy")
    rc, out, err = _cli(capsys, "check", "--port", "my_ports:corridor", "--steps", "10", "--num-envs", "2")
    assert rc == 0, err
    assert out.startswith("my_ports:corridor: passed ") and " truncated" in out
    rc, out, err = _cli(capsys, "check", "--port", "my_ports:grid", "-k", "size=4", "--steps", "5", "--num-envs", "2")
    assert rc == 0 and out.startswith("GridWorld-v0: passed "), err
    rc, out, err = _cli(capsys, "verify", "--port", "my_ports:corridor", "--reference", "my_ports:reference",
                        "--episodes", "100")
    assert rc == 0 and "PASS" in out, out + err


@pytest.mark.parametrize("port, message", [
    ("nowhere:corridor", "--port 'nowhere:corridor': cannot import 'nowhere': ModuleNotFoundError"),
    ("my_ports:missing", "--port 'my_ports:missing': 'my_ports' has no callable 'missing'"),
    ("my_ports:not_an_env", "--port 'my_ports:not_an_env' returned int, not an environment: from_functional cannot "
                            "adapt builtins.int"),
    ("my_ports:broken", "--port 'my_ports:broken' raised RuntimeError: no such level"),
    ("my_ports", "--port: expected MODULE:FACTORY (e.g. my_ports:make_env), got 'my_ports'"),
])
def test_a_bad_port_is_one_line_without_a_traceback(port_dir, capsys, port, message):
    for command in (["check"], ["verify", "--reference", "my_ports:reference"]):
        rc, out, err = _cli(capsys, *command, "--port", port)
        assert rc == 2, (out, err)
        assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_port_and_id_are_one_or_the_other(port_dir, capsys):
    rc, _, err = _cli(capsys, "check", "GridWorld-v0", "--port", "my_ports:corridor")
    assert rc == 2 and "check takes an environment ID or --port, not both" in err
    rc, _, err = _cli(capsys, "verify", "--reference", "my_ports:reference")
    assert rc == 2 and "verify needs the port as an environment ID or as --port MODULE:FACTORY" in err
