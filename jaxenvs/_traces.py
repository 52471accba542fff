"""Trace counting: how often JAX ran a function's Python body, i.e. traced it.

`jax.jit` runs the Python body of a function only while it traces (compiles) it, so counting body
runs counts compilations. `jaxenvs.rollout.trace_count`, the adapter engine's ``traces`` and
`jaxenvs.testing.assert_max_traces` and the trainer's ``Trainer.traces`` (`jaxenvs.train.base`)
all count with `TraceCounter`.
"""

from __future__ import annotations

import collections
import functools
from typing import Callable

__all__ = ["TraceCountError", "TraceCounter"]


class TraceCountError(AssertionError):
    """A function was traced (its Python body run) more often than allowed."""


class TraceCounter(collections.Counter):
    """``{name: traces so far}`` for the functions made by `counted` (a `collections.Counter`)."""

    def counted(self, fn: Callable, name: str, max_traces: int | None = None) -> Callable:
        """``fn`` counting its body runs under ``name`` (put it under ``jax.jit``).

        With ``max_traces``, a run beyond that many raises `TraceCountError`. The result has
        ``.traces`` (this name's count so far) and ``.reset_traces()``.
        """

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            self[name] += 1
            wrapped.traces = self[name]
            if max_traces is not None and self[name] > max_traces:
                raise TraceCountError(
                    f"{getattr(fn, '__qualname__', fn)!s} was traced {self[name]} times, at most {max_traces} "
                    "allowed: an argument's shape, dtype, weak type or static value changed between calls"
                )
            return fn(*args, **kwargs)

        def reset_traces() -> None:
            self[name] = 0
            wrapped.traces = 0

        wrapped.traces = self[name]
        wrapped.reset_traces = reset_traces
        return wrapped
