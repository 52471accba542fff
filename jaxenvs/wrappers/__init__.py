"""Pure, jittable, composable wrappers (Gymnasium's names and semantics)."""

from jaxenvs.wrappers.base import AutoReset, TimeLimit, TimeLimitState, WithParams, Wrapper, tree_select
from jaxenvs.wrappers.checked import CheckedActions, checked

__all__ = [
    "Wrapper",
    "WithParams",
    "TimeLimit",
    "TimeLimitState",
    "AutoReset",
    "CheckedActions",
    "checked",
    "tree_select",
]
