"""RockPaperScissors-v0: the full payoff matrix, zero sum, termination, info, out-of-range
actions, jit/vmap/scan and rendering."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import jaxenvs

BATCH = 64
ROCK, PAPER, SCISSORS = 0, 1, 2
BEATS = {(ROCK, SCISSORS), (SCISSORS, PAPER), (PAPER, ROCK)}  # (winner, loser)
PAIRS = np.array(list(itertools.product(range(3), repeat=2)), np.int32)  # all 9 (agent 0, agent 1)


@pytest.fixture(scope="module")
def env():
    return jaxenvs.make("RockPaperScissors-v0", autoreset=False)


@pytest.fixture(scope="module")
def rounds(env):
    """Every one of the 9 action pairs played from a fresh state, batched."""
    _, state = env.reset(jax.random.key(0))
    step = jax.jit(jax.vmap(env.step, in_axes=(None, None, 0)))
    return state, step(jax.random.key(1), state, jnp.asarray(PAIRS))


def test_payoff_matrix(rounds):
    _, (_, _, reward, _, _, _) = rounds
    assert reward.dtype == jnp.float32 and reward.shape == (9, 2)
    for (a0, a1), r in zip(PAIRS, np.asarray(reward)):
        expected = 1.0 if (a0, a1) in BEATS else -1.0 if (a1, a0) in BEATS else 0.0
        assert r.tolist() == [expected, -expected], (a0, a1)
    matrix = np.asarray(reward)[:, 0].reshape(3, 3)  # rows: agent 0's choice
    np.testing.assert_array_equal(matrix, -matrix.T)  # symmetric zero-sum game
    assert np.count_nonzero(matrix == 1) == np.count_nonzero(matrix == -1) == 3


def test_zero_sum_termination_and_info(env, rounds):
    state0, (obs, state, reward, term, trunc, info) = rounds
    np.testing.assert_array_equal(np.asarray(reward).sum(axis=1), 0.0)
    assert np.all(np.asarray(term)) and not np.any(np.asarray(trunc))
    assert obs.dtype == jnp.int32 and np.all(np.asarray(obs) == 1) and obs.shape == (9, 2)
    np.testing.assert_array_equal(info["actions"], PAIRS)
    np.testing.assert_array_equal(info["opponent_action"], PAIRS[:, ::-1])
    np.testing.assert_array_equal(state.actions, PAIRS)
    assert env.traits.utility == "zero_sum" and env.traits.information == "imperfect"
    assert env.num_agents == 2 and env.agents == ("0", "1")


def test_reset_observation(env):
    obs, state = env.reset(jax.random.key(3))
    assert obs.dtype == jnp.int32 and obs.tolist() == [0, 0]
    assert state.actions.tolist() == [-1, -1]
    assert all(bool(env.observation_space().contains(o)) for o in obs)


def test_autoreset_starts_a_new_round_every_step():
    env = jaxenvs.make("RockPaperScissors-v0")
    _, state = env.reset(jax.random.key(0))
    obs, state, reward, term, _, info = env.step(jax.random.key(1), state, jnp.asarray([PAPER, ROCK]))
    assert bool(term) and reward.tolist() == [1.0, -1.0]
    assert obs.tolist() == [0, 0] and info["final_obs"].tolist() == [1, 1] and int(state.played) == 0


def test_out_of_range_actions_are_clipped(env):
    _, state = env.reset(jax.random.key(0))
    _, _, reward, _, _, info = env.step(jax.random.key(1), state, jnp.asarray([7, -2]))
    assert info["actions"].tolist() == [SCISSORS, ROCK] and reward.tolist() == [-1.0, 1.0]


def test_bad_action_shape_and_checked_mode():
    env = jaxenvs.make("RockPaperScissors-v0", checked=True)
    _, state = env.reset(jax.random.key(0))
    with pytest.raises(jaxenvs.ActionError, match=r"expected \(2,\)"):
        env.step(jax.random.key(1), state, 1)
    step = jaxenvs.checked(env.step)
    step(jax.random.key(1), state, jnp.asarray([2, 0]))
    with pytest.raises(checkify.JaxRuntimeError, match="action out of the action space"):
        step(jax.random.key(1), state, jnp.asarray([3, 0]))


def test_jit_vmap_scan_rollout(rollout_without_retrace):
    traj = rollout_without_retrace(jaxenvs.make("RockPaperScissors-v0"), 20, BATCH)
    obs_t, reward, term, trunc, info, action = (
        traj.obs, traj.reward, traj.terminated, traj.truncated, traj.info, traj.action
    )
    assert traj.last_obs.dtype == obs_t.dtype == jnp.int32 and obs_t.shape == (20, BATCH, 2)
    assert reward.dtype == jnp.float32 and reward.shape == (20, BATCH, 2)
    assert term.dtype == trunc.dtype == jnp.bool_ and term.shape == (20, BATCH)
    assert np.all(np.asarray(obs_t) == 0) and np.all(np.asarray(info["final_obs"]) == 1)
    assert np.all(np.asarray(term)) and not np.any(np.asarray(trunc))
    np.testing.assert_array_equal(info["actions"], action)
    np.testing.assert_array_equal(np.asarray(reward).sum(-1), 0.0)
    # agent 0's reward from the rule table, for every sampled pair
    a = np.asarray(action).reshape(-1, 2)
    expected = [1.0 if (x, y) in BEATS else -1.0 if (y, x) in BEATS else 0.0 for x, y in a]
    np.testing.assert_array_equal(np.asarray(reward)[..., 0].ravel(), expected)


def test_render_pixels_and_batching(env):
    _, fresh = env.reset(jax.random.key(0))
    pairs = [(ROCK, SCISSORS), (PAPER, PAPER)]
    states = [fresh] + [env.step(jax.random.key(1), fresh, jnp.asarray(p))[1] for p in pairs]
    batch = jax.tree.map(lambda *x: jnp.stack(x), *states)
    frames = np.asarray(jax.jit(jax.vmap(env.render))(batch))
    assert frames.shape == (3, 128, 256, 3) and frames.dtype == np.uint8
    white, black = [255, 255, 255], [0, 0, 0]
    brown, blue, red, green, grey = [139, 69, 19], [0, 0, 255], [255, 0, 0], [0, 160, 0], [128, 128, 128]
    # before the round: blank halves, black divider
    assert frames[0, 48, 64].tolist() == white and frames[0, 110, 192].tolist() == white
    assert frames[0, 48, 128].tolist() == black
    # Rock (brown disc) beats Scissors (red cross: on the diagonals, not between them)
    assert frames[1, 48, 64].tolist() == brown and frames[1, 48, 64 + 25].tolist() == brown
    assert frames[1, 48, 192].tolist() == red and frames[1, 48 + 20, 192 + 20].tolist() == red
    assert frames[1, 48 - 20, 192 + 20].tolist() == red and frames[1, 48, 192 + 20].tolist() == white
    assert frames[1, 110, 64].tolist() == green and frames[1, 110, 192].tolist() == red
    # Paper (blue upright rectangle) draws with Paper
    for x in (64, 192):
        assert frames[2, 48, x].tolist() == blue and frames[2, 48 + 28, x + 20].tolist() == blue
        assert frames[2, 48, x + 25].tolist() == white and frames[2, 110, x].tolist() == grey
    np.testing.assert_array_equal(frames[1], jax.jit(env.render)(states[1]))
    assert env.render_text(states[1]) == "RockPaperScissors: Rock vs Scissors -> agent 0 wins"
    assert env.render_text(fresh) == "RockPaperScissors: round not played yet"
