"""Test-session setup, run before any test module imports JAX.

jax/jaxlib 0.10.2's XLA:CPU concurrency-optimised scheduler can hang seed-vmapped training
programs forever (every thread idle); ``train/__init__.py`` turns it off for ``python -m train``,
and this does the same for every test process (xdist workers included), whatever imports first.
"""

import os

_XLA_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"
if _XLA_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" {_XLA_FLAG}=false").strip()
