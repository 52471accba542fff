"""PointEnv-v0: exact dynamics against a numpy transcription of garage's tutorial, reset
statistics, termination at the tolerance boundary, gradients, jit/vmap/scan and rendering."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import jaxenvs
from jaxenvs.envs.point_env import EnvState

BATCH = 64


def reference_step(state, action):
    """garage's tutorial ``PointEnv.step``, plus clipping the action to its declared box."""
    action = np.clip(action, -0.1, 0.1)
    state = state + action
    x, y = state
    reward = -((x**2 + y**2) ** 0.5)
    done = abs(x) < 0.01 and abs(y) < 0.01
    return state, reward, done


@pytest.fixture(scope="module")
def env():
    return jaxenvs.make("PointEnv-v0", autoreset=False).unwrapped


@pytest.fixture(scope="module")
def batched_step(env):
    return jax.jit(jax.vmap(env.step))


def test_steps_match_numpy_reference(env, batched_step):
    rng = np.random.default_rng(0)
    n, steps = 8, 40
    _, state = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), n))
    pos = np.array(state.position)
    clipped = terminations = 0
    for t in range(steps):
        wide = rng.uniform(-0.25, 0.25, (n, 2))  # about 60% of components out of range
        steer = -pos + rng.normal(0.0, 0.004, (n, 2))  # half the batch heads for the goal
        action = np.where(np.arange(n)[:, None] < n // 2, wide, steer).astype(np.float32)
        obs, state, reward, term, trunc, info = batched_step(jax.random.split(jax.random.key(t), n), state, action)
        for i in range(n):
            pos[i], r, done = reference_step(pos[i], action[i])
            assert float(reward[i]) == pytest.approx(r, rel=1e-6, abs=1e-7)
            assert bool(term[i]) == done
            terminations += done
        np.testing.assert_array_equal(np.asarray(obs), pos)
        np.testing.assert_array_equal(np.asarray(state.position), pos)
        np.testing.assert_allclose(np.asarray(info["distance"]), -np.asarray(reward), rtol=0, atol=0)
        assert not np.any(np.asarray(trunc))
        clipped += int(np.sum(np.abs(action) > 0.1))
    assert clipped > 100 and terminations > 0  # both code paths were exercised


def test_reset_is_uniform_on_the_square(env):
    n = 20_000
    obs, state = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(1), n))
    x = np.asarray(obs, np.float64)
    assert obs.dtype == jnp.float32 and obs.shape == (n, 2)
    assert np.all((x >= -1) & (x <= 1))
    # mean 0 (var 1/3), E[x^2] = 1/3 (var 4/45): within 5 standard errors
    assert np.all(np.abs(x.mean(0)) < 5 * np.sqrt(1 / 3 / n))
    assert np.all(np.abs((x**2).mean(0) - 1 / 3) < 5 * np.sqrt(4 / 45 / n))
    assert abs(np.corrcoef(x[:, 0], x[:, 1])[0, 1]) < 5 / np.sqrt(n)
    # Kolmogorov-Smirnov against U(-1, 1): critical value at alpha = 0.001 is 1.95 / sqrt(n)
    for col in x.T:
        u = (np.sort(col) + 1) / 2
        ecdf_hi, ecdf_lo = np.arange(1, n + 1) / n, np.arange(n) / n
        assert max(np.max(ecdf_hi - u), np.max(u - ecdf_lo)) < 1.95 / np.sqrt(n)


def test_reset_bound_param():
    env = jaxenvs.make("PointEnv-v0", reset_bound=0.25)
    obs, _ = jax.vmap(env.reset)(jax.random.split(jax.random.key(2), 2000))
    assert np.all(np.abs(np.asarray(obs)) <= 0.25) and np.max(np.abs(np.asarray(obs))) > 0.24


@pytest.mark.parametrize(
    "position",
    [(0.0, 0.0), (0.0099, -0.0099), (0.01, 0.0), (0.0, -0.01), (-0.00999, 0.00999), (0.0099, 0.0101), (0.5, 0.5)],
)
def test_termination_at_the_tolerance_boundary(env, position):
    pos = np.asarray(position, np.float32)
    zero = np.zeros(2, np.float32)
    _, _, reward, term, _, _ = env.step(jax.random.key(0), EnvState(jnp.asarray(pos)), jnp.asarray(zero))
    _, r, done = reference_step(pos, zero)
    assert bool(term) == done
    assert float(reward) == pytest.approx(r, rel=1e-6, abs=0)


def test_goal_tolerance_param(env):
    params = env.default_params.replace(goal_tolerance=0.1)
    state = EnvState(jnp.asarray([0.05, -0.099], jnp.float32))
    assert bool(env.step(jax.random.key(0), state, jnp.zeros(2), params)[3])
    assert not bool(env.step(jax.random.key(0), state, jnp.zeros(2))[3])


def test_action_bound_param_clips(env):
    params = env.default_params.replace(action_bound=0.5)
    state = EnvState(jnp.zeros(2, jnp.float32))
    obs = env.step(jax.random.key(0), state, jnp.asarray([0.3, -2.0]), params)[0]
    np.testing.assert_array_equal(np.asarray(obs), np.asarray([0.3, -0.5], np.float32))
    assert env.action_space(params).high.tolist() == [0.5, 0.5]
    # params batched under vmap (traced inside step): each env clips to its own bound
    bounds = jax.tree.map(lambda *x: jnp.asarray(x, jnp.float32), params.replace(action_bound=0.05), params)
    step = jax.jit(jax.vmap(env.step, in_axes=(None, None, None, 0)))
    obs = step(jax.random.key(0), state, jnp.asarray([1.0, -0.2]), bounds)[0]
    np.testing.assert_array_equal(np.asarray(obs), np.asarray([[0.05, -0.05], [0.5, -0.2]], np.float32))


def test_gradients_match_analytic_and_finite_differences(env):
    p = jnp.asarray([0.3, -0.4], jnp.float32)
    a = jnp.asarray([0.05, 0.08], jnp.float32)

    def reward(pos, act):
        return env.step(jax.random.key(0), EnvState(pos), act)[2]

    g_pos, g_act = jax.grad(reward, argnums=(0, 1))(p, a)
    q = np.asarray(p + a, np.float64)
    np.testing.assert_allclose(g_act, -q / np.linalg.norm(q), rtol=1e-5)
    np.testing.assert_allclose(g_pos, -q / np.linalg.norm(q), rtol=1e-5)
    eps = 1e-3
    fd = [(reward(p, a + eps * e) - reward(p, a - eps * e)) / (2 * eps) for e in jnp.eye(2)]
    np.testing.assert_allclose(g_act, np.asarray(fd), atol=2e-3)

    def next_pos(pos, act):
        return env.step(jax.random.key(0), EnvState(pos), act)[1].position

    j_pos, j_act = jax.jacobian(next_pos, argnums=(0, 1))(p, a)
    np.testing.assert_array_equal(j_pos, np.eye(2))
    np.testing.assert_array_equal(j_act, np.eye(2))
    # clipped component (|a_x| > 0.1): zero gradient; in-range component: identity
    np.testing.assert_array_equal(jax.jacobian(next_pos, argnums=1)(p, jnp.asarray([0.5, 0.05])), np.diag([0.0, 1.0]))
    # the exact origin has a finite (zero) gradient
    g0 = jax.grad(reward, argnums=1)(jnp.zeros(2), jnp.zeros(2))
    np.testing.assert_array_equal(g0, np.zeros(2))


def test_gradients_flow_through_made_env_wrappers():
    env = jaxenvs.make("PointEnv-v0")  # AutoReset(TimeLimit(PointEnv))
    _, state = env.reset(jax.random.key(0))
    a = jnp.asarray([0.02, -0.03], jnp.float32)
    jac = jax.jacobian(lambda act: env.step(jax.random.key(1), state, act)[0])(a)
    np.testing.assert_array_equal(jac, np.eye(2))
    g = jax.grad(lambda act: env.step(jax.random.key(1), state, act)[2])(a)
    q = np.asarray(state.env_state.position + a, np.float64)
    np.testing.assert_allclose(g, -q / np.linalg.norm(q), rtol=1e-5)


@pytest.mark.parametrize("kwargs", [{"action_bound": 0.0}, {"goal_tolerance": -0.01}, {"reset_bound": float("inf")}])
def test_invalid_params_raise(kwargs):
    (name,) = kwargs
    bounded = name in ("action_bound", "reset_bound")  # at most MAX_BOUND, so x**2 + y**2 fits float32
    expected = r"a finite number in \(0, 1e\+18\]" if bounded else "a finite number > 0"
    with pytest.raises(ValueError, match=f"{name} must be {expected}"):
        jaxenvs.make("PointEnv-v0", **kwargs)


def test_checked_mode_raises_on_out_of_range_action():
    env = jaxenvs.make("PointEnv-v0", checked=True)
    _, state = env.reset(jax.random.key(0))
    step = jaxenvs.checked(env.step)
    step(jax.random.key(1), state, jnp.asarray([0.1, -0.1]))
    with pytest.raises(checkify.JaxRuntimeError, match="action out of the action space"):
        step(jax.random.key(1), state, jnp.asarray([0.2, 0.0]))


def test_jit_vmap_scan_rollout():
    env = jaxenvs.make("PointEnv-v0")
    params = env.default_params
    obs_space, act_space = env.observation_space(params), env.action_space(params)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def rollout(key):
        obs, state = jax.vmap(env.reset)(jax.random.split(key, BATCH))

        def body(carry, key):
            state = carry
            k_act, k_step = jax.random.split(key)
            action = 2.0 * act_space.sample(k_act, (BATCH,))  # half of them out of range
            out = jax.vmap(env.step)(jax.random.split(k_step, BATCH), state, action)
            return out[1], (out[0], out[2], out[3], out[4])

        _, (obs_t, rew_t, term_t, trunc_t) = jax.lax.scan(body, state, jax.random.split(key, 120))
        return obs, obs_t, rew_t, term_t, trunc_t

    obs, obs_t, rew_t, term_t, trunc_t = rollout(jax.random.key(3))
    rollout(jax.random.key(4))  # no retrace
    assert obs.dtype == obs_t.dtype == jnp.float32 and obs_t.shape == (120, BATCH, 2)
    assert rew_t.dtype == jnp.float32 and term_t.dtype == trunc_t.dtype == jnp.bool_
    assert bool(jnp.all(jax.vmap(jax.vmap(obs_space.contains))(obs_t)))
    assert np.all(np.asarray(rew_t) <= 0)
    # truncated exactly when an episode reaches 100 steps (episodes restart after either flag)
    length, expected = np.zeros(BATCH, int), []
    for term, trunc in zip(np.asarray(term_t), np.asarray(trunc_t)):
        length += 1
        expected.append(length >= 100)
        length[term | trunc] = 0
    np.testing.assert_array_equal(np.asarray(trunc_t), np.stack(expected))
    assert np.any(np.asarray(trunc_t))


def test_render_pixels_and_batching(env):
    positions = jnp.asarray([[0.5, 0.5], [-0.5, -0.25], [5.0, 0.0]], jnp.float32)
    frames = jax.jit(jax.vmap(env.render))(EnvState(positions))
    assert frames.shape == (3, 256, 256, 3) and frames.dtype == jnp.uint8
    blue, green, white = [0, 0, 255], [0, 160, 0], [255, 255, 255]
    # 64 px per unit, origin at pixel (128, 128), y upwards
    assert frames[0, 96, 160].tolist() == blue
    assert frames[1, 144, 96].tolist() == blue
    assert frames[2, 128, 253].tolist() == blue  # outside the view: drawn at the right edge
    for f in frames:
        assert f[128, 128].tolist() == green  # goal region
        assert f[10, 10].tolist() == white  # outside the reset region
        assert f[80, 200].tolist() == white
        assert f[80, 80].tolist() == [225, 225, 225]  # inside the reset region
    assert frames[1, 96, 160].tolist() != blue
    np.testing.assert_array_equal(frames[1], jax.jit(env.render)(EnvState(positions[1])))
    assert "distance=0.7071" in env.render_text(EnvState(positions[0]))
