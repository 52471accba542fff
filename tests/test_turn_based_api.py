"""The turn-based API on jaxenvs.core, the wrappers and jaxenvs.spaces: defaults for envs without
legal actions, forwarding through every wrapper, masked sampling."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import jaxenvs
from jaxenvs import spaces


def test_masked_sample_is_uniform_among_legal_actions():
    space = spaces.Discrete(7)
    mask = jnp.array([[0, 1, 0, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 1]], jnp.uint8)
    n = 20_000
    draws = np.asarray(jax.jit(lambda k: space.sample(k, (n, 3), mask=mask))(jax.random.key(0)))
    assert draws.dtype == np.int32 and draws.shape == (n, 3)
    for row in range(3):
        legal = np.flatnonzero(np.asarray(mask[row]))
        assert np.isin(draws[:, row], legal).all()
        counts = np.bincount(draws[:, row], minlength=7)[legal]
        if len(legal) > 1:
            # uniform among the legal ones: chi-square at level 1e-4 (a 3% bias per action is detected)
            assert scipy.stats.chisquare(counts).pvalue > 1e-4


def test_masked_sample_row_without_legal_action_draws_the_whole_space():
    space = spaces.Discrete(4, start=2)
    draws = np.asarray(space.sample(jax.random.key(1), (4000,), mask=jnp.zeros(4, bool)))
    assert set(np.unique(draws)) == {2, 3, 4, 5}


def test_masked_sample_rejects_bad_masks():
    space = spaces.Discrete(5)
    with pytest.raises(ValueError, match=r"mask of shape \(4,\) does not broadcast to batch_shape \+ \(n,\) = \(5,\)"):
        space.sample(jax.random.key(0), mask=jnp.ones(4, bool))
    with pytest.raises(TypeError, match="mask must be bool or integer"):
        space.sample(jax.random.key(0), mask=jnp.ones(5, jnp.float32))


def test_minimal_env_defaults():
    env = jaxenvs.make("RockPaperScissors-v0")
    _, state = env.reset(jax.random.key(0))
    assert env.legal_action_mask(state).tolist() == [[True] * 3] * 2
    assert env.current_player(state).dtype == jnp.int32 and int(env.current_player(state)) == 0
    assert not bool(env.is_chance_node(state))
    with pytest.raises(NotImplementedError, match="no explicit chance"):
        env.chance_outcomes(state)
    grid = jaxenvs.make("GridWorld-v0")
    assert grid.legal_action_mask(grid.reset(jax.random.key(0))[1]).shape == (4,)


def test_every_wrapper_forwards_the_mask_and_the_mover():
    from jaxenvs.wrappers import RecordEpisodeStatistics, TimeLimit

    base = jaxenvs.make("TicTacToe-v0", autoreset=False)
    env = RecordEpisodeStatistics(jaxenvs.wrappers.AutoReset(TimeLimit(base, 20)))
    checked = jaxenvs.make("TicTacToe-v0", checked=True)
    for e in (env, checked):
        obs, state = jaxenvs.checked(e.reset)(jax.random.key(0)) if e is checked else e.reset(jax.random.key(0))
        mask = jax.jit(e.legal_action_mask)(state)
        assert mask.shape == (2, 9) and mask[0].all() and not mask[1].any()
        np.testing.assert_array_equal(obs["action_mask"], np.asarray(mask, np.uint8))
        assert int(jax.jit(e.current_player)(state)) == 0


def test_masks_vmap():
    env = jaxenvs.make("TicTacToe-v0")
    _, states = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 5))
    assert jax.vmap(env.legal_action_mask)(states).shape == (5, 2, 9)
    assert jax.vmap(env.current_player)(states).shape == (5,)


def test_vector_env_gives_one_mask_and_mover_per_env():
    venv = jaxenvs.VectorEnv(jaxenvs.make("KuhnPoker-v0"), 4)
    _, states = venv.reset(jax.random.key(0))
    assert venv.legal_action_mask(states).shape == (4, 2, 2) and venv.current_player(states).shape == (4,)
    assert venv.is_chance_node(states).all()
    np.testing.assert_allclose(venv.chance_outcomes(states), np.full((4, 3), 1 / 3), rtol=1e-6)
    dealt = venv.apply_chance(states, jnp.arange(4, dtype=jnp.int32) % 3)
    assert np.asarray(dealt.cards)[:, 0].tolist() == [0, 1, 2, 0]
