"""gymnax interoperation both ways, against gymnax 1.0.x (the ``gymnax`` extra pins
``gymnax>=1.0,<1.1``; verified with gymnax 1.0.1) and rejax 0.1.3.

Which gymnax API each side speaks:

* ``jaxenvs.make("gymnax/<id>")`` wraps gymnax 1.0 environments (``step_env`` returning a
  natural-terminal flag, the time limit in ``is_truncated``); older gymnax is refused;
* ``to_gymnax(env, api="legacy")`` speaks gymnax 0.0.x's 5-tuple, as PureJaxRL and rejax 0.1.3
  consume it (rejax 0.1.3 unpacks ``obs, state, reward, done, info``); ``api="v1"`` speaks gymnax
  1.0's 6-tuple, as gymnax 1.0's own ``gymnax.wrappers.purerl`` wrappers consume it.

Every gymnax id runs through ``jaxenvs.check_env`` in ``test_check_env_on_gymnax_ids`` (about
a minute of compiling on 2 cores); an id whose gymnax constructor fails here (MNISTBandit
downloads MNIST) is skipped with the reason.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import require

gymnax = require("gymnax")

from flax import struct  # noqa: E402  (gymnax depends on flax)
from gymnax.environments import spaces as gspaces  # noqa: E402
from gymnax.wrappers.purerl import FlattenObservationWrapper as GymnaxFlatten  # noqa: E402
from gymnax.wrappers.purerl import LogWrapper as GymnaxLog  # noqa: E402

import jaxenvs  # noqa: E402
from jaxenvs.adapters.gymnax import GymnaxState, SingleAgentView, to_gymnax  # noqa: E402
from jaxenvs.checker import EnvCheckError  # noqa: E402
from jaxenvs.envs.gymnax_env import GymnaxEnv  # noqa: E402
from jaxenvs.envs.hurdle_race import HURDLE, JUMP, RUN  # noqa: E402
from jaxenvs.wrappers import NormalizeObservation, RecordEpisodeStatistics, TimeLimitState  # noqa: E402

# check_env rules a gymnax id cannot pass, and why (everything else is checked)
CHECK_SKIPS = {
    # step_env draws from its key, but only through a parameter that is 0 by default (torque noise)
    # or in rare events (spawns, slippery moves at goals): a short rollout cannot see the key matter
    "Acrobot-v1": ("key-sensitivity",),
    "Freeway-MinAtar": ("key-sensitivity",),
    "Seaquest-MinAtar": ("key-sensitivity",),
    "DeepSea-bsuite": ("key-sensitivity",),
    "MetaMaze-misc": ("key-sensitivity", "obs-in-space"),
    "PointRobot-misc": ("key-sensitivity",),
    # gymnax 1.0.1's observation_space is narrower than the observations it produces
    # (MemoryChain: context -1; GaussianBandit: last reward -1 below its low of 0; MetaMaze: the
    # last reward, 10.0 at the goal, above its high of 1)
    "MemoryChain-bsuite": ("obs-in-space",),
    "GaussianBandit-misc": ("obs-in-space",),
}


# ---------------------------------------------------------------------------------------------
# jaxenvs.make("gymnax/<id>")
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gid", gymnax.registered_envs)
def test_check_env_on_gymnax_ids(gid):
    try:
        env = jaxenvs.make(f"gymnax/{gid}")
    except ImportError as e:  # gymnax's constructor failed, e.g. MNISTBandit downloads MNIST when built
        pytest.skip(f"gymnax/{gid} cannot be constructed here: {type(e).__name__}: {e}")
    jaxenvs.check_env(env, num_steps=20, num_envs=2, skip=CHECK_SKIPS.get(gid, ()))


def test_gymnax_ids_are_registered_and_listed():
    listing = jaxenvs.pprint_registry(print_output=False)
    for gid in gymnax.registered_envs:
        assert f"gymnax/{gid}" in jaxenvs.registry
        assert f"gymnax/{gid}" in listing
    spec = jaxenvs.spec("gymnax/CartPole-v1")
    assert (spec.namespace, spec.max_episode_steps, spec.reward_threshold) == ("gymnax", 500, 475.0)
    with pytest.raises(KeyError, match="gymnax/CartPole-v1"):
        jaxenvs.make("gymnax/CartPol-v1")


def test_make_converts_spaces_dtypes_and_passes_params():
    env = jaxenvs.make("gymnax/Catch-bsuite", autoreset=False, rows=6)  # rows: a constructor kwarg
    assert env.observation_space().shape == (6, 5) and env.observation_space().dtype == np.int32
    env = jaxenvs.make("gymnax/CartPole-v1", autoreset=False, gravity=12.0)  # gravity: a params field
    assert float(env.default_params.gravity) == 12.0
    assert env.action_space() == jaxenvs.spaces.Discrete(2)
    assert env.traits.chance == "deterministic"  # CartPole's step_env never reads its key
    breakout = jaxenvs.make("gymnax/Breakout-MinAtar")  # bool image channels, a float32 Box in gymnax
    assert breakout.observation_space().dtype == np.float32
    assert breakout.reset(jax.random.key(0))[0].dtype == jnp.float32
    with pytest.raises(NotImplementedError, match="no jittable renderer"):
        env.render(env.reset(jax.random.key(0))[1])


def _cartpole_state(time, theta, theta_dot=0.0):
    from gymnax.environments.classic_control.cartpole import EnvState

    f = jnp.float32
    return EnvState(time=jnp.int32(time), x=f(0.0), x_dot=f(0.0), theta=f(theta), theta_dot=f(theta_dot))


def test_a_reward_of_the_wrong_shape_is_passed_on_and_named():
    """gymnax's Pendulum before b3a4e29 returned its reward with shape (1,): the adapter keeps the
    env's shape (a squeeze would hide the bug from every check) and check_env names it."""
    from gymnax.environments.classic_control.pendulum import Pendulum

    class UnsqueezedReward(Pendulum):
        def step_env(self, key, state, action, params):
            obs, state, reward, terminated, info = super().step_env(key, state, action, params)
            return obs, state, reward.reshape(1), terminated, info

    env = GymnaxEnv(UnsqueezedReward())
    obs, state = env.reset(jax.random.key(0))
    reward = jax.eval_shape(env.step, jax.random.key(1), state, jnp.zeros(1, jnp.float32))[2]
    assert reward.shape == (1,) and reward.dtype == jnp.float32
    with pytest.raises(EnvCheckError, match=r"\[reward-shape\] .*shape \(1,\), expected a float32 scalar"):
        jaxenvs.check_env(env)
    assert jax.eval_shape(GymnaxEnv(Pendulum()).step, jax.random.key(1), state, jnp.zeros(1))[2].shape == ()


def test_terminated_and_truncated_split():
    """gymnax's time limit comes out as truncated, a fallen pole as terminated, both on one step."""
    env = jaxenvs.make("gymnax/CartPole-v1", autoreset=False)
    times = jnp.array([499, 499, 10, 10], jnp.int32)
    # theta 0.2 rad turning at 2 rad/s: 0.24 rad after the step, past the 12-degree (0.2094) threshold
    thetas = jnp.array([0.2, 0.0, 0.2, 0.0], jnp.float32)
    theta_dots = jnp.array([2.0, 0.0, 2.0, 0.0], jnp.float32)

    @jax.jit
    @jax.vmap
    def step(time, theta, theta_dot):
        state = TimeLimitState(_cartpole_state(time, theta, theta_dot), time)
        return env.step(jax.random.key(0), state, 1)

    _, _, reward, terminated, truncated, info = step(times, thetas, theta_dots)
    np.testing.assert_array_equal(terminated, [True, False, True, False])
    np.testing.assert_array_equal(truncated, [True, True, False, False])
    np.testing.assert_array_equal(info["discount"], [0.0, 1.0, 0.0, 1.0])
    np.testing.assert_array_equal(reward, [1.0, 1.0, 1.0, 1.0])  # gymnax: 0 only after the terminal step
    # gymnax's own limit (params.max_steps_in_episode) truncates too, below the registry's TimeLimit
    short = jaxenvs.make("gymnax/CartPole-v1", autoreset=False, max_steps_in_episode=50).unwrapped
    params = short.default_params.replace(max_steps_in_episode=50)
    out = jax.jit(short.step)(jax.random.key(0), _cartpole_state(49, 0.0), 1, params)
    assert (bool(out[3]), bool(out[4])) == (False, True)


# ---------------------------------------------------------------------------------------------
# to_gymnax: exact round trip against gymnax itself
# ---------------------------------------------------------------------------------------------


def _scan_steps(genv, params, key, actions):
    """Reset, then step through ``actions`` inside one lax.scan (jitted by the caller)."""
    k_reset, k_steps = jax.random.split(key)
    obs, state = genv.reset(k_reset, params)

    def body(carry, xs):
        state = carry
        k, a = xs
        out = genv.step(k, state, a, params)
        return out[1], (out[0],) + out[2:]

    _, traj = jax.lax.scan(body, state, (jax.random.split(k_steps, actions.shape[0]), actions))
    return obs, traj


def test_round_trip_matches_native_gymnax():
    """gymnax CartPole -> jaxenvs -> to_gymnax equals gymnax's own CartPole step for step (same
    keys), through both APIs; params.max_steps_in_episode=20 makes truncations happen."""
    native, nparams = gymnax.make("CartPole-v1")
    nparams = nparams.replace(max_steps_in_episode=20)
    ours_env = jaxenvs.make("gymnax/CartPole-v1", autoreset=False, max_steps_in_episode=20)
    v1, legacy = to_gymnax(ours_env, api="v1"), to_gymnax(ours_env, api="legacy")
    actions = jax.random.randint(jax.random.key(3), (120,), 0, 2)
    key = jax.random.key(7)
    run = jax.jit(_scan_steps, static_argnums=0)
    obs_n, (o_n, r_n, term_n, trunc_n, info_n) = run(native, nparams, key, actions)
    obs_v, (o_v, r_v, term_v, trunc_v, info_v) = run(v1, v1.default_params, key, actions)
    obs_l, (o_l, r_l, done_l, info_l) = run(legacy, legacy.default_params, key, actions)
    assert bool(trunc_n.any()) and bool(term_n.any())
    for a, b in ((obs_n, obs_v), (o_n, o_v), (r_n, r_v), (term_n, term_v), (trunc_n, trunc_v), (obs_n, obs_l), (o_n, o_l)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(info_n["final_observation"], info_v["final_observation"])
    np.testing.assert_array_equal(done_l, term_n | trunc_n)
    np.testing.assert_array_equal(info_l["discount"], 1.0 - term_n)


def test_to_gymnax_grid_world_spaces_flattening_and_time_limit():
    genv = to_gymnax(jaxenvs.make("GridWorld-v0", autoreset=False), api="v1")
    params = genv.default_params
    assert params.max_steps_in_episode == 300
    assert isinstance(genv.action_space(params), gspaces.Discrete) and genv.action_space(params).n == 4
    space = genv.observation_space(params)
    assert isinstance(space, gspaces.Box) and space.shape == (4,) and np.all(np.asarray(space.high) == 4)
    obs, state = genv.reset(jax.random.key(0), params)
    env_obs = state.env_state.env_state  # TimeLimitState -> GridWorld state
    np.testing.assert_array_equal(obs, np.concatenate([env_obs.agent, env_obs.target]).astype(np.float32))
    # one step before the limit, stepping away from the target: truncated, not terminated
    agent, target = np.asarray(env_obs.agent), np.asarray(env_obs.target)
    away = 2 if target[0] > agent[0] else 0  # never onto the target (same column: x-moves only)
    last = state.replace(time=jnp.int32(299), env_state=state.env_state.replace(time=jnp.int32(299)))
    o, st, r, term, trunc, info = genv.step(jax.random.key(1), last, away, params)
    assert (bool(term), bool(trunc), float(info["discount"])) == (False, True, 1.0)
    assert int(st.time) == 0  # reset
    np.testing.assert_array_equal(info["final_observation"][2:], target)  # the episode's own target


def test_to_gymnax_refuses_what_it_cannot_serve():
    with pytest.raises(ValueError, match="SingleAgentView"):
        to_gymnax(jaxenvs.make("HurdleRace-v0"))
    with pytest.raises(ValueError, match="max_steps_in_episode"):
        to_gymnax(jaxenvs.make("Lottery-v0"))
    with pytest.raises(ValueError, match="'legacy'"):
        to_gymnax(jaxenvs.make("GridWorld-v0"), api="v2")
    with pytest.raises(ValueError, match="inner AutoReset"):
        to_gymnax(RecordEpisodeStatistics(jaxenvs.make("GridWorld-v0")))
    assert to_gymnax(jaxenvs.make("Lottery-v0"), max_steps_in_episode=1).default_params.max_steps_in_episode == 1


# ---------------------------------------------------------------------------------------------
# PureJaxRL's training-loop pattern
# ---------------------------------------------------------------------------------------------
# A minimal faithful copy of PureJaxRL's wrappers (purejaxrl/wrappers.py, gymnax 0.0.x API):
# proxying base class, FlattenObservationWrapper (reshape to a vector) and LogWrapper (episode
# returns and lengths kept in the state, reported in info at episode ends).


class PureJaxRLWrapper:
    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        return getattr(self._env, name)


class PureJaxRLFlatten(PureJaxRLWrapper):
    def observation_space(self, params):
        space = self._env.observation_space(params)
        assert isinstance(space, gspaces.Box), "Only Box spaces are supported for now."
        return gspaces.Box(space.low, space.high, (int(np.prod(space.shape)),), space.dtype)

    def reset(self, key, params=None):
        obs, state = self._env.reset(key, params)
        return jnp.reshape(obs, (-1,)), state

    def step(self, key, state, action, params=None):
        obs, state, reward, done, info = self._env.step(key, state, action, params)
        return jnp.reshape(obs, (-1,)), state, reward, done, info


@struct.dataclass
class LogEnvState:
    env_state: Any
    episode_returns: float
    episode_lengths: int
    returned_episode_returns: float
    returned_episode_lengths: int
    timestep: int


class PureJaxRLLog(PureJaxRLWrapper):
    def reset(self, key, params=None):
        obs, env_state = self._env.reset(key, params)
        return obs, LogEnvState(env_state, 0.0, 0, 0.0, 0, 0)

    def step(self, key, state, action, params=None):
        obs, env_state, reward, done, info = self._env.step(key, state.env_state, action, params)
        new_return = state.episode_returns + reward
        new_length = state.episode_lengths + 1
        state = LogEnvState(
            env_state=env_state,
            episode_returns=new_return * (1 - done),
            episode_lengths=new_length * (1 - done),
            returned_episode_returns=state.returned_episode_returns * (1 - done) + new_return * done,
            returned_episode_lengths=state.returned_episode_lengths * (1 - done) + new_length * done,
            timestep=state.timestep + 1,
        )
        info["returned_episode_returns"] = state.returned_episode_returns
        info["returned_episode_lengths"] = state.returned_episode_lengths
        info["timestep"] = state.timestep
        info["returned_episode"] = done
        return obs, state, reward, done, info


def _purejaxrl_rollout(env, policy, num_envs, num_steps, key, legacy=True):
    """PureJaxRL's loop: vmapped reset, then vmapped steps inside lax.scan (random policy)."""
    params = env.default_params
    k_reset, k_run = jax.random.split(key)
    obsv, env_state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(k_reset, num_envs), params)

    def _env_step(runner_state, unused):
        env_state, last_obs, rng = runner_state
        rng, _rng = jax.random.split(rng)
        action = jax.vmap(policy)(jax.random.split(_rng, num_envs), last_obs)
        rng, _rng = jax.random.split(rng)
        out = jax.vmap(env.step, in_axes=(0, 0, 0, None))(jax.random.split(_rng, num_envs), env_state, action, params)
        obsv, env_state, reward = out[:3]
        done = out[3] if legacy else out[3] | out[4]
        info = out[-1]
        return (env_state, obsv, rng), (last_obs, action, reward, done, info)

    _, traj = jax.lax.scan(_env_step, (env_state, obsv, k_run), None, num_steps)
    return traj


def _random(n):
    return lambda key, obs: jax.random.randint(key, (), 0, n)


def _check_logged_episodes(traj, max_len):
    """LogWrapper's bookkeeping equals the episodes read off the raw rewards and done flags."""
    reward, done, info = (np.asarray(x) for x in (traj[2], traj[3], traj[4]["returned_episode_returns"]))
    lengths = np.asarray(traj[4]["returned_episode_lengths"])
    ended = 0
    for e in range(reward.shape[1]):
        ret, length = 0.0, 0
        for t in range(reward.shape[0]):
            ret, length = ret + reward[t, e], length + 1
            if done[t, e]:
                assert info[t, e] == pytest.approx(ret) and lengths[t, e] == length <= max_len
                ret, length, ended = 0.0, 0, ended + 1
    return ended


def test_purejaxrl_pattern_on_grid_world_both_apis():
    """PureJaxRL's loop and wrappers (legacy) and gymnax 1.0's purerl wrappers (v1) over GridWorld:
    the same keys give the same transitions; logged returns are 1 exactly for reached targets."""
    base = jaxenvs.make("GridWorld-v0", autoreset=False)
    legacy = PureJaxRLLog(PureJaxRLFlatten(to_gymnax(base, api="legacy")))
    v1 = GymnaxLog(GymnaxFlatten(to_gymnax(base, api="v1")))
    key = jax.random.key(11)
    run = jax.jit(_purejaxrl_rollout, static_argnums=(0, 1, 2, 3, 5))
    tl = run(legacy, _random(4), 8, 400, key, True)
    tv = run(v1, _random(4), 8, 400, key, False)
    for a, b in zip(tl[:4], tv[:4]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(tl[4]["returned_episode_returns"], tv[4]["returned_episode_returns"])
    assert _check_logged_episodes(tl, 300) > 8
    reached = np.asarray(tl[4]["discount"]) == 0.0
    np.testing.assert_array_equal(np.asarray(tl[2]) == 1.0, reached)


def test_purejaxrl_pattern_on_hurdle_race_single_agent_view():
    """Runner 0 of HurdleRace against a scripted runner 1 (JUMP exactly at hurdles) through
    PureJaxRL's loop: the view's observation, reward and outcome are runner 0's."""
    scripted = lambda key, obs: jnp.where(obs == HURDLE, JUMP, RUN)  # noqa: E731  (both rows)
    view = SingleAgentView(jaxenvs.make("HurdleRace-v0", autoreset=False), agent=0, others_policy=scripted)
    env = PureJaxRLLog(to_gymnax(view))
    assert env.observation_space(env.default_params).shape == (2,)  # Discrete(2) one-hot
    always_run = lambda key, obs: jnp.int32(RUN)  # noqa: E731
    traj = jax.jit(_purejaxrl_rollout, static_argnums=(0, 1, 2, 3, 5))(env, always_run, 4, 120, jax.random.key(2), True)
    assert _check_logged_episodes(traj, 50) > 0
    returns = np.asarray(traj[4]["returned_episode_returns"])[np.asarray(traj[3])]
    assert np.all(returns == -1.0)  # a runner stuck at the first hurdle loses every race


# ---------------------------------------------------------------------------------------------
# gymnax envs through jaxenvs' wrappers, Gymnasium and SB3 adapters
# ---------------------------------------------------------------------------------------------


def test_jaxenvs_wrappers_on_gymnax_env():
    env = NormalizeObservation(RecordEpisodeStatistics(jaxenvs.make("gymnax/CartPole-v1")))
    traj = jaxenvs.rollout.rollout(env, jax.random.key(0), jaxenvs.rollout.random_policy(env), 200, num_envs=4, record_states=False)
    ended = np.asarray(traj.info["returned_episode"])
    ret, length = np.asarray(traj.info["episode_return"]), np.asarray(traj.info["episode_length"])
    assert ended.sum() > 4
    np.testing.assert_array_equal(ret[ended], length[ended])  # CartPole pays 1 per step
    assert abs(float(np.asarray(traj.obs)[100:].mean())) < 1.0  # normalised


def test_gymnasium_and_sb3_adapters_on_gymnax_env():
    from jaxenvs.adapters.gymnasium import GymnasiumEnv

    genv = GymnasiumEnv("gymnax/CartPole-v1")
    obs, _ = genv.reset(seed=0)
    assert genv.observation_space.contains(obs) and genv.action_space.n == 2
    steps, terminated, truncated = 0, False, False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, _ = genv.step(0)  # always push left: falls within ~10 steps
        steps += 1
    assert terminated and not truncated and 5 <= steps <= 30
    require("stable_baselines3")
    from jaxenvs.adapters.sb3 import SB3VecEnv

    venv = SB3VecEnv("gymnax/CartPole-v1", num_envs=2, seed=0)
    obs = venv.reset()
    obs, rewards, dones, infos = venv.step(np.array([0, 1]))
    assert obs.shape == (2, 4) and rewards.tolist() == [1.0, 1.0] and not dones.any()
