"""`jaxenvs.wrappers.PlayAgainst`: a seat of a turn-based game as a single-agent env, the opponent
moving inside reset/step; its outcome statistics against random play, exact scripted games, and
the adapters' legal-action masks (info["action_mask"], action_masks(), MaskablePPO on SB3VecEnv)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import jaxenvs
from jaxenvs.wrappers import AutoReset, PlayAgainst

# Uniformly random Tic-Tac-Toe (both agents uniform over the free cells), from the game tree:
# P(first mover wins) = 737/1260, P(second wins) = 121/420, P(draw) = 8/63.
P_FIRST, P_SECOND, P_DRAW = 737 / 1260, 121 / 420, 8 / 63
NUM_ENVS, NUM_STEPS = 256, 40


@pytest.fixture(scope="module")
def game():
    return jaxenvs.make("TicTacToe-v0", autoreset=False)


def lowest_free_cell(key, obs):
    """A deterministic opponent: the legal cell with the smallest index."""
    return jnp.argmax(obs["action_mask"]).astype(jnp.int32)


def always_cell_zero(key, obs):
    return jnp.int32(0)


@pytest.fixture(scope="module")
def outcomes(game):
    """``{seat: final learner rewards}`` of random-legal learner games against the random-legal
    default opponent, seat drawn per episode (NUM_ENVS x NUM_STEPS steps, one compiled program),
    with the illegal-move counts of both sides."""
    auto = AutoReset(PlayAgainst(game, seat="random"))

    def run(key):
        obs, state = jax.vmap(auto.reset)(jax.random.split(key, NUM_ENVS))

        def body(carry, k):
            obs, state = carry
            seat = state.seat  # the seat of the episode this step plays in
            k_act, k_step = jax.random.split(k)
            action = auto.action_space().sample(k_act, batch_shape=(NUM_ENVS,), mask=obs["action_mask"])
            obs, state, reward, term, trunc, info = jax.vmap(auto.step)(jax.random.split(k_step, NUM_ENVS), state, action)
            return (obs, state), (seat, reward, term, info["illegal_action"], info["opponent_illegal_action"])

        _, out = jax.lax.scan(body, (obs, state), jax.random.split(key, NUM_STEPS))
        return out

    seat, reward, term, illegal, opp_illegal = jax.device_get(jax.jit(run)(jax.random.key(7)))
    finals = {s: reward[term & (seat == s)] for s in (0, 1)}
    return finals, int(illegal.sum()), int(opp_illegal.sum())


def _counts(finals):
    return [np.sum(finals == 1), np.sum(finals == 0), np.sum(finals == -1)]


@pytest.mark.parametrize("seat, p_win, p_loss", [(0, P_FIRST, P_SECOND), (1, P_SECOND, P_FIRST)])
def test_random_play_outcomes_match_the_game_tree(outcomes, seat, p_win, p_loss):
    finals, illegal, opp_illegal = outcomes
    assert illegal == 0 and opp_illegal == 0
    counts = _counts(finals[seat])
    assert sum(counts) == finals[seat].size > 1000  # every episode ends in +1, 0 or -1
    p = stats.chisquare(counts, np.array([p_win, P_DRAW, p_loss]) * finals[seat].size).pvalue
    assert p > 1e-4, (counts, p)


def test_random_seat_is_a_fair_coin(outcomes):
    finals, *_ = outcomes
    n0, n1 = finals[0].size, finals[1].size
    assert stats.binomtest(n0, n0 + n1).pvalue > 1e-4, (n0, n1)


def test_scripted_games_as_the_second_seat(game):
    """Learner O against 'lowest free cell' X: X opens on 0 inside reset; O takes 4, X 1, O 8,
    X 2 completes the row (0, 1, 2): the learner's step reports X's win as its -1."""
    env = PlayAgainst(game, policy=lowest_free_cell, seat=1)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    obs, state = reset(jax.random.key(0))
    assert int(state.seat) == 1
    planes = np.asarray(obs["observation"]).reshape(9, 2)  # cell i = plane entry [i // 3, i % 3]
    assert planes[:, 0].tolist() == [0] * 9 and planes[:, 1].tolist() == [1] + [0] * 8
    np.testing.assert_array_equal(obs["action_mask"], [0] + [1] * 8)
    np.testing.assert_array_equal(env.legal_action_mask(state), np.asarray(obs["action_mask"]) == 1)
    assert int(env.current_player(state)) == 0
    rewards, dones = [], []
    for move in (4, 8):
        obs, state, reward, term, trunc, info = step(jax.random.key(1), state, jnp.int32(move))
        rewards.append(float(reward))
        dones.append(bool(term))
        assert not info["illegal_action"] and not info["opponent_illegal_action"]
    assert rewards == [0.0, -1.0] and dones == [False, True]
    assert not np.asarray(obs["action_mask"]).any()
    marks = np.asarray(state.env_state.marks)
    assert marks.tolist() == [0b111, (1 << 4) | (1 << 8)]


def test_learner_win_and_opponent_illegal_move(game):
    # learner X on 3, 4, 5 against 'lowest free cell' O (0, 1): X's third move completes (3, 4, 5)
    env = PlayAgainst(game, policy=lowest_free_cell, seat=0)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    _, state = reset(jax.random.key(0))
    got = []
    for t, move in enumerate((3, 4, 5)):
        _, state, reward, term, _, _ = step(jax.random.key(t), state, jnp.int32(move))
        got.append((float(reward), bool(term)))
    assert got == [(0.0, False), (0.0, False), (1.0, True)]
    assert np.asarray(state.env_state.marks).tolist() == [0b111000, 0b11]
    # an opponent that always plays cell 0 moves illegally once the learner took it: learner +1
    env = PlayAgainst(game, policy=always_cell_zero, seat=0)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    _, state = reset(jax.random.key(0))
    _, state, reward, term, _, info = step(jax.random.key(1), state, jnp.int32(0))
    assert (float(reward), bool(term), bool(info["illegal_action"]), bool(info["opponent_illegal_action"])) == (
        1.0, True, False, True)
    # the learner's own illegal move: -1, and the opponent does not move
    env = PlayAgainst(game, policy=lowest_free_cell, seat=1)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    _, state = reset(jax.random.key(0))  # X took cell 0
    _, state, reward, term, _, info = step(jax.random.key(1), state, jnp.int32(0))
    assert (float(reward), bool(term), bool(info["illegal_action"]), bool(info["opponent_illegal_action"])) == (
        -1.0, True, True, False)


def test_traits_and_checker(game):
    env = PlayAgainst(game, seat="random")
    t = env.traits
    assert (t.num_agents, t.dynamics, t.chance, t.action_style) == (1, "simultaneous", "stochastic", "full_action_set")
    assert not env.multi_agent and env.batched_action_shape() == ()
    jaxenvs.check_env(env, num_envs=4, num_steps=30)


def test_misuse_is_refused(game):
    with pytest.raises(ValueError, match="turn-based env"):
        PlayAgainst(jaxenvs.make("GridWorld-v0", autoreset=False))
    with pytest.raises(ValueError, match="AutoReset inside"):
        PlayAgainst(jaxenvs.make("TicTacToe-v0"))
    with pytest.raises(ValueError, match=r"seat must be an agent index in \[0, 2\) or 'random', got 2"):
        PlayAgainst(game, seat=2)
    with pytest.raises(TypeError, match="policy must be a callable"):
        PlayAgainst(game, policy=3)
    with pytest.raises(ValueError, match="PlayAgainst opponent 'heuristic' is not one of TicTacToe's: 'random'"):
        PlayAgainst(game, policy="heuristic")


def test_a_named_opponent_plays_the_other_seat():
    """PlayAgainst(env, "perfect"): the perfect player never loses; the learner's random moves, in
    either seat, never win (50 games each, on the game's own step)."""
    from jaxenvs.games import random_legal

    env = PlayAgainst(jaxenvs.make("TicTacToe-v0", autoreset=False), policy="perfect", seat="random")

    def game(key):
        k0, key = jax.random.split(key)
        obs, state = env.reset(k0)

        def body(carry):
            key, obs, state, total, done = carry
            key, ka, ks = jax.random.split(key, 3)
            obs, state, r, term, trunc, _ = env.step(ks, state, random_legal(ka, obs))
            return key, obs, state, total + r, done | term | trunc

        out = jax.lax.while_loop(lambda c: ~c[4], body, (key, obs, state, jnp.float32(0.0), jnp.bool_(False)))
        return out[3], out[2].seat

    totals, seats = jax.jit(jax.vmap(game))(jax.random.split(jax.random.key(0), 100))
    assert (np.asarray(totals) <= 0).all() and set(np.asarray(seats).tolist()) == {0, 1}
