"""Observation wrappers: FlattenObservation and TransformObservation.

Each maps the observations returned by ``reset`` and ``step`` and, when the inner environment is
auto-reset, also ``info["final_obs"]`` (the observation an episode ended on), so that a learner
bootstraps a truncated episode from an observation of the same form as the ones it trains on.
"""

from __future__ import annotations

from typing import Any, Callable

import jax

from jaxenvs import spaces
from jaxenvs.core import Environment
from jaxenvs.wrappers.base import Wrapper

__all__ = ["ObservationWrapper", "FlattenObservation", "TransformObservation", "map_final_obs"]


def map_final_obs(info: dict, fn: Callable[[Any], Any]) -> dict:
    """``info`` with ``fn`` applied to ``info["final_obs"]`` when that key is present."""
    if "final_obs" not in info:
        return info
    info = dict(info)
    info["final_obs"] = fn(info["final_obs"])
    return info


class ObservationWrapper(Wrapper):
    """Base of stateless wrappers that map every observation through `observation`.

    Subclasses implement ``observation(obs, params)`` (it receives the full observation, with the
    agent axis for multi-agent environments) and, when the space changes, ``observation_space``.
    """

    def observation(self, obs: Any, params: Any) -> Any:
        raise NotImplementedError

    def reset_env(self, key, params):
        obs, state = self.env.reset_env(key, params)
        return self.observation(obs, params), state

    def step_env(self, key, state, action, params):
        obs, state, reward, terminated, truncated, info = self.env.step_env(key, state, action, params)
        info = map_final_obs(info, lambda o: self.observation(o, params))
        return self.observation(obs, params), state, reward, terminated, truncated, info


class FlattenObservation(ObservationWrapper):
    """Observations become float32 vectors (`jaxenvs.spaces.flatten`, Gymnasium's order).

    ``Dict`` entries are concatenated in sorted key order (GridWorld: ``agent`` then ``target``),
    Box values (integer ones too) become floats, Discrete values one-hot vectors, as Gymnasium's
    ``FlattenObservation`` does. The observation space is `jaxenvs.spaces.flatten_space` of
    the inner one. Multi-agent observations become float32[num_agents, flatdim]. Observations are
    flattened according to the space of the environment's ``default_params`` (params never change
    shapes), so ``step`` works with traced params.
    """

    def __init__(self, env: Environment):
        super().__init__(env)
        self._space = env.observation_space(env.default_params)
        spaces.flatdim(self._space)  # TypeError naming the space if it cannot be flattened

    def observation(self, obs, params):
        flat = lambda o: spaces.flatten(self._space, o)  # noqa: E731
        return jax.vmap(flat)(obs) if self.multi_agent else flat(obs)

    def observation_space(self, params=None):
        return spaces.flatten_space(self.env.observation_space(params))


class TransformObservation(ObservationWrapper):
    """Observations become ``fn(obs)`` (ReinforcementLearning.jl's ``StateOverriddenEnv``).

    ``fn`` must be a pure JAX function; for multi-agent environments it receives the whole
    observation, agent axis included. ``observation_space`` is the space of the new observations
    (per agent); ``None`` keeps the inner environment's space, which is only right when ``fn``
    keeps observations inside it.
    """

    def __init__(self, env: Environment, fn: Callable[[Any], Any], observation_space: spaces.Space | None = None):
        super().__init__(env)
        if not callable(fn):
            raise TypeError(f"TransformObservation needs a callable fn, got {type(fn).__name__}")
        if observation_space is not None and not isinstance(observation_space, spaces.Space):
            raise TypeError(
                f"TransformObservation's observation_space must be a jaxenvs Space or None, got {observation_space!r}"
            )
        self.fn = fn
        self._observation_space = observation_space

    def observation(self, obs, params):
        return self.fn(obs)

    def observation_space(self, params=None):
        if self._observation_space is None:
            return self.env.observation_space(params)
        return self._observation_space
