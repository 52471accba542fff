"""Multi-host training through jax.distributed: two processes on this machine (loopback
coordinator, Gloo CPU collectives, 2 CPU devices each) train one data-parallel PPO run over the
4-device mesh and finish with identical parameters, equal to a single-process run's."""

import os
import socket
import subprocess
import sys
import textwrap

import numpy as np

WORKER = textwrap.dedent(
    """
    import os, sys
    pid, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    import train, jax, numpy as np
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    from jaxenvs.parallel import initialize_distributed, env_mesh
    initialize_distributed(f"127.0.0.1:{port}", 2, pid)
    from jax.experimental import multihost_utils
    from train.configs import get_config
    from train.ppo import make_trainer
    assert (jax.process_count(), jax.device_count(), jax.local_device_count()) == (2, 4, 2)
    cfg = get_config("GridWorld-v0", num_envs=8, num_steps=8, total_timesteps=8 * 8 * 3)
    runner, _ = make_trainer(cfg, mesh=env_mesh()).train(jax.random.key(0))
    params = multihost_utils.process_allgather(runner.params, tiled=True)
    np.save(out, np.concatenate([np.asarray(x).ravel() for x in jax.tree.leaves(params)]))
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_train_identical_parameters(tmp_path):
    import jax

    import train  # noqa: F401
    from train.configs import get_config
    from train.ppo import make_trainer

    port = str(_free_port())
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    outs = [tmp_path / f"params_{i}.npy" for i in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(i), port, str(outs[i])],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(2)
    ]
    try:
        errs = [p.communicate(timeout=300)[1] for p in procs]
    finally:  # a worker left waiting for its peer (e.g. after a timeout) must not outlive the test
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, err in zip(procs, errs):
        assert p.returncode == 0, err[-3000:]
    a, b = (np.load(o) for o in outs)
    np.testing.assert_array_equal(a, b)  # one set of parameters across the processes

    cfg = get_config("GridWorld-v0", num_envs=8, num_steps=8, total_timesteps=8 * 8 * 3)
    runner, _ = make_trainer(cfg).train(jax.random.key(0))
    single = np.concatenate([np.asarray(x).ravel() for x in jax.tree.leaves(runner.params)])
    initial = make_trainer(cfg).init(jax.random.key(0)).params
    assert not np.allclose(single, np.concatenate([np.asarray(x).ravel() for x in jax.tree.leaves(initial)]))
    np.testing.assert_allclose(a, single, rtol=1e-4, atol=1e-5)  # the single-process run's updates
