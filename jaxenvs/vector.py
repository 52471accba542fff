"""Batched vector path: ``num_envs`` copies of an environment stepped with ONE key per batch step.

``jax.vmap(env.step)`` with one key per env is the plain path. :class:`VectorEnv` gives the same
semantics (time limit, same-step auto-reset with ``info["final_obs"]``) with less RNG work:

* the batch key is split once into a step key and a reset key per step (not once per env);
* environments whose ``traits.chance`` is ``"deterministic"`` draw no randomness in ``step_env``
  (a rule :func:`jaxenvs.check_env` verifies), so they get no per-env step keys at all;
* auto-reset happens at the batch level, from one vmapped ``reset_env`` over per-env reset keys.

Trajectories differ from the plain path's for the same key (the keys are derived differently) but
have the same distribution.
"""

from __future__ import annotations

from typing import Any

import jax

from jaxenvs.core import Environment, check_params
from jaxenvs.wrappers.base import AutoReset, has_wrapper, step_draws_randomness, strip_autoreset, tree_select

__all__ = ["VectorEnv"]


class VectorEnv:
    """``num_envs`` copies of ``env``: ``reset(key)`` and ``step(key, state, action)`` on a batch.

    ``state``, ``obs``, ``action``, ``reward`` and the flags carry a leading ``num_envs`` axis;
    an ``env`` from ``make`` has its AutoReset replaced by the batch-level one, unless another
    wrapper sits above it (then that env keeps resetting itself);
    ``params`` is shared by the batch (pass a batched params pytree and ``params_axis=0`` to give
    each env its own).
    """

    def __init__(self, env: Environment, num_envs: int, autoreset: bool = True, params_axis: int | None = None):
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        self.env = strip_autoreset(env)
        self.num_envs = num_envs
        # an AutoReset below other wrappers (e.g. under NormalizeObservation, whose statistics
        # must survive episode ends) already resets each env: the batch then leaves it to it
        self.autoreset = autoreset and not has_wrapper(self.env, AutoReset)
        self.params_axis = params_axis
        self._step_needs_key = step_draws_randomness(env)

    def __getattr__(self, name):
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    @property
    def default_params(self):
        return self.env.default_params

    def _params(self, params):
        return check_params(self.env, params)

    def reset(self, key: jax.Array, params: Any = None):
        params = self._params(params)
        keys = jax.random.split(key, self.num_envs)
        return jax.vmap(self.env.reset, in_axes=(0, self.params_axis))(keys, params)

    def step(self, key: jax.Array, state: Any, action: Any, params: Any = None):
        params = self._params(params)
        key_step, key_reset = jax.random.split(key)
        if self._step_needs_key:
            step = jax.vmap(self.env.step, in_axes=(0, 0, 0, self.params_axis))
            out = step(jax.random.split(key_step, self.num_envs), state, action, params)
        else:
            step = jax.vmap(self.env.step, in_axes=(None, 0, 0, self.params_axis))
            out = step(key_step, state, action, params)
        obs, state, reward, terminated, truncated, info = out
        if not self.autoreset:
            return out
        reset_obs, reset_state = self.reset(key_reset, params)
        done = terminated | truncated
        info = dict(info)
        info["final_obs"] = obs
        obs = jax.vmap(tree_select)(done, reset_obs, obs)
        state = jax.vmap(tree_select)(done, reset_state, state)
        return obs, state, reward, terminated, truncated, info
