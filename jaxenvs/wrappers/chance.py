"""`FoldChanceNodes`: explicit chance nodes resolved inside ``reset`` and ``step``.

An env with ``traits.chance == "explicit_stochastic"`` (OpenSpiel's semantics) returns chance
nodes as states of their own: ``step`` there ignores the action and draws the outcome with its key.
Learners that should only see decisions wrap it in `FoldChanceNodes`: every chance node that
follows a ``reset`` or a ``step`` is stepped through in the same call, so every returned state is a
decision state or a terminal one.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxenvs.core import Environment
from jaxenvs.wrappers.base import Wrapper

__all__ = ["FoldChanceNodes"]


class FoldChanceNodes(Wrapper):
    """Steps through the chance nodes that follow ``reset`` and ``step``, drawing their outcomes
    with the call's key (each chance step gets its own split of it).

    The returned ``reward`` is the decision step's plus those of the chance steps (float32, same
    shape); ``terminated``/``truncated`` are true if any of the folded steps set them (a chance
    step that ends the game stops the folding); ``info`` is the decision step's, except that
    ``info["chance_outcome"]`` (when the env reports it) is the last outcome drawn in the call, or
    -1 if none was. ``is_chance_node`` of a returned state is false, so ``traits.chance`` reads
    ``"stochastic"``. At most ``max_chance_steps`` consecutive chance nodes are folded (a bound for
    the ``lax.while_loop``; raise it for games with longer chance sequences).
    """

    draws_in_step = True

    def __init__(self, env: Environment, max_chance_steps: int = 64):
        super().__init__(env)
        if env.traits.chance != "explicit_stochastic":
            raise ValueError(
                f"FoldChanceNodes needs an env with traits.chance='explicit_stochastic', got {env!r}"
            )
        if not isinstance(max_chance_steps, int) or isinstance(max_chance_steps, bool) or max_chance_steps < 1:
            raise ValueError(f"FoldChanceNodes needs max_chance_steps as an int >= 1, got {max_chance_steps!r}")
        self.max_chance_steps = max_chance_steps

    @property
    def traits(self):
        return dataclasses.replace(self.env.traits, chance="stochastic")

    def _fold(self, key, obs, state, reward, terminated, truncated, info, params):
        action = jnp.zeros(self.env.batched_action_shape(), jnp.int32)
        has_outcome = "chance_outcome" in info

        def cond(carry):
            i, _, _, state, _, terminated, truncated, _ = carry
            more = self.env.is_chance_node(state, params) & ~terminated & ~truncated
            return more & (i < self.max_chance_steps)

        def body(carry):
            i, key, obs, state, reward, terminated, truncated, outcome = carry
            key, key_step = jax.random.split(key)
            obs, state, r, term, trunc, step_info = self.env.step_env(key_step, state, action, params)
            if has_outcome:
                outcome = step_info["chance_outcome"]
            return i + 1, key, obs, state, reward + r, terminated | term, truncated | trunc, outcome

        outcome = info["chance_outcome"] if has_outcome else jnp.int32(-1)
        carry = (jnp.int32(0), key, obs, state, reward, terminated, truncated, outcome)
        _, _, obs, state, reward, terminated, truncated, outcome = jax.lax.while_loop(cond, body, carry)
        if has_outcome:
            info = {**info, "chance_outcome": outcome}
        return obs, state, reward, terminated, truncated, info

    def reset_env(self, key, params):
        key_reset, key_fold = jax.random.split(key)
        obs, state = self.env.reset_env(key_reset, params)
        reward = jnp.zeros((self.num_agents,) if self.multi_agent else (), jnp.float32)
        flag = jnp.zeros((), bool)
        obs, state, *_ = self._fold(key_fold, obs, state, reward, flag, flag, {}, params)
        return obs, state

    def step_env(self, key, state, action, params):
        key_step, key_fold = jax.random.split(key)
        obs, state, reward, terminated, truncated, info = self.env.step_env(key_step, state, action, params)
        return self._fold(key_fold, obs, state, reward, terminated, truncated, info, params)
