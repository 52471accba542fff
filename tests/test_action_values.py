"""Bad action values and finished episodes: NaN never looks like a
good result, integers are clipped before they are narrowed to int32, a NaN observation does not
poison running statistics, stepping a finished episode follows each env's documented rule, and
checked mode raises on all of them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import enable_x64
from jax.experimental import checkify

import jaxenvs
from jaxenvs.core import ActionError
from jaxenvs.envs.grid_world import EnvState as GridState
from jaxenvs.envs.point_env import EnvState as PointState
from jaxenvs.wrappers import NormalizeObservation
from jaxenvs.wrappers.normalize import NormalizeObservationState, RunningMeanStd
from jaxenvs.wrappers.checked import CheckedState

KEY = jax.random.key(0)
GRID = jaxenvs.make("GridWorld-v0", autoreset=False, max_episode_steps=None)
POINT = jaxenvs.make("PointEnv-v0", autoreset=False, max_episode_steps=None)
GRID_STEP = jax.jit(GRID.step)
POINT_STEP = jax.jit(POINT.step)
CHECKED_GRID = jaxenvs.make("GridWorld-v0", checked=True, autoreset=False, max_episode_steps=None)
CHECKED_POINT = jaxenvs.make("PointEnv-v0", checked=True, autoreset=False, max_episode_steps=None)
CHECKED_GRID_STEP = jaxenvs.checked(CHECKED_GRID.step)
CHECKED_POINT_STEP = jaxenvs.checked(CHECKED_POINT.step)
GRID_MIDDLE = GridState(agent=jnp.array([2, 2], jnp.int32), target=jnp.array([0, 0], jnp.int32))


# ---- class 4: NaN actions --------------------------------------------------------------------


def test_nan_action_never_looks_like_a_good_result():
    state = PointState(position=jnp.array([0.5, -0.5], jnp.float32))
    obs, state, reward, terminated, truncated, info = POINT_STEP(KEY, state, jnp.array([jnp.nan, 0.0], jnp.float32))
    assert np.isnan(reward) and np.isnan(info["distance"])
    assert np.isnan(obs[0]) and obs[1] == -0.5
    assert not terminated and not truncated
    # and it stays so (NaN is absorbing, never rewarded as the goal)
    _, _, reward, terminated, *_ = POINT_STEP(KEY, state, jnp.zeros(2, jnp.float32))
    assert np.isnan(reward) and not terminated


# ---- class 4: integers beyond int32 ------------------------------------------------------------


@pytest.mark.parametrize(
    "action, moves_as",
    [
        (np.int64(2**32 + 1), 3),  # wrapped to 1 (up) before; clipped: the largest action, down
        (2**40, 3),
        (np.uint32(2**31 + 5), 3),
        (np.int64(-(2**32) + 1), 0),  # wrapped to 1 before; clipped: the smallest, right
        (-(2**40), 0),
        (np.int64(2), 2),
    ],
    ids=["int64 2**32+1", "int 2**40", "uint32 2**31+5", "int64 -2**32+1", "int -2**40", "int64 in range"],
)
def test_wide_integers_are_clipped_before_narrowing(action, moves_as):
    # eager: the host value reaches step whole (jax.jit converts its arguments to int32 first, so
    # under jit pass int32, or turn on x64 as below)
    want = GRID_STEP(KEY, GRID_MIDDLE, jnp.int32(moves_as))
    got = GRID.step(KEY, GRID_MIDDLE, action)
    np.testing.assert_array_equal(got[1].agent, want[1].agent)


def test_wide_integers_under_x64_are_clipped_too():
    with enable_x64(True):
        got = jax.jit(GRID.step)(KEY, GRID_MIDDLE, jnp.asarray(2**31, jnp.int64))  # wrapped to 0 before
    np.testing.assert_array_equal(got[1].agent, [2, 1])  # action 3: down


def test_checked_mode_raises_on_nan_and_wide_integer_actions():
    state = CheckedState(PointState(position=jnp.array([0.5, 0.5], jnp.float32)), jnp.zeros((), bool), jnp.zeros((), jnp.int32))
    with pytest.raises(checkify.JaxRuntimeError, match=r"^PointEnv, step 0: action out of the action space: .*; allowed: Box"):
        CHECKED_POINT_STEP(KEY, state, jnp.array([jnp.nan, 0.0], jnp.float32))
    state = CheckedState(GRID_MIDDLE, jnp.zeros((), bool), jnp.zeros((), jnp.int32))
    # clipped to int32's largest value: outside Discrete(4)
    with pytest.raises(checkify.JaxRuntimeError, match=r"^GridWorld, step 0: action out of the action space: -?\d+; allowed: Discrete\(4\)$"):
        CHECKED_GRID_STEP(KEY, state, jnp.int32(2**31 - 1))
    # a host int64 beyond int32 would be wrapped by jit's argument conversion: refused first
    with pytest.raises(ValueError, match=r"checked: argument\[0\]\[2\] holds integers outside int32's range"):
        CHECKED_GRID_STEP(KEY, state, np.int64(2**32 + 1))


# ---- class 4: multi-agent action layout --------------------------------------------------------


def test_multi_agent_actions_with_the_agent_axis_first_or_an_error():
    env = jaxenvs.make("RockPaperScissors-v0")
    states = jax.eval_shape(jax.vmap(env.reset), jax.random.split(KEY, 3))[1]
    step = jax.vmap(env.step, in_axes=(None, 0, 0))
    assert jax.eval_shape(step, KEY, states, jnp.zeros((3, 2), jnp.int32))[2].shape == (3, 2)
    # transposed, mapped over its agent axis: each env sees 3 "agents"
    with pytest.raises(ActionError, match=r"RockPaperScissors: action has shape \(3,\), expected \(2,\)"):
        jax.eval_shape(jax.vmap(env.step, in_axes=(None, None, 0)), KEY, jax.eval_shape(env.reset, KEY)[1], jnp.zeros((2, 3), jnp.int32))
    # where num_envs == num_agents the shapes agree: the documented rule is agents on the inner axis
    assert "cannot be told apart" in jaxenvs.core.Environment.step.__doc__


# ---- class 4: NormalizeObservation and a NaN observation ----------------------------------------


def test_one_nan_observation_does_not_poison_the_running_statistics():
    env = NormalizeObservation(POINT)
    step = jax.jit(env.step)
    start = PointState(position=jnp.array([0.5, -0.5], jnp.float32))
    state = NormalizeObservationState(start, RunningMeanStd.create((2,)).update(start.position))
    _, state, *_ = step(KEY, state, jnp.array([0.1, 0.1], jnp.float32))
    before = state.obs_rms
    obs, state, reward, *_ = step(KEY, state, jnp.array([jnp.nan, 0.0], jnp.float32))
    assert np.isnan(obs[0]) and np.isnan(reward)  # the fault stays visible where it happened
    for a, b in zip(jax.tree.leaves(state.obs_rms), jax.tree.leaves(before)):
        np.testing.assert_array_equal(a, b)
    # a later good observation is normalised with finite statistics
    fresh = state.replace(env_state=PointState(position=jnp.array([0.2, 0.3], jnp.float32)))
    obs, state, *_ = step(KEY, fresh, jnp.zeros(2, jnp.float32))
    assert np.all(np.isfinite(obs)) and float(state.obs_rms.count) == pytest.approx(float(before.count) + 1)


# ---- class 6: stepping a finished episode without AutoReset -------------------------------------


def test_gridworld_after_the_end_follows_its_documented_rule():
    done = GridState(agent=jnp.array([0, 0], jnp.int32), target=jnp.array([0, 0], jnp.int32))
    # into the wall (left): the agent stays on the target, which pays 1 and terminates again
    _, _, reward, terminated, *_ = GRID_STEP(KEY, done, jnp.int32(2))
    assert (float(reward), bool(terminated)) == (1.0, True)
    # away (right): reward 0, not terminated
    _, state, reward, terminated, *_ = GRID_STEP(KEY, done, jnp.int32(0))
    assert (float(reward), bool(terminated)) == (0.0, False)
    np.testing.assert_array_equal(state.agent, [1, 0])


def test_point_env_after_the_end_walks_on():
    done = PointState(position=jnp.array([0.005, 0.0], jnp.float32))
    _, state, reward, terminated, *_ = POINT_STEP(KEY, done, jnp.array([0.1, 0.0], jnp.float32))
    np.testing.assert_allclose(state.position, [0.105, 0.0], rtol=1e-6)
    assert not terminated and float(reward) == pytest.approx(-0.105)


LOTTERY = jaxenvs.make("Lottery-v0", checked=True, autoreset=False)
NOT_TERMINATED = jnp.zeros((), bool)
FINISHING = [
    # (checked step, a state one step from the end, the action that ends the episode)
    (CHECKED_GRID_STEP, CheckedState(GridState(agent=jnp.array([0, 0], jnp.int32), target=jnp.array([1, 0], jnp.int32)), NOT_TERMINATED, jnp.int32(0)), jnp.int32(0)),
    (CHECKED_POINT_STEP, CheckedState(PointState(position=jnp.array([0.05, 0.0], jnp.float32)), NOT_TERMINATED, jnp.int32(0)), jnp.array([-0.05, 0.0], jnp.float32)),
    (jaxenvs.checked(LOTTERY.step), None, jnp.int32(2)),
]


@pytest.mark.parametrize("step, state, action", FINISHING, ids=["GridWorld", "PointEnv", "Lottery"])
def test_checked_mode_flags_a_step_after_termination(step, state, action):
    if state is None:
        state = jax.jit(LOTTERY.reset)(KEY)[1]
    _, state, _, terminated, *_ = step(KEY, state, action)
    assert terminated
    with pytest.raises(checkify.JaxRuntimeError, match=r"step after the episode terminated; reset first \(or use AutoReset\)"):
        step(KEY, state, action)


def test_checked_mode_with_autoreset_steps_on_after_the_end():
    env = jaxenvs.make("Lottery-v0", checked=True)  # every step ends the episode, AutoReset starts the next
    step = jaxenvs.checked(env.step)
    _, state = jax.jit(env.reset)(KEY)
    for _ in range(2):
        _, state, _, terminated, *_ = step(KEY, state, jnp.int32(2))
        assert terminated
