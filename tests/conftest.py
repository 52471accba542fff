"""Test-session setup, run before any test module imports JAX.

jax/jaxlib 0.10.2's XLA:CPU concurrency-optimised scheduler can hang seed-vmapped training
programs forever (every thread idle); ``train/__init__.py`` turns it off for ``python -m train``,
and this does the same for every test process (xdist workers included), whatever imports first.
"""

import os

_XLA_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"
if _XLA_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" {_XLA_FLAG}=false").strip()


import pytest  # noqa: E402


@pytest.fixture
def rollout_without_retrace():
    """``run(env, num_steps, num_envs)``: a random-policy :func:`jaxenvs.rollout.rollout` (no
    recorded states) called twice with different keys; asserts the second call compiled nothing
    and returns the first trajectory."""
    import jax

    from jaxenvs.rollout import _rollout, random_policy, rollout

    def run(env, num_steps, num_envs):
        policy = random_policy(env)
        traj = rollout(env, jax.random.key(5), policy, num_steps, num_envs=num_envs, record_states=False)
        compiled = _rollout._cache_size()
        rollout(env, jax.random.key(6), policy, num_steps, num_envs=num_envs, record_states=False)
        assert _rollout._cache_size() == compiled  # no retrace
        return traj

    return run
