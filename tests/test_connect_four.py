"""ConnectFour-v0: exact dynamics, and a differential test against PettingZoo's connect_four_v3
(random legal and illegal games replayed in lockstep: observations, masks, mover, rewards,
termination)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs.envs.connect_four import four_in_a_row
from turn_based import lockstep_counts, play_moves

N_GAMES = 300
ILLEGAL_PROB = 0.2  # per move where a column is full: that column instead of a legal one


@pytest.fixture(scope="module")
def env():
    return jaxenvs.make("ConnectFour-v0", autoreset=False)


def test_lockstep_against_pettingzoo_covers_both_winners(env):
    games, n_illegal, n_plies = lockstep_counts(env, "connect_four_v3", N_GAMES, ILLEGAL_PROB, 42, 7)
    assert n_illegal >= 5 and n_plies > 15 * N_GAMES
    finals = {tuple(plies[-1]["rewards"]) for _, plies in games if not plies[-1]["illegal"]}
    assert {(1, -1), (-1, 1)} <= finals


def test_four_in_a_row_directions():
    def board(cells):
        b = np.zeros((6, 7), bool)
        for r, c in cells:
            b[r, c] = True
        return jnp.asarray(b)

    f = jax.jit(four_in_a_row)
    assert f(board([(5, 0), (5, 1), (5, 2), (5, 3)]))
    assert f(board([(2, 6), (3, 6), (4, 6), (5, 6)]))
    assert f(board([(0, 0), (1, 1), (2, 2), (3, 3)]))
    assert f(board([(5, 3), (4, 4), (3, 5), (2, 6)]))
    assert not f(board([(5, 0), (5, 1), (5, 2), (4, 3)]))
    assert not f(board([(5, 4), (5, 5), (5, 6), (4, 0)]))  # no wrap-around between rows
    assert not f(board([(0, 0), (1, 1), (2, 2), (4, 4)]))


def _play(env, moves):
    return play_moves(env, moves, idle=3)


def test_vertical_win_pieces_fall_to_the_bottom(env):
    steps = _play(env, [0, 1, 0, 1, 0, 1, 0])  # agent 0 stacks four in column 0
    assert [s[3] for s in steps] == [False] * 6 + [True]
    assert steps[-1][2].tolist() == [1, -1]
    board = np.asarray(steps[-1][1].board)
    assert board[2:, 0].tolist() == [1, 1, 1, 1] and board[:2, 0].tolist() == [0, 0]
    assert board[3:, 1].tolist() == [2, 2, 2]
    planes = np.asarray(steps[-1][0]["observation"])
    np.testing.assert_array_equal(planes[0, ..., 0], board == 1)
    np.testing.assert_array_equal(planes[1, ..., 0], board == 2)
    np.testing.assert_array_equal(planes[1, ..., 1], board == 1)


def test_full_column_is_illegal_and_ends_the_game(env):
    steps = _play(env, [2, 2, 2, 2, 2, 2])
    mask = np.asarray(env.legal_action_mask(steps[-1][1]))
    assert mask[0].tolist() == [True, True, False, True, True, True, True] and not mask[1].any()
    steps = _play(env, [2, 2, 2, 2, 2, 2, 2])
    _, state, reward, terminated, illegal = steps[-1]
    assert illegal and terminated and reward.tolist() == [-1, 1]


def test_draw_on_a_full_board(env):
    # columns filled in pairs so that no four line up: a known drawn sequence
    order = [0, 1, 0, 1, 0, 1, 1, 0, 1, 0, 1, 0, 2, 3, 2, 3, 2, 3, 3, 2, 3, 2, 3, 2, 4, 5, 4, 5, 4, 5, 5, 4, 5, 4, 5, 4, 6, 6, 6, 6, 6, 6]
    steps = _play(env, order)
    assert [s[3] for s in steps].index(True) == 41
    assert steps[-1][2].tolist() == [0, 0] and not steps[-1][4]


def test_random_policy_never_plays_illegal_moves():
    from jaxenvs.rollout import random_policy, rollout

    env = jaxenvs.make("ConnectFour-v0")
    traj = rollout(env, jax.random.key(0), random_policy(env), num_steps=200, num_envs=1024, record_states=False)
    assert int(np.asarray(traj.terminated).sum()) >= 5_000
    assert not np.asarray(traj.info["illegal_action"]).any()


def test_rendering(env):
    state = _play(env, [3, 3])[-1][1]  # agent 0 at the bottom of column 3, agent 1 above it
    frame = np.asarray(jax.jit(env.render)(state))
    assert frame.shape == (192, 224, 3) and frame.dtype == np.uint8
    assert tuple(frame[5 * 32 + 16, 3 * 32 + 16]) == (255, 0, 0)
    assert tuple(frame[4 * 32 + 16, 3 * 32 + 16]) == (0, 0, 0)
    assert tuple(frame[5 * 32 + 16, 0 * 32 + 16]) == (255, 255, 255)
    assert tuple(frame[0, 0]) == (30, 80, 200)
    lines = env.render_text(state).splitlines()
    assert lines[5] == ". . . X . . ." and lines[4] == ". . . O . . ." and lines[-1] == "agent 0 (X) to move"


def test_the_game_core_win_tests_agree_on_random_positions():
    """The env's win test after a move (`four_in_a_row` of the board with the piece dropped) and
    the look-ahead's before it (`wins_at_once`: the landing cell completes a line) are one rule:
    equal for every open column of 400 positions of random play (no line yet), both players."""
    from jaxenvs.games import connect_four as core

    rng = np.random.default_rng(0)
    boards = []
    while len(boards) < 400:
        mine, theirs, heights = np.zeros((6, 7), bool), np.zeros((6, 7), bool), np.zeros(7, np.int32)
        for _ in range(rng.integers(4, 30)):
            open_cols = np.flatnonzero(heights < 6)
            c = rng.choice(open_cols)
            mine[5 - heights[c], c] = True
            heights[c] += 1
            if bool(four_in_a_row(jnp.asarray(mine))):
                break
            mine, theirs = theirs, mine
            boards.append((mine.copy(), heights.copy()))
    mine, heights = (jnp.asarray(np.stack(x)) for x in zip(*boards[:400]))

    def both(mine, heights):
        after = jax.vmap(lambda c: four_in_a_row(core.drop(mine, heights, c)[0]))(jnp.arange(7))
        return core.wins_at_once(mine, heights), after & core.open_columns(heights)

    before, after = jax.jit(jax.vmap(both))(mine, heights)
    np.testing.assert_array_equal(np.asarray(before), np.asarray(after))
    assert 20 < int(np.sum(np.asarray(before))) < 400 * 7 // 2  # wins in sight, and not everywhere
