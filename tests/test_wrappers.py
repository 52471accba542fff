"""Wrappers of jaxenvs.wrappers beyond TimeLimit/AutoReset: exact values against numpy
recomputations (episode statistics across auto-resets under vmap, running normalisation
statistics step by step, Gymnasium's flatten order), the spaces each wrapper changes, errors at
construction, and composition under jit + vmap + scan with stable dtypes."""

import functools

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from gymnasium.wrappers.utils import RunningMeanStd as GymRunningMeanStd

import jaxenvs
from jaxenvs import spaces
from jaxenvs.checker import check_env
from jaxenvs.core import ActionError, Environment, Traits
from jaxenvs.wrappers import (
    AutoReset,
    ClipAction,
    FlattenObservation,
    NormalizeObservation,
    NormalizeReward,
    RecordEpisodeStatistics,
    RelativePosition,
    RescaleAction,
    TimeLimit,
    TransformAction,
    TransformObservation,
    TransformReward,
)

LOW = np.array([-1.0, 0.0, -2.0], np.float32)
HIGH = np.array([1.0, 2.0, 0.0], np.float32)
EPS = 1e-8  # epsilon of both normalisation wrappers
FAST_COMPILE = {"xla_backend_optimization_level": 0}  # tiny programs: compile time dominates


# ---- toy environments ------------------------------------------------------------------------
@struct.dataclass
class EchoState:
    last: jax.Array  # float32[3]


class Echo(Environment):
    """Continuous toy: the observation is the action the env last received (unclipped), the
    reward its sum; terminated when action[0] > 0.6. Reset draws the observation from the space."""

    traits = Traits(chance="deterministic")

    def __init__(self, low=LOW, high=HIGH):
        self.space = spaces.Box(low, high, (3,), np.float32)

    def reset_env(self, key, params):
        obs = self.space.sample(key)
        return obs, EchoState(obs)

    def step_env(self, key, state, action, params):
        action = jnp.asarray(action, jnp.float32)
        return action, EchoState(action), jnp.sum(action), action[0] > 0.6, jnp.asarray(False), {}

    def observation_space(self, params=None):
        return spaces.Box(-np.inf, np.inf, (3,), np.float32)

    def action_space(self, params=None):
        return self.space


@struct.dataclass
class CountersState:
    t: jax.Array  # int32
    last: jax.Array  # int32[2]


class Counters(Environment):
    """Two-agent toy: obs per agent {"t": step count [1], "last": its last action (Discrete(3))};
    reward = action - 1 per agent; terminated when t >= 2 and agent 0 plays 2."""

    traits = Traits(num_agents=2, chance="deterministic")

    def reset_env(self, key, params):
        state = CountersState(jnp.zeros((), jnp.int32), jax.random.randint(key, (2,), 0, 3, jnp.int32))
        return self._obs(state), state

    def step_env(self, key, state, action, params):
        state = CountersState(state.t + 1, action)
        terminated = (state.t >= 2) & (action[0] == 2)
        return self._obs(state), state, action.astype(jnp.float32) - 1.0, terminated, jnp.asarray(False), {}

    def _obs(self, state):
        return {"t": jnp.broadcast_to(jnp.minimum(state.t, 9), (2, 1)), "last": state.last}

    def observation_space(self, params=None):
        return spaces.Dict({"t": spaces.Box(0, 9, (1,), np.int32), "last": spaces.Discrete(3)})

    def action_space(self, params=None):
        return spaces.Discrete(3)


def made(env, max_episode_steps):
    """What ``jaxenvs.make`` returns for ``env``."""
    return AutoReset(TimeLimit(env, max_episode_steps))


# ---- helpers -------------------------------------------------------------------------------
def rollout(env, n_envs, n_steps, seed=0):
    """Jitted vmapped rollout with random actions from the action space; returns host arrays
    ``(reset_obs, final_state, (obs, action, reward, terminated, truncated, info))`` with ``[T, n_envs]``
    leading axes. Two environments with the same action space get the same actions and keys."""
    space = env.action_space()
    lead = (n_envs, env.num_agents) if env.multi_agent else (n_envs,)

    def go(key):
        k0, k1 = jax.random.split(key)
        obs, state = jax.vmap(env.reset)(jax.random.split(k0, n_envs))

        def body(state, key):
            ka, ks = jax.random.split(key)
            action = space.sample(ka, lead)
            obs, state, r, te, tr, info = jax.vmap(env.step)(jax.random.split(ks, n_envs), state, action)
            return state, (obs, action, r, te, tr, info)

        state, traj = jax.lax.scan(body, state, jax.random.split(k1, n_steps))
        return obs, state, traj

    return jax.tree.map(np.asarray, jax.jit(go, compiler_options=FAST_COMPILE)(jax.random.key(seed)))


def np_running_stats(samples):
    """Gymnasium's RunningMeanStd, one sample at a time, in float64: returns the (mean, var)
    after each sample. ``samples``: [T, ...]; statistics are elementwise."""
    mean = np.zeros(samples.shape[1:])
    var = np.ones(samples.shape[1:])
    count = 1e-4
    means, variances = [], []
    for x in samples.astype(np.float64):
        delta = x - mean
        total = count + 1.0
        mean = mean + delta / total
        var = (var * count + delta**2 * count / total) / total
        count = total
        means.append(mean)
        variances.append(var)
    return np.array(means), np.array(variances)


# ---- fixtures ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def grid():
    return jaxenvs.make("GridWorld-v0", max_episode_steps=6)


@pytest.fixture(scope="module")
def grid_run(grid):
    return rollout(grid, 4, 30, seed=1)


@pytest.fixture(scope="module")
def point():
    return jaxenvs.make("PointEnv-v0", autoreset=False)


# ---- RecordEpisodeStatistics ---------------------------------------------------------------
def np_episode_stats(reward, done):
    """Numpy recomputation: running return/length of each env, closed on ``done``."""
    ret = np.zeros(reward.shape[1:])
    length = np.zeros(reward.shape[1], np.int64)
    rets, lens = [], []
    for r, d in zip(reward.astype(np.float64), done):
        ret, length = ret + r, length + 1
        rets.append(ret.copy())
        lens.append(length.copy())
        ret[d] = 0.0
        length[d] = 0
    return np.array(rets), np.array(lens)


def test_record_episode_statistics_matches_numpy_across_autoresets():
    base = jaxenvs.make("GridWorld-v0", max_episode_steps=8)
    # rewards -1/8 per step, +15/8 at the target: returns depend on the length, sums stay exact
    env = RecordEpisodeStatistics(TransformReward(base, lambda r: 2.0 * r - 0.125))
    _, state, (_, _, reward, term, trunc, info) = rollout(env, 16, 400, seed=3)
    done = term | trunc
    assert term.sum() > 50 and (trunc & ~term).sum() > 50  # both kinds of episode end happened
    ret, length = np_episode_stats(reward, done)
    assert info["episode_return"].dtype == np.float32 and info["episode_return"].shape == (400, 16)
    assert info["episode_length"].dtype == np.int32 and info["returned_episode"].dtype == np.bool_
    np.testing.assert_array_equal(info["episode_return"], ret)
    np.testing.assert_array_equal(info["episode_length"], length)
    np.testing.assert_array_equal(info["returned_episode"], done)
    assert info["episode_length"][done].max() == 8  # truncated episodes have the time limit's length
    # the counters carried in the state are those of the unfinished episodes
    np.testing.assert_array_equal(state.episode_length, np.where(done[-1], 0, length[-1]))

    # placed inside AutoReset the statistics are the same (the auto-reset restarts the counters)
    inside = AutoReset(RecordEpisodeStatistics(TransformReward(TimeLimit(base.unwrapped, 8), lambda r: 2.0 * r - 0.125)))
    _, _, (_, _, _, _, _, info_in) = rollout(inside, 16, 400, seed=3)
    for k in ("episode_return", "episode_length", "returned_episode"):
        np.testing.assert_array_equal(info_in[k], info[k])


def test_record_episode_statistics_multi_agent_returns_per_agent():
    env = RecordEpisodeStatistics(made(Counters(), 4))
    _, _, (_, action, reward, term, trunc, info) = rollout(env, 4, 40)
    done = term | trunc
    assert term.sum() > 0 and (trunc & ~term).sum() > 0
    np.testing.assert_array_equal(reward, action - 1.0)
    assert info["episode_return"].shape == (40, 4, 2) and info["episode_return"].dtype == np.float32
    ret, length = np_episode_stats(reward, done)
    np.testing.assert_array_equal(info["episode_return"], ret)
    np.testing.assert_array_equal(info["episode_length"], length)


# ---- FlattenObservation --------------------------------------------------------------------
def test_flatten_observation_follows_gymnasium_order(grid, grid_run):
    env = FlattenObservation(grid)
    gym_space = spaces.to_gymnasium(grid.observation_space())
    # same bounds as Gymnasium's flattened space, but float32 (Gymnasium keeps the int dtype)
    gym_flat_space = gymnasium.spaces.flatten_space(gym_space)
    assert env.observation_space() == spaces.Box(gym_flat_space.low, gym_flat_space.high, (4,), np.float32)
    assert env.observation_space() == spaces.Box(0.0, 4.0, (4,), np.float32)
    raw_obs0, _, (raw_obs, _, _, _, _, raw_info) = grid_run
    obs0, _, (obs, _, _, _, _, info) = rollout(env, 4, 30, seed=1)

    def gym_flat(o, t, i):
        return gymnasium.spaces.flatten(gym_space, {k: v[t, i] for k, v in o.items()})

    for t in range(30):
        for i in range(4):
            np.testing.assert_array_equal(obs[t, i], gym_flat(raw_obs, t, i))
            np.testing.assert_array_equal(info["final_obs"][t, i], gym_flat(raw_info["final_obs"], t, i))
    # agent then target: the first two entries are the agent's cell
    np.testing.assert_array_equal(obs0[:, :2], raw_obs0["agent"])
    assert obs0.dtype == obs.dtype == info["final_obs"].dtype == np.float32


def test_flatten_observation_one_hot_per_agent():
    inner = made(Counters(), 4)
    env = FlattenObservation(inner)
    gym_space = spaces.to_gymnasium(inner.observation_space())
    assert env.observation_space() == spaces.Box(0.0, np.array([1, 1, 1, 9.0]), (4,), np.float32)
    raw_obs0, _, (raw_obs, *_rest) = rollout(inner, 3, 10)
    obs0, _, (obs, *_rest) = rollout(env, 3, 10)
    assert obs.shape == (10, 3, 2, 4)
    for t in range(10):
        for i in range(3):
            for a in range(2):
                want = gymnasium.spaces.flatten(gym_space, {k: v[t, i, a] for k, v in raw_obs.items()})
                np.testing.assert_array_equal(obs[t, i, a], want)
    np.testing.assert_array_equal(obs0[..., :3], np.eye(3)[raw_obs0["last"]])  # Discrete -> one-hot


# ---- RelativePosition ----------------------------------------------------------------------
def test_relative_position_is_target_minus_agent(grid, grid_run):
    env = RelativePosition(grid)
    assert env.observation_space() == spaces.Box(-4, 4, (2,), np.int32)
    assert RelativePosition(jaxenvs.make("GridWorld-v0", size=7)).observation_space() == spaces.Box(-6, 6, (2,), np.int32)
    raw_obs0, _, (raw_obs, _, _, _, _, raw_info) = grid_run
    obs0, _, (obs, _, _, _, _, info) = rollout(env, 4, 30, seed=1)
    np.testing.assert_array_equal(obs0, raw_obs0["target"] - raw_obs0["agent"])
    np.testing.assert_array_equal(obs, raw_obs["target"] - raw_obs["agent"])
    final = raw_info["final_obs"]
    np.testing.assert_array_equal(info["final_obs"], final["target"] - final["agent"])
    assert obs0.dtype == obs.dtype == np.int32
    assert np.all(np.abs(obs) <= 4) and np.all(np.any(obs != 0, axis=-1))  # the agent never sits on the target


def test_relative_position_rejects_other_observations(point):
    with pytest.raises(TypeError, match="RelativePosition needs an observation space Dict"):
        RelativePosition(point)


# ---- Transform* ----------------------------------------------------------------------------
def test_transform_observation(grid):
    space = spaces.Box(0, 8, (2,), np.int32)
    env = TransformObservation(grid, lambda o: 2 * o["agent"], space)
    assert env.observation_space() == space
    assert TransformObservation(grid, lambda o: o).observation_space() == grid.observation_space()
    obs, state = env.reset(jax.random.key(0))
    np.testing.assert_array_equal(obs, 2 * env.unwrapped_state(state).agent)
    before = env.unwrapped_state(state)
    obs, state, _, term, trunc, info = env.step(jax.random.key(1), state, 0)
    moved = np.minimum(np.asarray(before.agent) + [1, 0], 4)
    np.testing.assert_array_equal(info["final_obs"], 2 * moved)
    if not (term | trunc):
        np.testing.assert_array_equal(obs, 2 * moved)
    with pytest.raises(TypeError, match="callable"):
        TransformObservation(grid, "not a function")


def test_transform_action_maps_before_the_inner_step():
    new_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
    env = TransformAction(Echo(), lambda a: 0.5 * a - 0.25, new_space)
    assert env.action_space() == new_space
    assert TransformAction(Echo(), lambda a: a).action_space() == Echo().action_space()
    _, state = env.reset(jax.random.key(0))
    a = jnp.array([0.5, -1.0, 0.25], jnp.float32)
    obs, *_ = env.step(jax.random.key(1), state, a)
    np.testing.assert_array_equal(obs, 0.5 * a - 0.25)
    bad = TransformAction(Echo(), lambda a: a[:2])
    with pytest.raises(ActionError, match=r"shape \(2,\), expected \(3,\)"):
        bad.step(jax.random.key(1), state, a)


def test_transform_reward():
    env = TransformReward(Echo(), lambda r: 3.0 * r + 1.0)
    _, state = env.reset(jax.random.key(0))
    a = jnp.array([0.5, 1.5, -0.25], jnp.float32)
    _, _, reward, *_ = env.step(jax.random.key(1), state, a)
    assert reward.dtype == jnp.float32 and reward.shape == ()
    np.testing.assert_allclose(reward, 3.0 * 1.75 + 1.0, rtol=1e-6)
    as_int = TransformReward(Echo(), lambda r: jnp.round(r).astype(jnp.int32))
    assert as_int.step(jax.random.key(1), state, a)[2].dtype == jnp.float32
    with pytest.raises(ValueError, match="shape"):
        TransformReward(Echo(), lambda r: jnp.stack([r, r])).step(jax.random.key(1), state, a)


# ---- ClipAction / RescaleAction ------------------------------------------------------------
def test_clip_action():
    env = ClipAction(Echo())
    assert env.action_space() == spaces.Box(-np.inf, np.inf, (3,), np.float32)
    wild = jnp.array([5.0, -5.0, -5.0], jnp.float32)
    assert bool(env.action_space().contains(wild))  # legal outside ...
    _, state = env.reset(jax.random.key(0))
    obs, *_ = env.step(jax.random.key(1), state, wild)
    np.testing.assert_array_equal(obs, [1.0, 0.0, -2.0])  # ... clipped inside
    inside = jnp.array([0.3, 1.7, -0.2], jnp.float32)
    np.testing.assert_array_equal(env.step(jax.random.key(1), state, inside)[0], inside)
    with pytest.raises(TypeError, match="float32 Box action space"):
        ClipAction(jaxenvs.make("GridWorld-v0"))


def test_clip_action_on_point_env(point):
    env = ClipAction(point)
    obs, state = env.reset(jax.random.key(0))
    new_obs, *_ = env.step(jax.random.key(1), state, jnp.array([3.0, -3.0]))
    np.testing.assert_allclose(new_obs - obs, [0.1, -0.1], atol=1e-6)


def test_rescale_action_is_the_affine_map():
    env = RescaleAction(Echo(), -1.0, 1.0)
    assert env.action_space() == spaces.Box(-1.0, 1.0, (3,), np.float32)
    _, state = env.reset(jax.random.key(0))
    step = jax.jit(env.step, compiler_options=FAST_COMPILE)

    def inner(a):
        return np.asarray(step(jax.random.key(1), state, jnp.asarray(a, jnp.float32))[0])

    np.testing.assert_array_equal(inner([-1.0, -1.0, -1.0]), LOW)
    np.testing.assert_array_equal(inner([1.0, 1.0, 1.0]), HIGH)
    np.testing.assert_array_equal(inner([0.0, 0.0, 0.0]), (LOW + HIGH) / 2)
    np.testing.assert_array_equal(inner([3.0, -7.0, 1.5]), [1.0, 0.0, 0.0])  # outside [min, max]: clipped
    rng = np.random.default_rng(0)
    for a in rng.uniform(-1.0, 1.0, (20, 3)).astype(np.float32):
        want = LOW + (HIGH - LOW.astype(np.float64)) * (a + 1.0) / 2.0
        np.testing.assert_allclose(inner(a), want, rtol=0, atol=1e-6)
    per_dim = RescaleAction(Echo(), [0.0, 0.0, 0.0], [1.0, 2.0, 4.0])
    assert per_dim.action_space() == spaces.Box(0.0, [1.0, 2.0, 4.0], (3,), np.float32)
    obs, *_ = per_dim.step(jax.random.key(1), state, jnp.array([0.5, 0.5, 1.0]))
    np.testing.assert_allclose(obs, [0.0, 0.5, -1.5], atol=1e-6)


def test_rescale_action_errors():
    with pytest.raises(ValueError, match="finite inner action bounds"):
        RescaleAction(Echo(low=-np.inf), -1.0, 1.0)
    with pytest.raises(ValueError, match="min_action < max_action"):
        RescaleAction(Echo(), [0.0, 1.0, 0.0], 1.0)
    with pytest.raises(ValueError, match="do not broadcast"):
        RescaleAction(Echo(), np.zeros(2), np.ones(2))
    with pytest.raises(ValueError, match="finite min_action"):
        RescaleAction(Echo(), -np.inf, 1.0)
    with pytest.raises(TypeError, match="float32 Box action space"):
        RescaleAction(jaxenvs.make("GridWorld-v0"), -1.0, 1.0)


def test_rescale_action_on_point_env(point):
    env = RescaleAction(point, -1.0, 1.0)
    obs, state = env.reset(jax.random.key(0))
    new_obs, *_ = env.step(jax.random.key(1), state, jnp.array([1.0, -0.5]))
    np.testing.assert_allclose(new_obs - obs, [0.1, -0.05], atol=1e-6)


# ---- NormalizeObservation / NormalizeReward -------------------------------------------------
def test_normalize_observation_matches_numpy_step_by_step(grid):
    raw_env = FlattenObservation(grid)
    env = NormalizeObservation(raw_env)
    assert env.observation_space() == spaces.Box(-np.inf, np.inf, (4,), np.float32)
    n_steps = 40
    raw0, _, (raw, _, _, term, trunc, raw_info) = rollout(raw_env, 4, n_steps, seed=2)
    obs0, state, (obs, _, _, _, _, info) = rollout(env, 4, n_steps, seed=2)
    assert (term | trunc).sum() > 5  # statistics run on across auto-resets
    samples = np.concatenate([raw0[None], raw])  # [T + 1, n_envs, 4]: every env keeps its own
    mean, var = np_running_stats(samples)
    want = (samples - mean) / np.sqrt(var + EPS)
    np.testing.assert_allclose(np.concatenate([obs0[None], obs]), want, rtol=1e-4, atol=1e-4)
    want_final = (raw_info["final_obs"] - mean[1:]) / np.sqrt(var[1:] + EPS)
    np.testing.assert_allclose(info["final_obs"], want_final, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(state.obs_rms.mean, mean[-1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.obs_rms.var, var[-1], rtol=1e-5, atol=1e-6)
    # the reference is Gymnasium's RunningMeanStd, and it converges to the sample mean and variance
    gym_rms = GymRunningMeanStd(shape=(4,))
    for x in samples[:, 0]:
        gym_rms.update(x[None].astype(np.float64))
    np.testing.assert_allclose(gym_rms.mean, mean[-1, 0], rtol=1e-12)
    np.testing.assert_allclose(gym_rms.var, var[-1, 0], rtol=1e-12)
    np.testing.assert_allclose(mean[-1], samples.mean(0), rtol=1e-3)
    np.testing.assert_allclose(var[-1], samples.var(0), rtol=1e-3)
    assert obs0.dtype == obs.dtype == np.float32


def test_normalize_observation_frozen_and_errors(grid):
    frozen = NormalizeObservation(FlattenObservation(grid), update=False)
    obs, state = frozen.reset(jax.random.key(0))
    raw = FlattenObservation(grid).reset(jax.random.key(0))[0]
    np.testing.assert_allclose(obs, raw / np.sqrt(1.0 + EPS), rtol=1e-7)
    assert float(state.obs_rms.count) == pytest.approx(1e-4)
    with pytest.raises(TypeError, match="FlattenObservation"):
        NormalizeObservation(grid)
    with pytest.raises(ValueError, match="epsilon > 0"):
        NormalizeObservation(FlattenObservation(grid), epsilon=0.0)


def np_normalized_rewards(reward, done, gamma):
    g = np.zeros(reward.shape[1:])
    returns = []
    for r, d in zip(reward.astype(np.float64), done):
        d = d.reshape(d.shape + (1,) * (g.ndim - d.ndim))
        g = g * gamma * (1.0 - d) + r
        returns.append(g)
    returns = np.array(returns)
    _, var = np_running_stats(returns)
    return reward / np.sqrt(var + EPS), returns


@pytest.mark.parametrize("multi_agent", [False, True], ids=["single", "two_agents"])
def test_normalize_reward_matches_numpy_step_by_step(multi_agent):
    raw_env = made(Counters(), 4) if multi_agent else made(Echo(), 5)
    env = NormalizeReward(raw_env, gamma=0.9)
    _, _, (_, _, raw_reward, term, trunc, _) = rollout(raw_env, 4, 60, seed=5)
    _, state, (_, _, reward, _, _, _) = rollout(env, 4, 60, seed=5)
    assert term.sum() > 0 and (trunc & ~term).sum() > 0
    want, returns = np_normalized_rewards(raw_reward, term | trunc, 0.9)
    assert reward.dtype == np.float32 and reward.shape == raw_reward.shape
    np.testing.assert_allclose(reward, want, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(state.discounted_return, returns[-1], rtol=1e-5, atol=1e-6)


def test_normalize_reward_errors():
    with pytest.raises(ValueError, match=r"gamma in \[0, 1\]"):
        NormalizeReward(Echo(), gamma=1.5)
    with pytest.raises(ValueError, match="epsilon > 0"):
        NormalizeReward(Echo(), epsilon=-1.0)


# ---- composition and the environment contract ---------------------------------------------
def test_composition_jits_vmaps_scans_once():
    env = RecordEpisodeStatistics(NormalizeReward(NormalizeObservation(FlattenObservation(jaxenvs.make("GridWorld-v0")))))
    traces = []

    def step(key, state, action):
        traces.append(1)
        return env.step(key, state, action)

    vstep = jax.jit(jax.vmap(step))

    @functools.partial(jax.jit, compiler_options=FAST_COMPILE)
    def run(key, state):
        def body(state, key):
            ka, ks = jax.random.split(key)
            action = jax.random.randint(ka, (8,), 0, 4)
            obs, state, r, te, tr, info = vstep(jax.random.split(ks, 8), state, action)
            return state, (obs, r, info["episode_return"])

        return jax.lax.scan(body, state, jax.random.split(key, 20))

    reset = jax.jit(jax.vmap(env.reset), compiler_options=FAST_COMPILE)
    obs, state = reset(jax.random.split(jax.random.key(0), 8))
    reset_types = jax.tree.map(lambda x: (x.shape, x.dtype), (obs, state))
    state, (obs_t, r_t, ret_t) = run(jax.random.key(1), state)
    # the scan carry type-checked; the observation keeps its reset dtype too
    assert jax.tree.map(lambda x: (x.shape, x.dtype), (obs_t[-1], state)) == reset_types
    state, _ = run(jax.random.key(2), state)
    assert len(traces) == 1
    assert obs_t.shape == (20, 8, 4) and obs_t.dtype == jnp.float32 and r_t.dtype == jnp.float32
    assert np.all(np.isfinite(obs_t)) and np.all(np.isfinite(r_t))
    assert state.env_state.env_state.obs_rms.count.shape == (8,)  # one set of statistics per env


def wrapped_envs():
    """Each wrapper, alone or stacked with others (single- and multi-agent), for check_env."""

    def grid():
        return jaxenvs.make("GridWorld-v0")

    def point():
        return jaxenvs.make("PointEnv-v0") if "PointEnv-v0" in jaxenvs.registry else made(Echo(), 20)

    def transforms():
        obs_space = spaces.Box(0, 8, (2,), np.int32)
        env = TransformObservation(grid(), lambda o: o["target"] - o["agent"] + 4, obs_space)
        return TransformReward(TransformAction(env, lambda a: 3 - a, spaces.Discrete(4)), lambda r: 2.0 * r - 1.0)

    return {
        "RecordEpisodeStatistics": lambda: RecordEpisodeStatistics(grid()),
        "FlattenObservation": lambda: FlattenObservation(grid()),
        "RelativePosition": lambda: RelativePosition(grid()),
        "Transform*": transforms,
        "ClipAction-RescaleAction": lambda: ClipAction(RescaleAction(point(), -1.0, 1.0)),
        "NormalizeReward-NormalizeObservation": lambda: NormalizeReward(NormalizeObservation(point())),
        "all-GridWorld": lambda: RecordEpisodeStatistics(
            NormalizeReward(NormalizeObservation(FlattenObservation(grid())))
        ),
        "all-HurdleRace": lambda: RecordEpisodeStatistics(
            NormalizeReward(NormalizeObservation(FlattenObservation(jaxenvs.make("HurdleRace-v0"))))
        ),
    }


@pytest.mark.parametrize("name", list(wrapped_envs()))
def test_wrapped_env_passes_check_env(name):
    report = check_env(wrapped_envs()[name](), num_steps=20, num_envs=2)
    assert "dtype-stable" in report.rules and not report.skipped


def test_wrapping_something_else_names_what_it_got():
    gymnasium = pytest.importorskip("gymnasium")
    from jaxenvs.wrappers import TimeLimit
    from jaxenvs.envs.grid_world import GridWorld

    with pytest.raises(TypeError, match=r"TimeLimit wraps a jaxenvs Environment .*, got a Gymnasium environment \(TimeLimit CartPole-v1\)\. "
                       r"Wrap it with Gymnasium's own wrappers .*jaxenvs\.make\('gymnax/CartPole-v1'\).*jaxenvs\.spaces\.from_gymnasium"):
        TimeLimit(gymnasium.make("CartPole-v1"), 10)
    with pytest.raises(TypeError, match=r"got the class GridWorld: pass an instance \(GridWorld\(\.\.\.\)\) or jaxenvs\.make\(id\)"):
        TimeLimit(GridWorld, 10)
    with pytest.raises(TypeError, match=r"TimeLimit wraps a jaxenvs Environment \(reset/step as pure JAX functions\), got int$"):
        TimeLimit(3, 10)


def test_checked_mode_refuses_a_nan_action_before_normalize_observation_sees_it():
    from jaxenvs.wrappers import NormalizeObservation
    from jaxenvs.wrappers.checked import CheckError

    env = NormalizeObservation(jaxenvs.make("PointEnv-v0", checked=True))
    obs, state = jaxenvs.checked(env.reset)(jax.random.key(0))
    step = jaxenvs.checked(env.step)
    obs, state, *_ = step(jax.random.key(1), state, jnp.array([0.05, 0.0], jnp.float32))
    with pytest.raises(CheckError, match=r"^PointEnv, step 1: action out of the action space: \[nan  0\.\]; allowed: Box"):
        step(jax.random.key(2), state, jnp.array([jnp.nan, 0.0], jnp.float32))
