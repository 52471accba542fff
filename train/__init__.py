"""Jitted training on jaxenvs environments (installed as ``jaxenvs.train``): PPO and TRPO, each
training chunk one call of one compiled program (all seeds vmapped).

    jaxenvs-train --env GridWorld-v0                              # train, write runs/<env>-<time>/
    python -m jaxenvs.train.evaluate ABSOLUTE_RUN_DIR             # reload the checkpoint and evaluate it

**XLA:CPU workaround.** With jax/jaxlib 0.10.x on CPU, seed-vmapped programs can hang forever
while XLA:CPU's concurrency-optimized scheduler is on (`train.xla` has what is known: the smallest
hanging program, and why a per-program compiler option does not help). Importing this package
therefore calls `use_safe_cpu_scheduler`, which appends
``--xla_cpu_enable_concurrency_optimized_scheduler=false`` to ``XLA_FLAGS`` unless the flag is
already set (set it yourself to override). XLA reads ``XLA_FLAGS`` once, when JAX starts its first
backend, so import ``jaxenvs.train`` before running any JAX computation (``jaxenvs-train`` does);
it warns when that came too late. The flag concerns the CPU backend only. Importing ``jaxenvs``
alone changes nothing.
"""

from .xla import CPU_SCHEDULER_FLAG, use_safe_cpu_scheduler

__all__ = ["use_safe_cpu_scheduler", "CPU_SCHEDULER_FLAG"]

use_safe_cpu_scheduler()
