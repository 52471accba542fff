"""Jitted training on jaxenvs environments: PPO (``train.ppo``), one compiled program per run.

    python -m train --env GridWorld-v0        # train, write runs/<env>-<time>/
    python -m train.evaluate runs/...          # reload the checkpoint and evaluate it

Importing this package turns off XLA:CPU's concurrency-optimized scheduler (by appending
``--xla_cpu_enable_concurrency_optimized_scheduler=false`` to ``XLA_FLAGS`` unless that flag is
already set): with jax/jaxlib 0.10.2 on CPU, seed-vmapped training programs intermittently hang
forever inside the XLA runtime (every thread idle, reproducible with HurdleRace and 3 seeds) with
the scheduler on, and never did with it off. XLA reads the flag when it compiles its first
program, so import ``train`` before running any JAX computation for it to take effect.
"""

import os

_XLA_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"
if _XLA_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" {_XLA_FLAG}=false").strip()
