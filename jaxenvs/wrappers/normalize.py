"""NormalizeObservation and NormalizeReward: running statistics kept in the state (garage's
``normalize``, Gymnasium's ``NormalizeObservation``/``NormalizeReward``).

The statistics live in the wrapper's state, so under ``vmap`` every environment keeps its own;
wrap outside `jaxenvs.wrappers.AutoReset` (around what ``jaxenvs.make`` returns) so that
they persist across episodes (inside it, every auto-reset would restart them). ``reset`` starts
fresh statistics; to evaluate with frozen trained ones, build the same wrapper with
``update=False`` and put them into the state after ``reset``, e.g.
``state = state.replace(obs_rms=trained_state.obs_rms)`` (the state's structure does not depend on
``update``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxenvs import struct

from jaxenvs import spaces
from jaxenvs.core import Environment
from jaxenvs.wrappers.base import Wrapper
from jaxenvs.wrappers.observation import FlattenObservation, map_final_obs
from jaxenvs.wrappers.action import RescaleAction
from jaxenvs.wrappers.reward import TransformReward

__all__ = [
    "RunningMeanStd",
    "NormalizeObservation",
    "NormalizeObservationState",
    "NormalizeReward",
    "NormalizeRewardState",
    "normalize",
]


@struct.dataclass
class RunningMeanStd:
    """Running mean and (population) variance of a stream of float32 arrays.

    Starts, as Gymnasium's ``RunningMeanStd``, from mean 0, var 1 and a pseudo-count ``1e-4``, and
    adds one sample at a time with the parallel-variance update (Chan et al.)::

        delta = x - mean;  n = count + 1
        mean += delta / n;  var = (var * count + delta**2 * count / n) / n;  count = n
    """

    mean: jax.Array  # float32, the samples' shape
    var: jax.Array  # float32, the samples' shape
    count: jax.Array  # float32 scalar: samples seen plus the initial pseudo-count

    @classmethod
    def create(cls, shape: tuple[int, ...], initial_count: float = 1e-4) -> "RunningMeanStd":
        return cls(jnp.zeros(shape, jnp.float32), jnp.ones(shape, jnp.float32), jnp.asarray(initial_count, jnp.float32))

    def update(self, x: jax.Array) -> "RunningMeanStd":
        """The statistics after one more sample ``x`` (same shape as ``mean``).

        A sample with a non-finite element (NaN or infinity) is left out whole: the statistics
        stay as they were, so one bad observation cannot poison every later one.
        """
        x = jnp.asarray(x, jnp.float32)
        delta = x - self.mean
        total = self.count + 1.0
        mean = self.mean + delta / total
        var = (self.var * self.count + jnp.square(delta) * self.count / total) / total
        ok = jnp.all(jnp.isfinite(x))
        return RunningMeanStd(jnp.where(ok, mean, self.mean), jnp.where(ok, var, self.var), jnp.where(ok, total, self.count))


def _check_epsilon(name: str, epsilon: float) -> float:
    if not isinstance(epsilon, (int, float)) or isinstance(epsilon, bool) or not epsilon > 0:
        raise ValueError(f"{name} needs epsilon > 0, got {epsilon!r}")
    return float(epsilon)


@struct.dataclass
class NormalizeObservationState:
    env_state: Any
    obs_rms: RunningMeanStd


class NormalizeObservation(Wrapper):
    """Observations become ``(obs - mean) / sqrt(var + epsilon)`` (float32) with running statistics.

    Each observation (the initial one from ``reset`` and every one from ``step``, including the
    first observations of auto-reset episodes) updates the statistics first, then is normalised
    with them, as in Gymnasium. ``info["final_obs"]``, when present, is normalised with the same
    statistics but does not update them. An observation with a NaN or infinite element leaves the
    statistics unchanged (`RunningMeanStd.update`) and is itself normalised to non-finite
    values, so the fault stays visible where it happened. Statistics are elementwise over the whole observation:
    per agent for multi-agent environments.

    The inner observation space must be a Box (wrap a Dict in
    `jaxenvs.wrappers.FlattenObservation` first); the new one is an unbounded float32 Box
    of the same shape.
    """

    def __init__(self, env: Environment, epsilon: float = 1e-8, update: bool = True):
        super().__init__(env)
        space = env.observation_space(env.default_params)
        if not isinstance(space, spaces.Box):
            raise TypeError(
                f"NormalizeObservation needs a Box observation space, got {space}; "
                "wrap the environment in FlattenObservation first"
            )
        self.epsilon = _check_epsilon("NormalizeObservation", epsilon)
        self.update = bool(update)

    def _normalize(self, obs, rms):
        return ((jnp.asarray(obs, jnp.float32) - rms.mean) / jnp.sqrt(rms.var + self.epsilon)).astype(jnp.float32)

    def _update(self, rms, obs):
        return rms.update(obs) if self.update else rms

    def reset_env(self, key, params):
        obs, state = self.env.reset_env(key, params)
        rms = self._update(RunningMeanStd.create(jnp.shape(obs)), obs)
        return self._normalize(obs, rms), NormalizeObservationState(state, rms)

    def step_env(self, key, state, action, params):
        obs, env_state, reward, terminated, truncated, info = self.env.step_env(key, state.env_state, action, params)
        rms = self._update(state.obs_rms, obs)
        info = map_final_obs(info, lambda o: self._normalize(o, rms))
        return self._normalize(obs, rms), NormalizeObservationState(env_state, rms), reward, terminated, truncated, info

    def observation_space(self, params=None):
        inner = self.env.observation_space(params)
        return spaces.Box(-np.inf, np.inf, inner.shape, np.float32)

    def inner_state(self, state):
        return state.env_state


@struct.dataclass
class NormalizeRewardState:
    env_state: Any
    discounted_return: jax.Array  # float32, reward's shape: the running discounted return estimate
    return_rms: RunningMeanStd  # statistics of discounted_return


class NormalizeReward(Wrapper):
    """Rewards are divided by the running standard deviation of a discounted return estimate.

    Gymnasium's ``NormalizeReward``: on every step ::

        G = G * gamma * (1 - done) + reward;  update the running variance of G with G
        reward / sqrt(var(G) + epsilon)

    The reward is scaled, not centred. Here ``done = terminated | truncated`` (Gymnasium uses
    ``terminated`` only, as its wrapper does not see the reset that follows a truncation); ``G``
    starts at 0 on ``reset``. Multi-agent rewards keep one ``G`` and one variance per agent. A
    non-finite reward leaves ``G`` and the statistics unchanged (and stays non-finite itself).
    """

    def __init__(self, env: Environment, gamma: float = 0.99, epsilon: float = 1e-8, update: bool = True):
        super().__init__(env)
        if not isinstance(gamma, (int, float)) or isinstance(gamma, bool) or not 0.0 <= gamma <= 1.0:
            raise ValueError(f"NormalizeReward needs gamma in [0, 1], got {gamma!r}")
        self.gamma = float(gamma)
        self.epsilon = _check_epsilon("NormalizeReward", epsilon)
        self.update = bool(update)

    def reset_env(self, key, params):
        obs, state = self.env.reset_env(key, params)
        shape = (self.num_agents,) if self.multi_agent else ()
        return obs, NormalizeRewardState(state, jnp.zeros(shape, jnp.float32), RunningMeanStd.create(shape))

    def step_env(self, key, state, action, params):
        obs, env_state, reward, terminated, truncated, info = self.env.step_env(key, state.env_state, action, params)
        done = terminated | truncated
        g = state.discounted_return * self.gamma * (1.0 - done.astype(jnp.float32)) + reward
        # a non-finite reward is passed on (scaled) but kept out of the return and its statistics
        g = jnp.where(jnp.isfinite(g), g, state.discounted_return)
        rms = state.return_rms.update(g) if self.update else state.return_rms
        reward = (reward / jnp.sqrt(rms.var + self.epsilon)).astype(jnp.float32)
        return obs, NormalizeRewardState(env_state, g, rms), reward, terminated, truncated, info

    def inner_state(self, state):
        return state.env_state


def normalize(
    env: Environment,
    scale_reward: float = 1.0,
    normalize_obs: bool = False,
    normalize_reward: bool = False,
    expected_action_scale: float = 1.0,
    flatten_obs: bool = True,
    gamma: float = 0.99,
    epsilon: float = 1e-8,
) -> Environment:
    """garage's ``normalize(env, ...)`` composed from this package's wrappers, with its defaults.

    From the inside out:

    * ``normalize_obs``: `NormalizeObservation` (after `FlattenObservation` when
      ``flatten_obs`` and the observation space is not already a Box);
    * ``normalize_reward``: `NormalizeReward` (``gamma``, ``epsilon``);
    * ``scale_reward != 1``: rewards multiplied by ``scale_reward`` (after any normalisation);
    * a float Box action space: `jaxenvs.wrappers.RescaleAction` from
      ``[-expected_action_scale, expected_action_scale]`` onto the env's bounds, clipped to them.
      Other action spaces pass unchanged.

    With the defaults only the actions are rescaled: ``normalize(jaxenvs.make("PointEnv-v0"))``
    takes actions in ``[-1, 1]^2``. One difference from garage: the running statistics are
    Gymnasium's count-based mean and variance (see `RunningMeanStd`), not garage's
    exponential averages with ``obs_alpha``/``reward_alpha``. Wrap outside
    `jaxenvs.wrappers.AutoReset` (around what ``jaxenvs.make`` returns) so the statistics
    persist across episodes.
    """
    for name, value in (("scale_reward", scale_reward), ("expected_action_scale", expected_action_scale)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not np.isfinite(value) or value <= 0:
            raise ValueError(f"normalize needs a finite {name} > 0, got {value!r}")
    if normalize_obs:
        if flatten_obs and not isinstance(env.observation_space(env.default_params), spaces.Box):
            env = FlattenObservation(env)
        env = NormalizeObservation(env, epsilon=epsilon)
    if normalize_reward:
        env = NormalizeReward(env, gamma=gamma, epsilon=epsilon)
    if scale_reward != 1.0:
        scale = float(scale_reward)
        env = TransformReward(env, lambda r: (r * scale).astype(jnp.float32))
    space = env.action_space(env.default_params)
    if isinstance(space, spaces.Box) and space.dtype.kind == "f":
        env = RescaleAction(env, -float(expected_action_scale), float(expected_action_scale))
    return env
