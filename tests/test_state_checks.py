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


# ---- checked mode: what shapes cannot tell, and messages that say where -------------------------

CHECKED_GRID = jaxenvs.make("GridWorld-v0", checked=True, autoreset=False)


def _grid_state(state):
    while not hasattr(state, "agent"):  # through the wrappers' states (TimeLimit's, checked mode's)
        state = state.env_state
    return state


@pytest.fixture(scope="module")
def checked_grid_step():
    return jaxenvs.checked(CHECKED_GRID.step)


def test_checked_mode_refuses_a_state_made_with_other_params(checked_grid_step):
    from jaxenvs.wrappers.checked import CheckError

    big = jaxenvs.make("GridWorld-v0", checked=True, size=8, autoreset=False)
    keys = jax.random.split(jax.random.key(0), 64)
    states = [jaxenvs.checked(big.reset)(k)[1] for k in keys[:12]]
    # a size-8 state whose agent or target lies beyond the 5 x 5 grid: same shapes, so only checked mode sees it
    outside = next(s for s in states if int(jnp.max(jnp.stack([_grid_state(s).agent, _grid_state(s).target]))) >= 5)
    with pytest.raises(CheckError, match=r"^GridWorld, step 0: the state does not fit these params \(was it made by "
                       r"reset with other params\?\); allowed: states that reset and step with the same params produce$"):
        checked_grid_step(jax.random.key(1), outside, 0)
    inside = jaxenvs.checked(CHECKED_GRID.reset)(keys[0])[1]
    checked_grid_step(jax.random.key(1), inside, 0)  # a state of these params passes


def test_checked_messages_name_the_step_and_have_no_checkify_words(checked_grid_step):
    _, state = jaxenvs.checked(CHECKED_GRID.reset)(jax.random.key(0))
    for _ in range(3):
        _, state, *_ = checked_grid_step(jax.random.key(1), state, 1)
    with pytest.raises(jax.experimental.checkify.JaxRuntimeError) as e:
        checked_grid_step(jax.random.key(1), state, 7)
    assert str(e.value) == "GridWorld, step 3: action out of the action space: 7; allowed: Discrete(4)"


def test_checked_batched_names_each_failing_env_of_the_batch():
    keys = jax.random.split(jax.random.key(0), 4)
    _, states = jaxenvs.checked(CHECKED_GRID.reset, batched=True)(keys)
    step = jaxenvs.checked(CHECKED_GRID.step, batched=True)
    with pytest.raises(jax.experimental.checkify.JaxRuntimeError) as e:
        step(keys, states, jnp.array([0, 1, 9, -2], jnp.int32))
    assert str(e.value).splitlines() == [
        "env 2 of 4: GridWorld, step 0: action out of the action space: 9; allowed: Discrete(4)",
        "env 3 of 4: GridWorld, step 0: action out of the action space: -2; allowed: Discrete(4)",
    ]
    obs, states, *_ = step(keys, states, jnp.array([0, 1, 2, 3], jnp.int32))  # a good batch steps
    assert obs["agent"].shape == (4, 2) and np.all(np.asarray(states.env_state.steps) == 1)
