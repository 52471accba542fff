"""Tree search at play time (`jaxenvs.games.search`): with a network that knows nothing (uniform
logits, value 0) the search alone, through the game's own step, must take an immediate win and
block the opponent's in Tic-Tac-Toe and Connect Four (exact positions, deterministic: no Gumbel
noise); it is jittable and vmappable; games it cannot play and a missing mctx are clear errors."""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs

pytest.importorskip("mctx")
from jaxenvs.games.search import search_policy, supports_search  # noqa: E402
from turn_based import c4_obs  # noqa: E402

SIMS = 48


def know_nothing(n):
    return lambda obs: (jnp.zeros(n), jnp.zeros(()))


def ttt_obs(mine, theirs):
    planes = np.zeros((9, 2), np.int32)
    planes[mine, 0] = 1
    planes[theirs, 1] = 1
    return {"observation": planes.reshape(3, 3, 2), "action_mask": (planes.sum(-1) == 0).astype(np.uint8)}


def stack(*obs):
    return jax.tree.map(lambda *xs: np.stack(xs), *obs)


def test_search_alone_wins_and_blocks_tic_tac_toe():
    env = jaxenvs.make("TicTacToe-v0", autoreset=False)
    policy = jax.jit(jax.vmap(search_policy(env, know_nothing(9), SIMS)))
    positions = [
        (ttt_obs(mine=[0, 1], theirs=[3, 4]), 2),        # X completes column 0 (cells 0, 1, 2)
        (ttt_obs(mine=[0, 8], theirs=[4, 3]), 5),        # X (to move with 2 each) must block 3-4-5
        (ttt_obs(mine=[4], theirs=[0, 1]), 2),           # O blocks 0-1-2
        (ttt_obs(mine=[0, 3, 7], theirs=[4, 8, 5]), 6),  # win 0-3-6 beats blocking 2-5-8
    ]
    obs = stack(*[p for p, _ in positions])
    moves = np.asarray(policy(jax.random.split(jax.random.key(0), len(positions)), obs))
    assert moves.tolist() == [m for _, m in positions]
    # greedy search is deterministic: another key, the same moves
    again = np.asarray(policy(jax.random.split(jax.random.key(1), len(positions)), obs))
    assert again.tolist() == moves.tolist()


def test_search_alone_wins_and_blocks_connect_four():
    env = jaxenvs.make("ConnectFour-v0", autoreset=False)
    # seeing the block takes every reply to every move (7 x 7): a larger budget
    policy = jax.jit(jax.vmap(search_policy(env, know_nothing(7), 160)))
    positions = [
        (c4_obs(mine=[(5, 0), (5, 1), (5, 2)], theirs=[(4, 0), (4, 1), (4, 2)]), 3),  # win on the bottom row
        (c4_obs(mine=[(5, 0), (5, 1), (4, 6)], theirs=[(5, 4), (4, 4), (3, 4)]), 4),  # block the column
    ]
    obs = stack(*[p for p, _ in positions])
    moves = np.asarray(policy(jax.random.split(jax.random.key(0), len(positions)), obs))
    assert moves.tolist() == [m for _, m in positions]


def test_games_search_cannot_play_and_bad_budgets():
    kuhn = jaxenvs.make("KuhnPoker-v0", autoreset=False)
    assert not supports_search(kuhn) and supports_search(jaxenvs.make("ConnectFour-v0"))
    with pytest.raises(ValueError, match="perfect information .* KuhnPoker does not"):
        search_policy(kuhn, know_nothing(2), 8)
    ttt = jaxenvs.make("TicTacToe-v0", autoreset=False)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="num_simulations must be a positive int"):
            search_policy(ttt, know_nothing(9), bad)


def test_without_mctx_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mctx", None)  # import mctx raises ImportError
    with pytest.raises(ImportError, match=r"tree search needs mctx .*pip install 'jaxenvs\[search\]'"):
        search_policy(jaxenvs.make("TicTacToe-v0", autoreset=False), know_nothing(9), 8)
