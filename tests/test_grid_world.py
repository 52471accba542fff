"""GridWorld's exact dynamics (Gymnasium's custom-environment tutorial): every action from every
cell of a 3x3 grid against a numpy recomputation, reward, termination and distance, the reset
distribution (agent uniform, target uniform among the other cells), and out-of-range actions,
which are clipped to the action space."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jaxenvs
from helpers import assert_trees_equal
from jaxenvs.envs.grid_world import ACTION_TO_DIRECTION, EnvParams, EnvState, GridWorld

GRID = GridWorld()


def test_every_action_from_every_cell_matches_the_tutorial():
    size = 3
    params = EnvParams(size=size)
    cells = np.array([(x, y) for x in range(size) for y in range(size)], np.int32)
    agent = np.repeat(cells, len(cells) * 4, axis=0)  # every (agent, target, action) triple
    target = np.tile(np.repeat(cells, 4, axis=0), (len(cells), 1))
    action = np.tile(np.arange(4, dtype=np.int32), len(cells) ** 2)
    states = EnvState(agent=jnp.asarray(agent), target=jnp.asarray(target))
    keys = jax.random.split(jax.random.key(0), len(action))
    step = jax.jit(jax.vmap(GRID.step, (0, 0, 0, None)))
    obs, state, reward, terminated, truncated, info = step(keys, states, jnp.asarray(action), params)
    moved = np.clip(agent + np.array([[1, 0], [0, 1], [-1, 0], [0, -1]])[action], 0, size - 1)
    on_target = np.all(moved == target, axis=1)
    np.testing.assert_array_equal(state.agent, moved)
    np.testing.assert_array_equal(obs["agent"], moved)
    np.testing.assert_array_equal(obs["target"], target)
    np.testing.assert_array_equal(reward, on_target.astype(np.float32))
    np.testing.assert_array_equal(terminated, on_target)
    assert not np.any(truncated) and reward.dtype == jnp.float32 and terminated.dtype == jnp.bool_
    np.testing.assert_array_equal(info["distance"], np.abs(moved - target).sum(1))
    assert GRID.action_space(params).n == len(ACTION_TO_DIRECTION) == 4


def test_reset_draws_the_agent_uniformly_and_the_target_among_the_other_cells():
    size, n = 3, 9 * 8 * 100
    _, states = jax.jit(jax.vmap(GRID.reset, (0, None)))(jax.random.split(jax.random.key(1), n), EnvParams(size=size))
    agent = np.asarray(states.agent[:, 0] + size * states.agent[:, 1])
    target = np.asarray(states.target[:, 0] + size * states.target[:, 1])
    assert np.all(agent != target)
    counts = np.bincount(agent * 9 + target, minlength=81).reshape(9, 9)
    pairs = counts[~np.eye(9, dtype=bool)]  # the 72 allowed (agent, target) pairs, 100 expected each
    assert ((pairs - 100) ** 2 / 100).sum() < 113.58, counts  # chi-square, 71 dof, p = 0.001


def test_grid_world_clips_out_of_range_actions():
    env = jaxenvs.make("GridWorld-v0", autoreset=False)
    keys = jax.random.split(jax.random.key(0), 64)
    _, states = jax.jit(jax.vmap(env.reset))(keys)
    step = jax.jit(jax.vmap(env.step, (0, 0, None)))
    for out_of_range, clipped in ((7, 3), (4, 3), (-1, 0), (-100, 0), (2**31 - 1, 3)):
        got = step(keys, states, jnp.int32(out_of_range))
        want = step(keys, states, jnp.int32(clipped))
        assert_trees_equal(got, want)
    # and the clipped action really moved the agents (down = y - 1, right = x + 1, within the grid)
    down = step(keys, states, jnp.int32(7))[1].env_state.agent
    before = states.env_state.agent
    np.testing.assert_array_equal(down[:, 1], np.maximum(before[:, 1] - 1, 0))
    np.testing.assert_array_equal(down[:, 0], before[:, 0])
