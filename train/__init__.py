"""Jitted training on jaxenvs environments (installed as ``jaxenvs.train``): PPO and TRPO, each
training chunk one call of one compiled program (all seeds vmapped).

    jaxenvs-train --env GridWorld-v0                    # train, write runs/<env>-<time>/
    python -m jaxenvs.train.evaluate runs/...           # reload the checkpoint and evaluate it

(From a checkout of the repository, ``python -m train`` and ``python -m train.evaluate`` run the
same code.)

**XLA:CPU workaround.** With jax/jaxlib 0.10.2 on CPU, seed-vmapped training programs
intermittently hang forever inside the XLA runtime (every thread idle; reproducible with
HurdleRace and 3 seeds) while XLA:CPU's concurrency-optimized scheduler is on, and never did with
it off. Importing this package therefore calls :func:`use_safe_cpu_scheduler`, which appends
``--xla_cpu_enable_concurrency_optimized_scheduler=false`` to ``XLA_FLAGS`` unless the flag is
already set (set it yourself to override). XLA reads ``XLA_FLAGS`` once, when JAX starts its
first backend, so import ``jaxenvs.train`` before running any JAX computation; it warns when that
came too late. The flag concerns the CPU backend only. Importing ``jaxenvs`` alone changes
nothing.
"""

import os
import warnings

__all__ = ["use_safe_cpu_scheduler", "CPU_SCHEDULER_FLAG"]

CPU_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"


def use_safe_cpu_scheduler() -> bool:
    """Turn XLA:CPU's concurrency-optimized scheduler off through ``XLA_FLAGS`` (see the module
    docstring) unless the flag is already set. Returns whether ``XLA_FLAGS`` was changed."""
    flags = os.environ.get("XLA_FLAGS", "")
    if CPU_SCHEDULER_FLAG in flags:
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {CPU_SCHEDULER_FLAG}=false".strip()
    try:
        from jax._src import xla_bridge

        started = bool(getattr(xla_bridge, "_backends", None))
    except Exception:  # a JAX without that internal: nothing to warn about
        started = False
    if started:
        warnings.warn(
            f"JAX started before jaxenvs.train was imported, so {CPU_SCHEDULER_FLAG}=false does not "
            "apply to this process; on CPU, seed-vmapped training may hang. Import jaxenvs.train (or set "
            "XLA_FLAGS) before the first JAX computation.",
            RuntimeWarning,
            stacklevel=2,
        )
    return True


use_safe_cpu_scheduler()
