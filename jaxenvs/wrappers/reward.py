"""TransformReward: rewards mapped through a function."""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from jaxenvs.core import Environment
from jaxenvs.wrappers.base import Wrapper

__all__ = ["TransformReward"]


class TransformReward(Wrapper):
    """Rewards become ``fn(reward)``, cast to float32.

    ``fn`` is a pure JAX function; for multi-agent environments it receives float32[num_agents]
    and must return the same shape (checked when ``step`` is traced; a ``ValueError`` otherwise).
    """

    def __init__(self, env: Environment, fn: Callable[[jax.Array], jax.Array]):
        super().__init__(env)
        if not callable(fn):
            raise TypeError(f"TransformReward needs a callable fn, got {type(fn).__name__}")
        self.fn = fn

    def step_env(self, key, state, action, params):
        obs, state, reward, terminated, truncated, info = self.env.step_env(key, state, action, params)
        new_reward = jnp.asarray(self.fn(reward))
        if new_reward.shape != jnp.shape(reward):
            raise ValueError(
                f"TransformReward: fn changed the reward's shape from {jnp.shape(reward)} to {new_reward.shape}; "
                "it must keep it"
            )
        return obs, state, new_reward.astype(jnp.float32), terminated, truncated, info
