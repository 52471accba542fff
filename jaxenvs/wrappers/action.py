"""Action wrappers: TransformAction, ClipAction and RescaleAction.

The outer ``step`` checks the action against the wrapper's action space; the mapped action is
checked again (shape and dtype, at trace time) against the inner environment's action space, so
a mapping that produces the wrong shape or dtype fails with `jaxenvs.ActionError`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from jaxenvs import spaces
from jaxenvs.core import Environment
from jaxenvs.wrappers.base import Wrapper

__all__ = ["ActionWrapper", "TransformAction", "ClipAction", "RescaleAction"]


class ActionWrapper(Wrapper):
    """Base of stateless wrappers that map every action through `action` before ``step``."""

    def action(self, action: Any, params: Any) -> Any:
        raise NotImplementedError

    def step_env(self, key, state, action, params):
        inner_action = self.env._check_action_structure(self.action(action, params), params)
        return self.env.step_env(key, state, inner_action, params)


def _float_box(env: Environment, wrapper: str) -> spaces.Box:
    space = env.action_space(env.default_params)
    if not isinstance(space, spaces.Box) or space.dtype.kind != "f":
        raise TypeError(f"{wrapper} needs an environment with a float32 Box action space, got {space}")
    return space


class TransformAction(ActionWrapper):
    """Actions are mapped through ``fn`` before the inner step (ReinforcementLearning.jl's
    ``ActionTransformedEnv``).

    ``fn`` is a pure JAX function from an action of ``action_space`` (the agent axis included for
    multi-agent environments) to an action of the inner environment. ``action_space=None`` keeps
    the inner action space.
    """

    def __init__(self, env: Environment, fn: Callable[[Any], Any], action_space: spaces.Space | None = None):
        super().__init__(env)
        if not callable(fn):
            raise TypeError(f"TransformAction needs a callable fn, got {type(fn).__name__}")
        if action_space is not None and not isinstance(action_space, spaces.Space):
            raise TypeError(f"TransformAction's action_space must be a jaxenvs Space or None, got {action_space!r}")
        self.fn = fn
        self._action_space = action_space

    def action(self, action, params):
        return self.fn(action)

    def action_space(self, params=None):
        if self._action_space is None:
            return self.env.action_space(params)
        return self._action_space


class ClipAction(ActionWrapper):
    """Clips actions into the inner Box action space's bounds (Gymnasium's ``ClipAction``).

    The wrapper's action space is the unbounded ``Box(-inf, inf)`` of the same shape, so any finite
    action is legal outside and clipped inside. NaN actions stay NaN.
    """

    def __init__(self, env: Environment):
        super().__init__(env)
        _float_box(env, "ClipAction")

    def action(self, action, params):
        return self.env.action_space(params).clip(action)

    def action_space(self, params=None):
        inner = self.env.action_space(params)
        return spaces.Box(-np.inf, np.inf, inner.shape, np.float32)


class RescaleAction(ActionWrapper):
    """Maps actions affinely from ``[min_action, max_action]`` onto the inner Box's ``[low, high]``.

    ``a -> low + (high - low) * (a - min_action) / (max_action - min_action)``, then clipped to
    ``[low, high]`` (so an action outside ``[min_action, max_action]`` lands on the nearest bound,
    and rounding never leaves the inner space). ``min_action``/``max_action`` are scalars or arrays
    broadcast to the action shape; the action space becomes ``Box(min_action, max_action)``. The
    inner bounds are read from the environment's ``default_params`` and must be finite.
    """

    def __init__(self, env: Environment, min_action, max_action):
        super().__init__(env)
        inner = _float_box(env, "RescaleAction")
        if not inner.bounded:
            raise ValueError(f"RescaleAction needs finite inner action bounds, got {inner}")
        try:
            lo = np.broadcast_to(np.asarray(min_action, np.float64), inner.shape)
            hi = np.broadcast_to(np.asarray(max_action, np.float64), inner.shape)
        except ValueError as e:
            raise ValueError(
                f"RescaleAction: min_action {np.shape(min_action)} and max_action {np.shape(max_action)} "
                f"do not broadcast to the action shape {inner.shape}"
            ) from e
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise ValueError(f"RescaleAction needs finite min_action and max_action, got {min_action}, {max_action}")
        if np.any(lo >= hi):
            raise ValueError(f"RescaleAction needs min_action < max_action elementwise, got {min_action}, {max_action}")
        self.min_action = lo.astype(np.float32)
        self.max_action = hi.astype(np.float32)

    def action(self, action, params):
        inner = self.env.action_space(params)
        fraction = (action - self.min_action) / (self.max_action - self.min_action)
        return inner.clip(inner.low + (inner.high - inner.low) * fraction)

    def action_space(self, params=None):
        return spaces.Box(self.min_action, self.max_action, self.min_action.shape, np.float32)
