"""`jaxenvs.spaces.Discrete.sample` with a mask draws the index of the legal action as
``floor(bits * count / 2**32)`` from one 32-bit word per value (computed in 32-bit halves), and
`jaxenvs.rollout.random_policy` draws one action for the mover of a turn-based game."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs import spaces
from jaxenvs.rollout import random_policy


def test_masked_draw_is_the_exact_multiply_shift_of_one_word():
    space = spaces.Discrete(9)
    rng = np.random.default_rng(0)
    mask = rng.random((5000, 9)) < 0.5
    mask[:3] = [[True] * 9, [False] * 8 + [True], [False] * 9]  # full, one legal action, none (whole space)
    key = jax.random.key(3)
    draws = np.asarray(jax.jit(lambda k, m: space.sample(k, (5000,), mask=m))(key, mask))
    bits = np.asarray(jax.random.bits(key, (5000,), jnp.uint32)).astype(np.uint64)
    legal = np.where(mask.any(axis=1, keepdims=True), mask, True)
    count = legal.sum(axis=1).astype(np.uint64)
    k = (bits * count) >> np.uint64(32)  # exact in 64 bits
    want = [np.flatnonzero(row)[i] for row, i in zip(legal, k)]
    np.testing.assert_array_equal(draws, want)
    assert draws[1] == 8 and legal[np.arange(5000), draws].all()


@pytest.mark.parametrize("n", [1, 2, 64, 65, 300])
def test_both_forms_of_the_draw_are_the_multiply_shift(n):
    """Up to 64 actions the draw is written out column by column, above it it is a cumsum and an
    argmax: both give the exact multiply-shift index of the legal action, rows with none included."""
    space = spaces.Discrete(n)
    mask = np.random.default_rng(n).random((700, n)) < 0.3
    mask[:2] = [[False] * n, [False] * (n - 1) + [True]]
    key = jax.random.key(n)
    draws = np.asarray(jax.jit(lambda k, m: space.sample(k, (700,), mask=m))(key, mask))
    bits = np.asarray(jax.random.bits(key, (700,), jnp.uint32)).astype(np.uint64)
    legal = np.where(mask.any(axis=1, keepdims=True), mask, True)
    k = (bits * legal.sum(axis=1).astype(np.uint64)) >> np.uint64(32)
    np.testing.assert_array_equal(draws, [np.flatnonzero(row)[i] for row, i in zip(legal, k)])


def test_extreme_words_stay_in_range():
    # bits = 2**32 - 1 gives k = count - 1 (the last legal action), bits = 0 the first
    space = spaces.Discrete(9)
    for word in (0, 2**32 - 1):
        k = ((np.uint64(word) * np.uint64(9)) >> np.uint64(32))
        hi, lo = word >> 16, word & 0xFFFF
        assert ((hi * 9 + ((lo * 9) >> 16)) >> 16) == k
    assert space.sample(jax.random.key(0), mask=jnp.ones(9, bool)).dtype == jnp.int32


def test_random_policy_of_a_turn_based_game_draws_the_movers_action_in_every_row():
    env = jaxenvs.make("TicTacToe-v0", autoreset=False)
    policy = jax.jit(random_policy(env))
    obs, state = env.reset(jax.random.key(0))
    obs, state, *_ = env.step(jax.random.key(0), state, jnp.array([4, 0], jnp.int32))  # X on 4; O to move
    draws = np.stack([np.asarray(policy(k, obs)) for k in jax.random.split(jax.random.key(1), 400)])
    assert draws.shape == (400, 2) and (draws[:, 0] == draws[:, 1]).all()
    counts = np.bincount(draws[:, 1], minlength=9)
    assert counts[4] == 0 and (counts[[0, 1, 2, 3, 5, 6, 7, 8]] > 20).all()  # 8 legal cells, ~50 each
