"""Batched vector path: ``num_envs`` copies of an environment stepped with ONE key per batch step.

``jax.vmap(env.step)`` with one key per env is the plain path. :class:`VectorEnv` gives the same
semantics (time limit, same-step auto-reset with ``info["final_obs"]``, through the one rule
:func:`jaxenvs.wrappers.base.same_step_reset`) with less RNG work:

* one batched draw of keys per step: ``jax.random.split(key, num_envs + 1)`` gives the reset key
  and, only when the wrapper stack draws randomness in ``step``
  (:func:`jaxenvs.wrappers.base.step_draws_randomness`), one step key per env. A deterministic
  step (``traits.chance == "deterministic"``, verified by :func:`jaxenvs.check_env`) gets the
  batch key itself and no split at all;
* auto-reset happens at the batch level, from one vmapped ``reset_env`` over per-env reset keys;
* optionally (``reset_pool=k``, opt-in), *optimistic resets* as in Brax and Craftax: each step
  draws only ``k`` fresh episodes and hands them to the envs that finished (env ``i`` takes pool
  entry ``i % k``). Resetting then costs ``k`` instead of ``num_envs`` reset draws per step, but
  **episodes that start in the same step may share their start state** (when two finished envs
  map to the same pool entry); across steps the pools are independent draws.

Trajectories differ from the plain path's for the same key (the keys are derived differently) but
have the same distribution (with ``reset_pool``: the same distribution for each env).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxenvs.core import Environment, check_params
from jaxenvs.wrappers.base import AutoReset, has_wrapper, same_step_reset, step_draws_randomness, strip_autoreset

__all__ = ["VectorEnv"]


class VectorEnv:
    """``num_envs`` copies of ``env``: ``reset(key)`` and ``step(key, state, action)`` on a batch.

    ``state``, ``obs``, ``action``, ``reward`` and the flags carry a leading ``num_envs`` axis;
    an ``env`` from ``make`` has its AutoReset replaced by the batch-level one, unless another
    wrapper sits above it (then that env keeps resetting itself);
    ``params`` is shared by the batch (pass a batched params pytree and ``params_axis=0`` to give
    each env its own). ``reset_pool``: optimistic resets from a pool of that many fresh episodes
    per step (see the module docstring; shared params only).
    """

    def __init__(
        self,
        env: Environment,
        num_envs: int,
        autoreset: bool = True,
        params_axis: int | None = None,
        reset_pool: int | None = None,
    ):
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        if reset_pool is not None:
            if not isinstance(reset_pool, int) or isinstance(reset_pool, bool) or not 1 <= reset_pool <= num_envs:
                raise ValueError(f"reset_pool must be None or an int in [1, num_envs={num_envs}], got {reset_pool!r}")
            if params_axis is not None:
                raise ValueError(
                    "reset_pool draws fresh episodes with shared params; with per-env params "
                    "(params_axis is not None) leave reset_pool=None"
                )
        self.env = strip_autoreset(env)
        self.num_envs = num_envs
        # an AutoReset below other wrappers (e.g. under NormalizeObservation, whose statistics
        # must survive episode ends) already resets each env: the batch then leaves it to it
        self.autoreset = autoreset and not has_wrapper(self.env, AutoReset)
        self.params_axis = params_axis
        self.reset_pool = reset_pool if self.autoreset else None
        # decided on the whole stack: an inner AutoReset draws randomness in step
        self._step_needs_key = step_draws_randomness(self.env)

    def __getattr__(self, name):
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    @property
    def default_params(self):
        return self.env.default_params

    def _params(self, params):
        return check_params(self.env, params)

    # turn-based games, batched: one result per env (leading num_envs axis)
    def _each(self, name, state, params, *args):
        fn = getattr(self.env, name)
        in_axes = (0,) * (1 + len(args)) + (self.params_axis,)
        return jax.vmap(fn, in_axes=in_axes)(state, *args, self._params(params))

    def legal_action_mask(self, state: Any, params: Any = None):
        """bool[num_envs, ...]: each env's `Environment.legal_action_mask`."""
        return self._each("legal_action_mask", state, params)

    def current_player(self, state: Any, params: Any = None):
        """int32[num_envs]: each env's `Environment.current_player`."""
        return self._each("current_player", state, params)

    def is_chance_node(self, state: Any, params: Any = None):
        return self._each("is_chance_node", state, params)

    def chance_outcomes(self, state: Any, params: Any = None):
        return self._each("chance_outcomes", state, params)

    def apply_chance(self, state: Any, outcome: Any, params: Any = None):
        """Each env's state after its ``outcome`` (int32[num_envs])."""
        return self._each("apply_chance", state, params, outcome)

    def reset(self, key: jax.Array, params: Any = None):
        params = self._params(params)
        keys = jax.random.split(key, self.num_envs)
        return jax.vmap(self.env.reset, in_axes=(0, self.params_axis))(keys, params)

    def _fresh_episodes(self, key, params):
        """Initial ``(obs, state)`` for every env: ``num_envs`` draws, or ``reset_pool`` shared ones."""
        if self.reset_pool is None:
            return jax.vmap(self.env.reset, in_axes=(0, self.params_axis))(jax.random.split(key, self.num_envs), params)
        pool = jax.vmap(self.env.reset, in_axes=(0, None))(jax.random.split(key, self.reset_pool), params)
        index = jnp.arange(self.num_envs) % self.reset_pool
        return jax.tree.map(lambda x: x[index], pool)

    def step(self, key: jax.Array, state: Any, action: Any, params: Any = None):
        params = self._params(params)
        if self._step_needs_key:
            keys = jax.random.split(key, self.num_envs + 1)
            key_reset = keys[0]
            step = jax.vmap(self.env.step, in_axes=(0, 0, 0, self.params_axis))
            out = step(keys[1:], state, action, params)
        else:
            key_reset = key  # the step ignores its key (checked by check_env's deterministic rule)
            step = jax.vmap(self.env.step, in_axes=(None, 0, 0, self.params_axis))
            out = step(key, state, action, params)
        if not self.autoreset:
            return out
        obs, state, reward, terminated, truncated, info = out
        reset_obs, reset_state = self._fresh_episodes(key_reset, params)
        obs, state, info = same_step_reset(terminated | truncated, obs, state, info, reset_obs, reset_state, batched=True)
        return obs, state, reward, terminated, truncated, info
