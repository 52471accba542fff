"""XLA's cheapest compile for programs that run for microseconds or once (the checker's and
`verify_port`'s checked programs, the trainer's GIF programs): `fast_jit`, `compiler_options`."""

from __future__ import annotations

import functools

import jax
import numpy as np

__all__ = ["fast_jit", "compiler_options"]

_FAST_COMPILE = {"xla_backend_optimization_level": 0}


@functools.lru_cache(maxsize=None)
def compiler_options(backend: str) -> dict | None:
    """The options of the cheapest compile on ``backend``, None where it does not take them (found by
    compiling a one-op program with them; XLA:CPU takes them, so nothing is compiled to find out)."""
    if backend == "cpu":
        return dict(_FAST_COMPILE)
    try:
        jax.jit(lambda x: x + 1, compiler_options=_FAST_COMPILE)(np.int32(0))
        return _FAST_COMPILE
    except Exception:
        return None


def fast_jit(fn):
    return jax.jit(fn, compiler_options=compiler_options(jax.default_backend()))
