"""Exact look-ahead at play time (`jaxenvs.games.search.lookahead_values` / `lookahead_policy`):
the values over the game's own step equal Tic-Tac-Toe's exact minimax values wherever the horizon
reaches the end of the game, and an independent host-side negamax on Connect Four boards; the
guard keeps the wins and drops the losses it sees and leaves the rest to the policy; bad depths and
games it cannot play are clear errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs.games import random_legal
from jaxenvs.games import tic_tac_toe as ttt
from jaxenvs.games.search import lookahead_policy, lookahead_values
from turn_based import c4_obs


def _ttt_obs(code: int):
    digits = [(code // 3**i) % 3 for i in range(9)]
    planes = np.zeros((9, 2), np.int32)
    for i, d in enumerate(digits):
        if d:
            planes[i, d - 1] = 1
    return {"observation": planes.reshape(3, 3, 2), "action_mask": (planes.sum(-1) == 0).astype(np.uint8)}


def test_tic_tac_toe_values_equal_minimax_where_the_horizon_reaches_the_end():
    env = jaxenvs.make("TicTacToe-v0", autoreset=False).unwrapped
    codes = [c for c in ttt.decision_positions() if sum((c // 3**i) % 3 == 0 for i in range(9)) <= 3]
    assert len(codes) > 500
    obs = jax.tree.map(lambda *xs: np.stack(xs), *[_ttt_obs(int(c)) for c in codes])

    @jax.jit
    @jax.vmap
    def values(o):
        return lookahead_values(env, env.state_from_observation(o), 3)

    got = np.asarray(values(obs))
    np.testing.assert_array_equal(got, ttt.move_values()[np.asarray(codes)])


def _c4_negamax(mine: np.ndarray, theirs: np.ndarray, depth: int) -> np.ndarray:
    """Host-side reference: each column's win/loss value for the mover over ``depth`` plies."""
    def wins(b):
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            for r in range(6):
                for c in range(7):
                    cells = [(r + k * dr, c + k * dc) for k in range(4)]
                    if all(0 <= y < 6 and 0 <= x < 7 and b[y, x] for y, x in cells):
                        return True
        return False

    out = np.full(7, -np.inf)
    for col in range(7):
        free = np.flatnonzero(~(mine[:, col] | theirs[:, col]))
        if len(free) == 0:
            continue
        nxt = mine.copy()
        nxt[free[-1], col] = True
        if wins(nxt):
            out[col] = 1.0
        elif (nxt | theirs).all() or depth == 1:
            out[col] = 0.0
        else:
            out[col] = -np.max(_c4_negamax(theirs, nxt, depth - 1))
    return out


def test_connect_four_values_equal_a_host_negamax():
    env = jaxenvs.make("ConnectFour-v0", autoreset=False).unwrapped
    values = jax.jit(lambda o: lookahead_values(env, env.state_from_observation(o), 3))
    key = jax.random.key(5)
    checked = decided = 0
    for game in range(6):
        key, k = jax.random.split(key)
        obs, state = env.reset_env(k, env.default_params)
        for ply in range(42):
            p = int(state.current_player)
            o = jax.tree.map(lambda x: x[p], obs)
            if ply % 3 == 0:
                board = np.asarray(o["observation"]) != 0
                want = _c4_negamax(board[..., 0], board[..., 1], 3)
                got = np.asarray(values(o))
                np.testing.assert_array_equal(got, want)
                checked += 1
                decided += int(np.any(np.isfinite(want) & (want != 0)))
            key, k = jax.random.split(key)
            joint = jnp.zeros(2, jnp.int32).at[p].set(random_legal(k, o))
            obs, state, _, done, _, _ = env.step_env(k, state, joint, env.default_params)
            if bool(done):
                break
    assert checked > 30 and decided > 5  # random games reach positions with wins and losses in sight


def _random_positions(env, num_games: int, seed: int = 1):
    """The mover's observations of ``num_games`` random-legal games of ``env`` (every ply)."""
    def game(key):
        obs, state = env.reset_env(key, env.default_params)

        def ply(carry, k):
            obs, state = carry
            p = state.current_player
            o = jax.tree.map(lambda x: x[p], obs)
            joint = jnp.zeros(2, jnp.int32).at[p].set(random_legal(k, o))
            obs2, state2, _, _, _, _ = env.step_env(k, state, joint, env.default_params)
            keep = lambda new, old: jnp.where(state.terminated, old, new)  # noqa: E731
            return (jax.tree.map(keep, obs2, obs), jax.tree.map(keep, state2, state)), o

        return jax.lax.scan(ply, (obs, state), jax.random.split(key, 42))[1]

    o = jax.jit(jax.vmap(game))(jax.random.split(jax.random.key(seed), num_games))
    o = jax.tree.map(lambda x: np.asarray(x).reshape((-1,) + x.shape[2:]), o)
    live = o["action_mask"].any(-1)
    return jax.tree.map(lambda x: x[live], o)


def test_connect_four_declared_lookahead_equals_the_generic_one():
    from jaxenvs.games import connect_four as c4

    env = jaxenvs.make("ConnectFour-v0", autoreset=False).unwrapped
    assert env.LOOKAHEAD == "jaxenvs.games.connect_four:lookahead_values"
    obs = _random_positions(env, 12)
    legal = obs["action_mask"] != 0
    assert len(legal) > 200
    for depth in (1, 2, 4):
        generic = jax.jit(jax.vmap(lambda o: lookahead_values(env, env.state_from_observation(o), depth)))(obs)
        fast = jax.jit(jax.vmap(lambda o: c4.lookahead_values(o, depth)))(obs)
        np.testing.assert_array_equal(np.where(legal, np.asarray(fast), 9), np.where(legal, np.asarray(generic), 9))
        assert np.all(np.isneginf(np.asarray(fast)[~legal]))
        # positions with a decided move: wins and losses in sight
        assert np.sum(np.any(np.isfinite(np.asarray(fast)) & (np.asarray(fast) != 0), -1)) > 20
    with pytest.raises(ValueError, match="depth must be a positive int"):
        c4.lookahead_values(jax.tree.map(lambda x: x[0], obs), 0)


def test_guard_takes_wins_avoids_losses_and_leaves_the_rest_to_the_policy():
    env = jaxenvs.make("ConnectFour-v0", autoreset=False)
    leftmost = lambda key, obs: jnp.argmax(jnp.asarray(obs["action_mask"]) != 0).astype(jnp.int32)  # noqa: E731
    guarded = jax.jit(lookahead_policy(env, leftmost, 2))
    key = jax.random.key(0)
    # the mover (3 pieces, to move second) wins in column 3; leftmost alone plays column 0
    win = c4_obs(mine=[(5, 3), (4, 3), (3, 3)], theirs=[(5, 0), (5, 1), (5, 5), (4, 0)])
    assert int(guarded(key, win)) == 3
    # the opponent threatens column 6 (three in row 5, column 2 taken): only the block avoids a loss
    block = c4_obs(mine=[(5, 2), (4, 2)], theirs=[(5, 3), (5, 4), (5, 5)])
    assert int(leftmost(key, block)) == 0 and int(guarded(key, block)) == 6
    # nothing in sight within 2 plies: the policy's own move
    quiet = c4_obs(mine=[(5, 3)], theirs=[(5, 4)])
    assert int(guarded(key, quiet)) == 0
    # depth 0: the policy itself; the guard carries its depth
    assert lookahead_policy(env, leftmost, 0) is leftmost
    assert lookahead_policy(env, leftmost, 2).lookahead == 2
    # vmappable
    batch = jax.tree.map(lambda *xs: np.stack(xs), win, block, quiet)
    moves = jax.jit(jax.vmap(lookahead_policy(env, leftmost, 2)))(jax.random.split(key, 3), batch)
    assert np.asarray(moves).tolist() == [3, 6, 0]


def test_guard_on_the_generic_search_tic_tac_toe():
    env = jaxenvs.make("TicTacToe-v0", autoreset=False)
    assert getattr(env.unwrapped, "LOOKAHEAD", None) is None  # the generic look-ahead over step_env
    first_free = lambda key, obs: jnp.argmax(jnp.asarray(obs["action_mask"]) != 0).astype(jnp.int32)  # noqa: E731
    guarded = jax.jit(lookahead_policy(env, first_free, 2))
    # X (cells 0, 8) to move against O (3, 4): O threatens 3-4-5, only cell 5 avoids the loss
    obs = _ttt_obs(3**0 * 1 + 3**8 * 1 + 3**3 * 2 + 3**4 * 2)
    assert int(first_free(jax.random.key(0), obs)) == 1 and int(guarded(jax.random.key(0), obs)) == 5


def test_guard_around_tree_search_searches_among_the_moves_it_keeps():
    pytest.importorskip("mctx")
    from jaxenvs.games.search import search_policy

    env = jaxenvs.make("ConnectFour-v0", autoreset=False)
    # a network that wants column 0 only: 4 simulations alone follow it, the guard leaves it the block only
    wants_left = lambda obs: (jnp.asarray([9.0, 0, 0, 0, 0, 0, 0]), jnp.zeros(()))  # noqa: E731
    block = c4_obs(mine=[(5, 2), (4, 2)], theirs=[(5, 3), (5, 4), (5, 5)])
    searching = search_policy(env, wants_left, 2)
    assert int(jax.jit(searching)(jax.random.key(0), block)) == 0
    assert int(jax.jit(lookahead_policy(env, searching, 2))(jax.random.key(0), block)) == 6


def test_bad_depths_and_games_it_cannot_play():
    env = jaxenvs.make("ConnectFour-v0", autoreset=False)
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="depth must be a non-negative int"):
            lookahead_policy(env, random_legal, bad)
    with pytest.raises(ValueError, match="depth must be a positive int"):
        lookahead_values(env, None, 0)
    with pytest.raises(ValueError, match="look-ahead plays two-player zero-sum"):
        lookahead_policy(jaxenvs.make("KuhnPoker-v0"), random_legal, 2)
