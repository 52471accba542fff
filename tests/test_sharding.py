"""Env batches sharded over devices give exactly the single-device results.

Runs in a subprocess: XLA exposes 4 CPU devices only when told before JAX starts. The programs
are tiny and compiling dominates, so XLA:CPU compiles them without its backend optimisations
(results are the same; only compile and run times change).
"""

import os
import subprocess
import sys
import textwrap

import pytest
from helpers import subprocess_env

import jaxenvs
from jaxenvs.sharding import env_mesh

XLA_FLAGS = "--xla_force_host_platform_device_count=4 --xla_backend_optimization_level=0"

SCRIPT = textwrap.dedent(
    """
    import jax, numpy as np, jaxenvs
    from jaxenvs.sharding import env_mesh
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
    from jaxenvs.sharding import constrain_batch
    try:
        jax.jit(lambda x: constrain_batch(x, env_mesh(4)))(jax.numpy.zeros(6))
        raise SystemExit("an uneven split was accepted")
    except ValueError as e:
        assert "does not split evenly" in str(e), e
    # python -m train's device choice: all 4, else the largest count dividing num_envs
    from jaxenvs.train.distributed import choose_mesh
    assert choose_mesh(32).devices.size == 4 and choose_mesh(6).devices.size == 3
    assert choose_mesh(5) is None and choose_mesh(32, devices=1) is None and choose_mesh(32, devices=2).devices.size == 2
    for kwargs, msg in [(dict(devices=4), "does not split evenly over 4"), (dict(devices=5), "4 device"),
                        (dict(devices=2, distributed=True), "leave out --devices"), (dict(distributed=True), "multiple of 4")]:
        try:
            choose_mesh(6, **kwargs)
            raise SystemExit(f"choose_mesh(6, {kwargs}) was accepted")
        except ValueError as e:
            assert msg in str(e), e
    print("identical")
    """
)


def test_sharded_rollout_equals_single_device():
    env = subprocess_env(XLA_FLAGS=XLA_FLAGS, JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "identical" in out.stdout


PPO_SCRIPT = textwrap.dedent(
    """
    import sys, pathlib, jax, numpy as np
    from jaxenvs.train.configs import RunSettings, get_config
    from jaxenvs.train.trainers import make_trainer
    from jaxenvs.train.checkpoint import save_checkpoint, load_checkpoint
    from jaxenvs.train.distributed import place_runner
    from jaxenvs.sharding import env_mesh, to_host
    tmp = pathlib.Path(sys.argv[1])
    assert jax.device_count() == 4

    def close(a, b):
        raw = lambda x: jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x
        leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
        assert len(leaves_a) == len(leaves_b)
        for x, y in zip(leaves_a, leaves_b):
            np.testing.assert_allclose(np.asarray(raw(x)), np.asarray(raw(y)), rtol=1e-4, atol=1e-5)

    # one compiled program per device count and env: two seeds, two updates per call; the 4-device
    # program always gets its input laid out as python -m train lays it (place_runner)
    for env_id in ("GridWorld-v0", "HurdleRace-v0"):
        cfg, settings = get_config(env_id, num_envs=8, num_steps=8, total_timesteps=8 * 8 * 4), RunSettings(num_seeds=2)
        t1, t4 = make_trainer(cfg), make_trainer(cfg, mesh=env_mesh(4))
        two_updates = lambda t: jax.jit(jax.vmap(lambda r: t.run_updates(r, num_updates=2)[0]))
        run1, run4_placed = two_updates(t1), two_updates(t4)
        run4 = lambda r: run4_placed(place_runner(r, t4.mesh))
        start = jax.vmap(t1.init)(jax.random.split(jax.random.key(5), settings.num_seeds))

        # data parallel: the env batch over 4 devices gives the 1-device updates (summation order aside)
        one, four = run1(start), run4(start)
        assert len(jax.tree.leaves(four.env_state)[0].sharding.device_set) == 4
        assert not any(np.allclose(a, b) for a, b in zip(jax.tree.leaves(one.params), jax.tree.leaves(start.params)))
        close(one, four)                                                # params, optimiser, env states, keys
        if env_id != "GridWorld-v0":
            continue

        # checkpoints cross device counts: 4 -> 1 and 1 -> 4 continue as the uninterrupted run
        reference = run4(four)
        _, r1, meta = load_checkpoint(save_checkpoint(tmp / "four.msgpack", cfg, four, settings), t1)
        assert meta["update"] == 2
        close(run1(r1), reference)                                      # saved on 4, resumed on 1
        _, r4, _ = load_checkpoint(save_checkpoint(tmp / "one.msgpack", cfg, r1, settings), t4)
        # python -m train's layout: env states split along the env axis (axis 1), the rest replicated
        placed = place_runner(r4, t4.mesh)
        env_leaf = jax.tree.leaves(placed.env_state)[0]
        assert env_leaf.sharding.spec[1] == "envs" and env_leaf.addressable_shards[0].data.shape[1] == 2
        assert all(x.sharding.is_fully_replicated for x in jax.tree.leaves(placed.params))
        for x, y in zip(jax.tree.leaves(to_host(r4)), jax.tree.leaves(to_host(placed))):
            np.testing.assert_array_equal(x, y)                         # placing moves, never changes
        close(run4(r4), reference)                                      # saved on 1, resumed on 4
    print("data parallel ok")
    """
)


def test_data_parallel_ppo_and_checkpoints_across_device_counts(tmp_path):
    env = subprocess_env(XLA_FLAGS=XLA_FLAGS, JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-c", PPO_SCRIPT, str(tmp_path)], capture_output=True, text=True, env=env, timeout=400
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "data parallel ok" in out.stdout


def test_env_mesh_errors():
    import jax

    with pytest.raises(ValueError, match="xla_force_host_platform_device_count"):
        env_mesh(jax.device_count() + 1)
    mesh = env_mesh(1)
    assert mesh.devices.size == 1 and mesh.axis_names == ("envs",)
    with pytest.raises(ValueError, match="num_envs"):
        jaxenvs.rollout.rollout(jaxenvs.make("GridWorld-v0"), jax.random.key(0), lambda k, o: 0, 3, mesh=mesh)
