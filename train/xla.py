"""XLA settings of the trainer's commands: the safe XLA:CPU scheduler and the compilation cache.

**The XLA:CPU hang.** With jax/jaxlib 0.10.2 on CPU, seed-vmapped programs can hang forever inside
the XLA runtime (every thread idle, the caller waiting for a result) while XLA:CPU's
concurrency-optimized scheduler is on. The smallest case found (deterministic on the project's
2-core machine): ``jax.jit(jax.vmap(trainer.init, in_axes=(0, None)))`` over 2 seeds of GridWorld
with 8 environments, i.e. resetting the environments and initialising the network of two seeds in
one program. With ``--xla_cpu_enable_concurrency_optimized_scheduler=false`` in ``XLA_FLAGS`` it
finishes. The same setting given per program (``jax.jit(f, compiler_options=
{"xla_cpu_enable_concurrency_optimized_scheduler": False})``) does NOT help: XLA:CPU reads it from
the process's flags, which it parses once, when JAX starts its CPU backend.

So the setting must be in ``XLA_FLAGS`` before JAX starts: `use_safe_cpu_scheduler` puts it there
(importing ``jaxenvs.train`` calls it; ``jaxenvs-train`` and ``python -m jaxenvs.train.evaluate``
import it before JAX starts). A script or notebook that ran JAX first cannot get it any more:
`use_safe_cpu_scheduler` then warns, naming the fix (set ``XLA_FLAGS`` in the shell, or import
``jaxenvs.train`` first). Users' own jitted, vmapped programs over jaxenvs environments are
affected the same way (the smallest case above is one): they are protected by the same flag.
"""

from __future__ import annotations

import os
import warnings

__all__ = ["CPU_SCHEDULER_FLAG", "use_safe_cpu_scheduler", "jax_started", "enable_compilation_cache"]

CPU_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"


def jax_started() -> bool:
    """Whether JAX has started a backend in this process (after which ``XLA_FLAGS`` is fixed)."""
    try:
        from jax._src import xla_bridge

        return bool(getattr(xla_bridge, "_backends", None))
    except Exception:  # a JAX without that internal: assume not
        return False


def use_safe_cpu_scheduler() -> bool:
    """Turn XLA:CPU's concurrency-optimized scheduler off for this process through ``XLA_FLAGS``
    (unless the flag is set there already, e.g. by you to override). Returns whether ``XLA_FLAGS``
    was changed; warns when JAX had already started, so the change cannot apply."""
    flags = os.environ.get("XLA_FLAGS", "")
    if CPU_SCHEDULER_FLAG in flags:
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {CPU_SCHEDULER_FLAG}=false".strip()
    if jax_started():
        warnings.warn(
            f"JAX started before jaxenvs.train was imported, so {CPU_SCHEDULER_FLAG}=false (set in XLA_FLAGS) does "
            "not apply to this process: on CPU, seed-vmapped programs may hang (jax 0.10.x). Import jaxenvs.train "
            f"before the first JAX computation, or start Python with XLA_FLAGS={CPU_SCHEDULER_FLAG}=false.",
            RuntimeWarning,
            stacklevel=3,
        )
    return True


def enable_compilation_cache():
    """JAX's persistent compilation cache for the trainer's commands (`jaxenvs._cache`), keeping
    every program however quick to compile: a warm start then compiles nothing."""
    from jaxenvs import _cache

    return _cache.enable_compilation_cache(min_compile_s=0.0)
