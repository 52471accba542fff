"""Lottery-v0: payout frequencies (binomial tests), exact payouts, termination, params,
out-of-range actions, jit/vmap/scan and rendering."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import jaxenvs

BATCH = 64
DRAWS = 200_000


@pytest.fixture(scope="module")
def env():
    return jaxenvs.make("Lottery-v0", autoreset=False)


@pytest.fixture(scope="module")
def play_many(env):
    """(keys, action, params) -> (reward, won) of one play per key, all with the same action."""

    def play(key, action, params):
        _, state = env.reset(key, params)
        _, _, reward, _, _, info = env.step(key, state, action, params)
        return reward, info["won"]

    return jax.jit(jax.vmap(play, in_axes=(0, None, None)))


@pytest.mark.parametrize("action, prize, p", [(0, 100_000_000.0, 0.01), (1, 1_000_000.0, 0.05)])
def test_ticket_payout_frequency(env, play_many, action, prize, p):
    keys = jax.random.split(jax.random.key(action), DRAWS)
    reward, won = (np.asarray(x) for x in play_many(keys, jnp.int32(action), env.default_params))
    assert reward.dtype == np.float32
    assert set(np.unique(reward).tolist()) == {prize, -10.0}
    np.testing.assert_array_equal(won, reward == prize)
    # binomial test: within 5 standard errors of p
    assert abs(won.mean() - p) < 5 * np.sqrt(p * (1 - p) / DRAWS)


def test_no_ticket_always_pays_zero(env, play_many):
    reward, won = play_many(jax.random.split(jax.random.key(7), 10_000), jnp.int32(2), env.default_params)
    assert np.all(np.asarray(reward) == 0.0) and not np.any(np.asarray(won))


def test_one_shot_observation_and_termination(env):
    obs, state = env.reset(jax.random.key(0))
    assert obs.dtype == jnp.int32 and obs.shape == () and int(obs) == 0
    for action in range(3):
        obs2, state2, reward, term, trunc, info = env.step(jax.random.key(1), state, action)
        assert obs2.dtype == jnp.int32 and int(obs2) == 1
        assert bool(term) and not bool(trunc)
        assert int(info["action"]) == action and int(state2.action) == action
        assert f"reward {float(reward):,.0f}" in env.render_text(state2)  # derived from action, won, params
        assert env.observation_space().contains(obs2)


def test_autoreset_starts_a_new_game_every_step():
    env = jaxenvs.make("Lottery-v0")
    _, state = env.reset(jax.random.key(0))
    obs, state, _, term, _, info = env.step(jax.random.key(1), state, 1)
    assert bool(term) and int(obs) == 0 and int(info["final_obs"]) == 1 and int(state.played) == 0


@pytest.mark.parametrize("action, played", [(-3, 0), (5, 2), (2**31 - 1, 2)])
def test_out_of_range_actions_are_clipped(action, played):
    env = jaxenvs.make("Lottery-v0", autoreset=False, power_rich_prob=1.0)
    _, state = env.reset(jax.random.key(0))
    _, _, reward, _, _, info = env.step(jax.random.key(1), state, action)
    assert int(info["action"]) == played
    assert float(reward) == (100_000_000.0 if played == 0 else 0.0)


def test_checked_mode_raises_on_out_of_range_action():
    env = jaxenvs.make("Lottery-v0", checked=True)
    _, state = env.reset(jax.random.key(0))
    step = jaxenvs.checked(env.step)
    step(jax.random.key(1), state, 2)
    with pytest.raises(checkify.JaxRuntimeError, match="action out of the action space"):
        step(jax.random.key(1), state, 3)


def test_params_are_vmappable(env, play_many):
    """Certain wins and certain losses from params batched under vmap."""
    base = env.default_params
    never = base.replace(power_rich_prob=0.0, mega_haul_prob=1.0)
    always = base.replace(power_rich_prob=1.0, mega_haul_prob=0.0, power_rich_prize=5.0, losing_reward=-1.0)
    params = jax.tree.map(lambda *x: jnp.asarray(x, jnp.float32), never, always)
    keys = jax.random.split(jax.random.key(3), 100)
    play_each = jax.vmap(play_many, in_axes=(None, None, 0))
    r0, _ = play_each(keys, jnp.int32(0), params)
    r1, _ = play_each(keys, jnp.int32(1), params)
    np.testing.assert_array_equal(np.asarray(r0), np.repeat([[-10.0], [5.0]], 100, axis=1))
    np.testing.assert_array_equal(np.asarray(r1), np.repeat([[1_000_000.0], [-1.0]], 100, axis=1))


@pytest.mark.parametrize(
    "kwargs, message",
    [({"power_rich_prob": 1.5}, "power_rich_prob must be a probability in \\[0, 1\\]"),
     ({"mega_haul_prob": -0.1}, "mega_haul_prob must be a probability"),
     ({"losing_reward": float("nan")}, "losing_reward must be a finite number")],
)
def test_invalid_params_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        jaxenvs.make("Lottery-v0", **kwargs)


def test_jit_vmap_scan_rollout(rollout_without_retrace):
    traj = rollout_without_retrace(jaxenvs.make("Lottery-v0"), 20, BATCH)
    obs_t, reward, term, trunc, final_obs, action = (
        traj.obs, traj.reward, traj.terminated, traj.truncated, traj.info["final_obs"], traj.action
    )
    assert traj.last_obs.dtype == obs_t.dtype == jnp.int32 and obs_t.shape == (20, BATCH)
    assert reward.dtype == jnp.float32 and term.dtype == trunc.dtype == jnp.bool_
    assert np.all(np.asarray(obs_t) == 0) and np.all(np.asarray(final_obs) == 1)  # reset after every play
    assert np.all(np.asarray(term)) and not np.any(np.asarray(trunc))
    expected = {0: {100_000_000.0, -10.0}, 1: {1_000_000.0, -10.0}, 2: {0.0}}
    for a, r in zip(np.asarray(action).ravel(), np.asarray(reward).ravel()):
        assert r in expected[int(a)]


def test_render_pixels_and_batching():
    env = jaxenvs.make("Lottery-v0", autoreset=False, power_rich_prob=1.0, mega_haul_prob=0.0)
    _, fresh = env.reset(jax.random.key(0))
    states = [fresh] + [env.step(jax.random.key(1), fresh, a)[1] for a in range(3)]
    batch = jax.tree.map(lambda *x: jnp.stack(x), *states)
    frames = np.asarray(jax.jit(jax.vmap(env.render))(batch))
    assert frames.shape == (4, 96, 192, 3) and frames.dtype == np.uint8
    yellow, blue, grey, black, white = [230, 200, 0], [0, 0, 255], [128, 128, 128], [0, 0, 0], [255, 255, 255]
    for f in frames:  # the three choices are always shown
        assert f[32, 32].tolist() == yellow and f[32, 96].tolist() == blue and f[32, 160].tolist() == grey
    # before playing: no highlight frame, blank outcome bar
    assert frames[0, 1, 1].tolist() == white and frames[0, 80, 96].tolist() == white
    # the chosen cell gets a black frame; outcome bar: win green, loss red, no ticket grey
    for i, (cell, bar) in enumerate([(0, [0, 160, 0]), (1, [255, 0, 0]), (2, grey)], start=1):
        for c in range(3):
            assert frames[i, 1, c * 64 + 32].tolist() == (black if c == cell else white)
        assert frames[i, 80, 96].tolist() == bar
    np.testing.assert_array_equal(frames[2], jax.jit(env.render)(states[2]))
    assert env.render_text(states[1]) == "Lottery: PowerRich -> won, reward 100,000,000"
    assert env.render_text(states[2]) == "Lottery: MegaHaul -> lost, reward -10"
