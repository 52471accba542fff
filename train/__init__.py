"""Jitted training on jaxenvs environments (installed as ``jaxenvs.train``): PPO and TRPO, each
training chunk one call of one compiled program (all seeds vmapped).

    jaxenvs-train --env GridWorld-v0                              # train, write runs/<env>-<time>/
    python -m jaxenvs.train.evaluate ABSOLUTE_RUN_DIR             # reload the checkpoint and evaluate it

**XLA:CPU scheduler.** With jax/jaxlib 0.10.2 on CPU, seed-vmapped training programs
intermittently hang forever inside the XLA runtime (every thread idle; HurdleRace, 3 seeds, 60k
steps hung in 3 of 3 runs) while XLA:CPU's concurrency-optimized scheduler is on, and never did
with it off. Every program the trainer compiles (training chunks, initialisation, evaluation)
therefore carries ``xla_cpu_enable_concurrency_optimized_scheduler=False`` as a compiler option of
its own (`jaxenvs.train.xla.jit`), so the import order does not matter: JAX may have run long
before ``jaxenvs.train`` is imported, and ``XLA_FLAGS`` is left as it is. Importing the package
changes no process-wide setting.

What is known about which programs hang (jax 0.10.2): the reported hang needs XLA:CPU with the
scheduler on and a large seed-vmapped program (a scan of whole training updates over 3 seeds:
rollout, GAE, minibatch epochs); it is intermittent and load-dependent. On the project's 2-core
test machine, 5 of 5 runs of that very case with the old behaviour (JAX started first, so the
scheduler stayed on) finished (87-131 s under load), so no smaller hanging program could be
isolated; ``tests/test_train_cli.py`` keeps the reported case as a regression test. Your own
jitted, vmapped loops over jaxenvs environments (`jaxenvs.rollout.rollout`, `jaxenvs.VectorEnv`
inside ``lax.scan``) use the same XLA:CPU runtime and may meet the same bug, though none was seen
to; to rule it out, compile them with the option,
``jax.jit(f, compiler_options=jaxenvs.train.xla.COMPILER_OPTIONS)`` (on the outermost ``jit``
only: JAX refuses it on a nested one), or call `use_safe_cpu_scheduler` before JAX starts, which
sets the flag for every program of the process.
"""

import os
import warnings

__all__ = ["use_safe_cpu_scheduler", "CPU_SCHEDULER_FLAG"]

CPU_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"


def use_safe_cpu_scheduler() -> bool:
    """Turn XLA:CPU's concurrency-optimized scheduler off for every program of this process
    through ``XLA_FLAGS`` (unless the flag is already set there), for programs of your own.

    Not needed for the trainer's programs, which carry the option themselves (see the module
    docstring); kept for scripts that called it. ``XLA_FLAGS`` is read once, when JAX starts its
    first backend: this warns when that has already happened. Returns whether ``XLA_FLAGS``
    was changed."""
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
            f"JAX started before jaxenvs.train.use_safe_cpu_scheduler() was called, so {CPU_SCHEDULER_FLAG}=false does not "
            "apply to this process's own programs (the trainer's programs set it themselves).",
            RuntimeWarning,
            stacklevel=2,
        )
    return True
