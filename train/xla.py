"""Compiler options every compiled program of the trainer is built with.

**The XLA:CPU hang.** With jax/jaxlib 0.10.2 on CPU, seed-vmapped training programs
intermittently hang forever inside the XLA runtime (every thread idle) while XLA:CPU's
concurrency-optimized scheduler (``xla_cpu_enable_concurrency_optimized_scheduler``) is on; with it
off they never did. The trainer therefore compiles each of its programs with that scheduler off
(`jit`), a per-program compiler option that holds whatever the import order: a script or notebook
that ran JAX before importing ``jaxenvs.train`` trains as safely as one that did not, and
``XLA_FLAGS`` is left alone. The option is a field of XLA's debug options: every backend accepts
it, the CPU one acts on it.

JAX takes compiler options on the outermost ``jax.jit`` only (a nested one with options is an
error), so the trainer's jitted functions (``Trainer.train``, ``init``, ``run_updates``) pick at
call time: called eagerly (``trainer.train(key)``, ``jax.vmap(trainer.train)(keys)``) they run as
a program of their own with the option; called inside a ``jax.jit`` of yours they are an
ordinary nested function, and the option is then yours to give:
``jax.jit(f, compiler_options=COMPILER_OPTIONS)``.
"""

from __future__ import annotations

from typing import Any, Callable

import jax

__all__ = ["COMPILER_OPTIONS", "jit"]

# XLA debug options set on every program the trainer compiles.
COMPILER_OPTIONS: dict[str, Any] = {"xla_cpu_enable_concurrency_optimized_scheduler": False}


def _under_jit() -> bool:
    """Whether a ``jax.jit`` (or another staging trace) is tracing the caller right now."""
    try:
        from jax._src.core import unsafe_am_i_under_a_jit
    except ImportError:  # a JAX without it: stay nestable (and lose the option) rather than fail
        return True
    return bool(unsafe_am_i_under_a_jit())


class _Jitted:
    """A jitted function that carries :data:`COMPILER_OPTIONS` when it is the outermost program
    and is a plain nested ``jax.jit`` inside another one (see the module docstring)."""

    def __init__(self, fun: Callable, **kwargs):
        self.safe = jax.jit(fun, compiler_options=COMPILER_OPTIONS, **kwargs)
        self.nested = jax.jit(fun, **kwargs)
        self.__name__ = getattr(fun, "__name__", "jitted")  # no __wrapped__: jax.vmap would unwrap to fun
        self.__doc__ = getattr(fun, "__doc__", None)

    def __call__(self, *args, **kwargs):
        return (self.nested if _under_jit() else self.safe)(*args, **kwargs)

    def lower(self, *args, **kwargs):
        """``jax.jit(...).lower`` of the top-level program (with the options)."""
        return self.safe.lower(*args, **kwargs)


def jit(fun: Callable, **kwargs) -> Callable:
    """``jax.jit(fun, **kwargs)`` compiled with :data:`COMPILER_OPTIONS` (the safe CPU scheduler)
    whenever it runs as a program of its own; nestable inside other jitted functions."""
    return _Jitted(fun, **kwargs)
