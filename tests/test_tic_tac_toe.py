"""TicTacToe-v0: exact dynamics, and a differential test against PettingZoo's tictactoe_v3 (random
legal and illegal games replayed in lockstep: observations, masks, mover, rewards, termination)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import jaxenvs
from turn_based import lockstep_counts, play_moves

N_GAMES = 400
ILLEGAL_PROB = 0.03  # per move: an occupied cell instead of a legal one


@pytest.fixture(scope="module")
def env():
    return jaxenvs.make("TicTacToe-v0", autoreset=False)


def _play(env, moves):
    return play_moves(env, moves, idle=7)


def test_diagonal_win_and_planes(env):
    # X: 0, 4, 8 (the diagonal (0, 4, 8)); O: 1, 2
    steps = _play(env, [0, 1, 4, 2, 8])
    assert [s[3] for s in steps] == [False] * 4 + [True]
    assert [s[2].tolist() for s in steps] == [[0, 0]] * 4 + [[1, -1]]
    obs = np.asarray(steps[-1][0]["observation"])
    x_cells, o_cells = [0, 4, 8], [1, 2]
    for cell in range(9):
        r, c = divmod(cell, 3)
        assert obs[0, r, c].tolist() == [cell in x_cells, cell in o_cells]
        assert obs[1, r, c].tolist() == [cell in o_cells, cell in x_cells]
    assert np.asarray(steps[-1][0]["action_mask"]).sum() == 0


def test_second_player_wins_and_draw(env):
    # O completes the column line (2, 5, 8)
    steps = _play(env, [0, 2, 1, 5, 3, 8])
    assert steps[-1][3] and steps[-1][2].tolist() == [-1, 1]
    # a full board without a line: X 0 1 5 6 8, O 2 3 4 7
    steps = _play(env, [0, 2, 1, 3, 5, 4, 6, 7, 8])
    assert [s[3] for s in steps] == [False] * 8 + [True]
    assert steps[-1][2].tolist() == [0, 0]


@pytest.mark.parametrize("bad", [4, -1, 9])
def test_illegal_move_ends_the_game(env, bad):
    steps = _play(env, [4, bad])  # agent 1 plays an occupied cell or out of range
    _, state, reward, terminated, illegal = steps[-1]
    assert illegal and terminated and reward.tolist() == [1, -1]
    assert not np.asarray(env.legal_action_mask(state)).any()


def test_non_movers_row_is_ignored(env):
    _, state = env.reset(jax.random.key(0))
    outs = [env.step(jax.random.key(0), state, jnp.array([4, other], jnp.int32)) for other in (-5, 4, 100)]
    for out in outs[1:]:
        for x, y in zip(jax.tree.leaves(out), jax.tree.leaves(outs[0])):
            np.testing.assert_array_equal(x, y)


def test_checked_mode_names_the_illegal_action():
    env = jaxenvs.make("TicTacToe-v0", checked=True)
    reset, step = jaxenvs.checked(env.reset), jaxenvs.checked(env.step)
    _, state = reset(jax.random.key(0))
    _, state, *_ = step(jax.random.key(0), state, jnp.array([4, 99], jnp.int32))  # 99: not the mover's row
    with pytest.raises(checkify.JaxRuntimeError, match=r"agent 1's action 4 is not among the legal actions.*\[1 1 1 1 0 1 1 1 1\]"):
        step(jax.random.key(0), state, jnp.array([0, 4], jnp.int32))


def test_random_policy_never_plays_illegal_moves():
    """10,000 random games (auto-reset, masked random policy): no illegal move."""
    from jaxenvs.rollout import random_policy, rollout

    env = jaxenvs.make("TicTacToe-v0")
    traj = rollout(env, jax.random.key(0), random_policy(env), num_steps=80, num_envs=1024, record_states=False)
    games = int(np.asarray(traj.terminated).sum())
    assert games >= 10_000
    assert not np.asarray(traj.info["illegal_action"]).any()
    assert np.asarray(traj.reward).sum(-1).max() == 0 and np.asarray(traj.reward).sum(-1).min() == 0  # zero-sum


def test_rendering(env):
    steps = _play(env, [0, 4])  # X in cell 0 (column 0, row 0), O in cell 4 (the centre)
    state = steps[-1][1]
    frame = np.asarray(jax.jit(env.render)(state))
    assert frame.shape == (192, 192, 3) and frame.dtype == np.uint8
    assert tuple(frame[32, 32]) == (255, 0, 0)  # the cross's centre
    assert tuple(frame[96, 96 - 20]) == (0, 0, 255)  # on the ring around the centre cell
    assert env.render_text(state).splitlines() == ["X . .", ". O .", ". . .", "agent 0 (X) to move"]


def test_lockstep_against_pettingzoo_covers_wins_losses_draws(env):
    games, n_illegal, n_plies = lockstep_counts(env, "tictactoe_v3", N_GAMES, ILLEGAL_PROB, 9, 9)
    assert n_illegal >= 10 and n_plies > 5 * N_GAMES  # the sample covers illegal moves and long games
    finals = [tuple(plies[-1]["rewards"]) for _, plies in games if not plies[-1]["illegal"]]
    assert {(1, -1), (-1, 1), (0, 0)} <= set(finals)
