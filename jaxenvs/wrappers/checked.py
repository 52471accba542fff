"""Opt-in checked mode: out-of-range actions raise instead of following the documented fallback.

Inside ``jit`` nothing can raise on a value, so :class:`CheckedActions` records a
``jax.experimental.checkify`` check and :func:`checked` turns a function into one that raises
``checkify.JaxRuntimeError`` naming the action space when the check fails::

    env = jaxenvs.make("GridWorld-v0", checked=True)
    step = jaxenvs.checked(env.step)          # jitted; raises on an invalid action
"""

from __future__ import annotations

from typing import Callable

import jax
from jax.experimental import checkify

from jaxenvs.wrappers.base import Wrapper

__all__ = ["CheckedActions", "checked"]


class CheckedActions(Wrapper):
    """Adds a checkify check that the action lies in the action space (and is not NaN).

    The wrapped ``step`` must run under :func:`checked` (or ``checkify.checkify``).
    """

    def step_env(self, key, state, action, params):
        space = self.env.action_space(params)
        checkify.check(
            self.env.action_in_space(action, params),
            f"{self.env.name}: action out of the action space {space}: {{action}}",
            action=action,
        )
        return self.env.step_env(key, state, action, params)


def checked(fn: Callable, jit: bool = True) -> Callable:
    """``fn`` (e.g. ``env.step``, or a whole rollout) made to raise on failed checkify checks."""
    f = checkify.checkify(fn)
    if jit:
        f = jax.jit(f)

    def wrapper(*args, **kwargs):
        err, out = f(*args, **kwargs)
        err.throw()
        return out

    return wrapper
