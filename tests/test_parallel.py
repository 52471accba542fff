"""Env batches sharded over devices give exactly the single-device results.

Runs in a subprocess: XLA exposes 4 CPU devices only when told before JAX starts.
"""

import os
import subprocess
import sys
import textwrap

import pytest

import jaxenvs
from jaxenvs.parallel import env_mesh

SCRIPT = textwrap.dedent(
    """
    import jax, numpy as np, jaxenvs
    from jaxenvs.parallel import env_mesh
    from jaxenvs.rollout import rollout, random_policy
    assert jax.device_count() == 4, jax.devices()
    for env_id in ("GridWorld-v0", "HurdleRace-v0"):
        env = jaxenvs.make(env_id, max_episode_steps=7)
        policy = random_policy(env)
        one = rollout(env, jax.random.key(3), policy, 40, num_envs=8)
        four = rollout(env, jax.random.key(3), policy, 40, num_envs=8, mesh=env_mesh(4))
        assert len(four.reward.sharding.device_set) == 4, four.reward.sharding
        assert len(one.reward.sharding.device_set) == 1
        for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(four)):
            if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
                a, b = jax.random.key_data(a), jax.random.key_data(b)
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert int((one.terminated | one.truncated).sum()) >= 8  # episodes end (7-step limit)
    from jaxenvs.parallel import constrain_batch
    try:
        jax.jit(lambda x: constrain_batch(x, env_mesh(4)))(jax.numpy.zeros(6))
        raise SystemExit("an uneven split was accepted")
    except ValueError as e:
        assert "does not split evenly" in str(e), e
    print("identical")
    """
)


def test_sharded_rollout_equals_single_device():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "identical" in out.stdout


def test_env_mesh_errors():
    import jax

    with pytest.raises(ValueError, match="xla_force_host_platform_device_count"):
        env_mesh(jax.device_count() + 1)
    mesh = env_mesh(1)
    assert mesh.devices.size == 1 and mesh.axis_names == ("envs",)
    with pytest.raises(ValueError, match="num_envs"):
        jaxenvs.rollout.rollout(jaxenvs.make("GridWorld-v0"), jax.random.key(0), lambda k, o: 0, 3, mesh=mesh)
