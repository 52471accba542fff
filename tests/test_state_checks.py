"""State checks: a state whose tree, shapes or dtypes differ from what
``reset`` returns is refused when ``step`` is traced (or called), naming the leaf; a missing
``jax.vmap`` is named as such. Everything here is checked on shapes, so it runs without computing."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs.core import StateError

KEY = jax.random.key(0)
GRID = jaxenvs.make("GridWorld-v0", autoreset=False)
POINT = jaxenvs.make("PointEnv-v0")
RACE = jaxenvs.make("HurdleRace-v0")

# shapes and dtypes only: jax.eval_shape traces reset without running it
GRID_STATE = jax.eval_shape(GRID.reset, KEY)[1]
GRID_BATCH = jax.eval_shape(jax.vmap(GRID.reset), jax.random.split(KEY, 4))[1]
RACE_BATCH = jax.eval_shape(jax.vmap(RACE.reset), jax.random.split(KEY, 2))[1]
POINT_STATE = jax.eval_shape(POINT.reset, KEY)[1]


def _step(env, state, action):
    return jax.eval_shape(env.step, KEY, state, action)


CASES = [
    # (env, state, action, message) — the examples first
    ("batch of 4 GridWorld states", GRID, GRID_BATCH, 1,
     r"state\.env_state\.agent has shape \(4, 2\).*reset gives shape \(2,\).*did you forget jax\.vmap\?"),
    ("batch of HurdleRace states (batch == num_agents)", RACE, RACE_BATCH, jnp.zeros(2, jnp.int32),
     r"state\.pos has shape \(2, 2\).*did you forget jax\.vmap\?"),
    ("a plain dict", GRID, {"agent": jnp.zeros(2, jnp.int32), "target": jnp.ones(2, jnp.int32)}, 1,
     r"GridWorld\.step got a state of another structure than its reset returns: dict .* instead of TimeLimitState"),
    ("another env's state", GRID, POINT_STATE, 1,
     r"GridWorld\.step got a state of another structure"),
    ("a float leaf", GRID, jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, jnp.float32), GRID_STATE), 1,
     r"state\.env_state\.agent has shape \(2,\) and dtype float32, reset gives shape \(2,\) and dtype int32"),
    ("a leaf of another shape", GRID, GRID_STATE.replace(env_state=GRID_STATE.env_state.replace(agent=jax.ShapeDtypeStruct((3,), jnp.int32))), 1,
     r"agent has shape \(3,\).*\(a state of other params' shapes or of another environment\?\)"),
]


@pytest.mark.parametrize("env, state, action, match", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_wrong_state_is_refused_when_traced(env, state, action, match):
    with pytest.raises(StateError, match=match):
        _step(env, state, action)


def test_the_right_state_passes_in_every_form():
    # host numpy leaves and Python scalars are canonicalised (int64 -> int32 without x64)
    host = jax.tree.map(lambda x: np.zeros(x.shape, np.int64), GRID_STATE)
    out = _step(GRID, host, 1)
    assert out[2].shape == () and out[3].shape == ()
    # under vmap the per-env state is checked, so a batch through jax.vmap passes
    out = jax.eval_shape(jax.vmap(GRID.step, in_axes=(None, 0, None)), KEY, GRID_BATCH, 1)
    assert out[2].shape == (4,) and out[3].shape == (4,)
    assert issubclass(StateError, TypeError)


def test_state_check_costs_nothing_in_the_compiled_step():
    # the compiled program of a checked step is the one of step_env: the check adds no operation
    state = GRID_STATE
    checked = jax.jit(GRID.step).lower(KEY, state, jnp.int32(1)).as_text()
    raw = jax.jit(lambda k, s, a: GRID.step_env(k, s, a, GRID.default_params)).lower(KEY, state, jnp.int32(1)).as_text()
    count = lambda text: sum(line.strip().startswith("%") for line in text.splitlines())  # noqa: E731
    assert count(checked) == count(raw)
