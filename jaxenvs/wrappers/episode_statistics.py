"""RecordEpisodeStatistics: episode returns and lengths in ``info`` (gymnax's ``LogWrapper``,
Gymnasium's ``RecordEpisodeStatistics``)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jaxenvs import struct

from jaxenvs.wrappers.base import Wrapper

__all__ = ["RecordEpisodeStatistics", "EpisodeStatisticsState"]


@struct.dataclass
class EpisodeStatisticsState:
    env_state: Any
    episode_return: jax.Array  # float32, reward's shape: return of the running episode so far
    episode_length: jax.Array  # int32 scalar: steps of the running episode so far


class RecordEpisodeStatistics(Wrapper):
    """Adds the running episode's return and length to ``info`` on every step.

    ``info["episode_return"]`` (float32, the reward's shape: float32[num_agents] for multi-agent
    environments) and ``info["episode_length"]`` (int32) count the current episode up to and
    including this step; ``info["returned_episode"]`` (bool) is ``terminated | truncated``: on those
    steps the two values are the finished episode's totals, and the counters restart. Mean return
    of the episodes finished in a batch of steps::

        jnp.sum(info["episode_return"] * info["returned_episode"]) / jnp.sum(info["returned_episode"])

    Wrap it outside `jaxenvs.wrappers.AutoReset` (around what ``jaxenvs.make`` returns), as
    gymnax's ``LogWrapper``; it also works inside, since the auto-reset then restarts the counters
    through ``reset``. Under ``vmap`` each environment keeps its own counters.
    """

    def _zero_return(self):
        return jnp.zeros((self.num_agents,) if self.multi_agent else (), jnp.float32)

    def reset_env(self, key, params):
        obs, state = self.env.reset_env(key, params)
        return obs, EpisodeStatisticsState(state, self._zero_return(), jnp.zeros((), jnp.int32))

    def step_env(self, key, state, action, params):
        obs, env_state, reward, terminated, truncated, info = self.env.step_env(key, state.env_state, action, params)
        episode_return = state.episode_return + reward
        episode_length = state.episode_length + 1
        done = terminated | truncated
        info = dict(info)
        info["episode_return"] = episode_return
        info["episode_length"] = episode_length
        info["returned_episode"] = done
        new_state = EpisodeStatisticsState(
            env_state,
            jnp.where(done, jnp.zeros_like(episode_return), episode_return),
            jnp.where(done, jnp.zeros_like(episode_length), episode_length),
        )
        return obs, new_state, reward, terminated, truncated, info

    def inner_state(self, state):
        return state.env_state
