"""Actions: structure errors at trace time, the documented out-of-range behaviour, checked mode."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import jaxenvs
from helpers import assert_trees_equal
from jaxenvs import spaces
from jaxenvs.core import ActionError, Environment, Traits
from jaxenvs.wrappers import CheckedActions


class Nudge(Environment):
    """obs float32[2] = position; action Box(-1, 1, (2,)) float32 moves it (no clipping)."""

    traits = Traits(chance="deterministic")

    def reset_env(self, key, params):
        return jnp.zeros(2, jnp.float32), jnp.zeros(2, jnp.float32)

    def step_env(self, key, state, action, params):
        state = state + action
        return state, state, -jnp.sum(state**2), jnp.zeros((), bool), jnp.zeros((), bool), {}

    def observation_space(self, params=None):
        return spaces.Box(-np.inf, np.inf, (2,))

    def action_space(self, params=None):
        return spaces.Box(-1.0, 1.0, (2,))


class Pair(Nudge):
    """Two agents, each with a Discrete(3) action; obs float32[2, 2]."""

    traits = Traits(num_agents=2, chance="deterministic")

    def reset_env(self, key, params):
        return jnp.zeros((2, 2), jnp.float32), jnp.zeros(2, jnp.float32)

    def step_env(self, key, state, action, params):
        state = state + action.astype(jnp.float32)
        obs = jnp.stack([state, state[::-1]])
        return obs, state, -state, jnp.zeros((), bool), jnp.zeros((), bool), {}

    def action_space(self, params=None):
        return spaces.Discrete(3)


@pytest.fixture(scope="module")
def grid():
    env = jaxenvs.make("GridWorld-v0", autoreset=False)
    obs, state = env.reset(jax.random.key(0))
    return env, state


# ---- wrong shape or dtype: ActionError while tracing ---------------------------------------------


@pytest.mark.parametrize(
    "action,match",
    [
        (jnp.array([1], jnp.int32), r"action has shape \(1,\), expected \(\) for action space Discrete\(4\)"),
        (jnp.zeros((2, 2), jnp.int32), r"shape \(2, 2\), expected \(\)"),
        (jnp.float32(1.0), r"dtype float32, expected an integer for action space Discrete\(4\)"),
        (1.0, r"expected an integer for action space Discrete\(4\)"),
        (True, r"dtype bool, expected an integer"),  # jit turns a Python bool into a bool array
        (jnp.bool_(True), r"dtype bool, expected an integer"),
    ],
)
def test_grid_world_action_structure_errors_under_jit(grid, action, match):
    env, state = grid
    with pytest.raises(ActionError, match=match):
        jax.jit(env.step)(jax.random.key(1), state, action)


def test_action_error_is_a_type_error_raised_while_tracing(grid):
    env, state = grid
    with pytest.raises(TypeError, match="GridWorld: action has shape"):
        jax.eval_shape(env.step, jax.random.key(1), state, jnp.zeros(3, jnp.int32))
    # outside jit a Python bool is caught before it is silently read as 0 or 1
    with pytest.raises(ActionError, match=r"action True is a bool; expected action space Discrete\(4\)"):
        env.step(jax.random.key(1), state, True)


def test_box_action_needs_a_float_of_the_right_shape():
    env = Nudge()
    obs, state = env.reset(jax.random.key(0))
    step = jax.jit(env.step)
    box = r"action space Box\(-1.0, 1.0, \(2,\), float32\)"
    with pytest.raises(ActionError, match=r"dtype int32, expected a float for " + box):
        step(jax.random.key(1), state, jnp.array([1, 0], jnp.int32))
    with pytest.raises(ActionError, match=r"shape \(3,\), expected \(2,\)"):
        step(jax.random.key(1), state, jnp.zeros(3, jnp.float32))
    obs, *_ = step(jax.random.key(1), state, jnp.array([0.5, -0.25], jnp.float32))
    np.testing.assert_array_equal(obs, [0.5, -0.25])


def test_multi_agent_action_needs_the_agent_axis():
    env = Pair()
    _, state = env.reset(jax.random.key(0))
    expected = r"shape \(\), expected \(2,\) for action space Discrete\(3\) \(batched action shape \(2,\)\)"
    with pytest.raises(ActionError, match=expected):
        jax.jit(env.step)(jax.random.key(1), state, jnp.int32(1))
    assert env.batched_action_shape() == (2,)
    _, state, reward, *_ = jax.jit(env.step)(jax.random.key(1), state, jnp.array([2, 1], jnp.int32))
    np.testing.assert_array_equal(reward, [-2.0, -1.0])


def test_integer_actions_of_any_int_dtype_are_accepted(grid):
    env, state = grid
    a = jax.jit(env.step)(jax.random.key(1), state, jnp.int32(0))
    for action in (0, np.int64(0), jnp.uint8(0), np.int16(0)):
        b = jax.jit(env.step)(jax.random.key(1), state, action)
        assert_trees_equal(a, b)


# ---- checked mode ---------------------------------------------------------------------------------


def test_checked_mode_raises_on_out_of_range_actions():
    env = jaxenvs.make("GridWorld-v0", checked=True)
    obs, state = env.reset(jax.random.key(0))
    step = jaxenvs.checked(env.step)
    for bad in (4, -1, 100):
        with pytest.raises(checkify.JaxRuntimeError, match=r"GridWorld, step \d+: action out of the action space: .*; allowed: Discrete\(4\)"):
            step(jax.random.key(1), state, jnp.int32(bad))


def test_checked_mode_passes_valid_actions_unchanged():
    checked_env = jaxenvs.make("GridWorld-v0", checked=True)
    plain_env = jaxenvs.make("GridWorld-v0")
    _, state = plain_env.reset(jax.random.key(0))
    _, checked_state = checked_env.reset(jax.random.key(0))
    assert_trees_equal(checked_env.unwrapped_state(checked_state), plain_env.unwrapped_state(state))
    step = jaxenvs.checked(checked_env.step)
    for a in range(4):
        got = step(jax.random.key(1), checked_state, jnp.int32(a))
        want = jax.jit(plain_env.step)(jax.random.key(1), state, jnp.int32(a))
        # the checked state adds a terminated flag around the environment's state
        assert_trees_equal(checked_env.unwrapped_state(got[1]), plain_env.unwrapped_state(want[1]))
        assert_trees_equal(got[:1] + got[2:], want[:1] + want[2:])


def test_checked_mode_under_vmap_raises_if_any_action_is_invalid():
    env = jaxenvs.make("GridWorld-v0", checked=True)
    keys = jax.random.split(jax.random.key(0), 8)
    _, states = jax.jit(jax.vmap(env.reset))(keys)
    step = jaxenvs.checked(jax.vmap(env.step))
    actions = jnp.arange(8, dtype=jnp.int32) % 4
    step(keys, states, actions)  # all valid: no error
    with pytest.raises(checkify.JaxRuntimeError, match="action out of the action space"):
        step(keys, states, actions.at[5].set(9))


def test_checked_mode_rejects_out_of_box_and_nan_actions():
    env = CheckedActions(Nudge())
    _, state = env.reset(jax.random.key(0))
    step = jaxenvs.checked(env.step)
    obs, *_ = step(jax.random.key(1), state, jnp.array([1.0, -1.0], jnp.float32))
    np.testing.assert_array_equal(obs, [1.0, -1.0])
    for bad in ([1.5, 0.0], [0.0, np.nan]):
        with pytest.raises(checkify.JaxRuntimeError, match=r"Nudge, step \d+: action out of the action space: .*; allowed: Box"):
            step(jax.random.key(1), state, jnp.array(bad, jnp.float32))


def test_checked_env_traced_without_checked_says_so():
    from jaxenvs.wrappers.checked import NotCheckedError

    env = jaxenvs.make("GridWorld-v0", checked=True)
    key = jax.random.key(0)
    _, state = env.reset(key)
    with pytest.raises(NotCheckedError, match=r"GridWorld was made with checked=True, so its reset/step must run under jaxenvs.checked"):
        jax.jit(env.step)(key, state, jnp.int32(1))
    with pytest.raises(NotCheckedError, match="jaxenvs.checked"):
        jax.vmap(env.step, in_axes=(None, None, 0))(key, state, jnp.zeros(2, jnp.int32))
    # eager calls and jaxenvs.checked (jitted or not) run the checks
    assert float(env.step(key, state, jnp.int32(1))[2]) in (0.0, 1.0)
    stepped = jaxenvs.checked(env.step, jit=False)
    assert stepped(key, state, jnp.int32(1))[1].env_state.env_state.agent.shape == (2,)
    with pytest.raises(checkify.JaxRuntimeError, match="action out of the action space"):
        stepped(key, state, jnp.int32(7))


@pytest.mark.parametrize("bad", ["up", None, b"1", np.array(["a"]), object()])
def test_actions_that_are_not_numbers_name_the_action_space(grid, bad):
    env, state = grid
    with pytest.raises(ActionError, match=r"GridWorld: action .* is not a number or an array of numbers; expected action space Discrete\(4\)"):
        env.step(jax.random.key(0), state, bad)
