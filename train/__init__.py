"""Jitted training on jaxenvs environments (installed as ``jaxenvs.train``): PPO and TRPO, each
training chunk one call of one compiled program (all seeds vmapped).

    jaxenvs-train --env GridWorld-v0                              # train, write runs/<env>-<time>/
    jaxenvs evaluate ABSOLUTE_RUN_DIR             # reload the checkpoint and evaluate it
    policy = jaxenvs.train.load_policy(RUN_DIR)                   # its policy(key, obs) -> action (train.policy)

**XLA:CPU and the import order.** With jax/jaxlib 0.10.x on CPU, a seed-vmapped program that
runs LAPACK's QR beside other work can hang forever while XLA:CPU's concurrency-optimized
scheduler is on (`jaxenvs.train.xla` has the details). The trainer's programs contain no such call
(their orthogonal initialiser uses no QR), so importing this package changes no process-wide
setting and the import order does not matter. For programs of your own that vmap a QR (or other
LAPACK calls), `use_safe_cpu_scheduler()` turns the scheduler off through ``XLA_FLAGS``, before
JAX starts.
"""

from .xla import CPU_SCHEDULER_FLAG, use_safe_cpu_scheduler

__all__ = ["use_safe_cpu_scheduler", "CPU_SCHEDULER_FLAG", "load_policy"]


def __getattr__(name):
    # `load_policy` (train.policy) imports JAX and flax: loaded on first use, so importing the
    # package stays cheap
    if name == "load_policy":
        from .policy import load_policy  # lazy: importing the package stays cheap

        return load_policy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
