"""Multi-host training through jax.distributed: ``jaxenvs-train --distributed`` launched as two
processes on this machine (loopback coordinator, Gloo CPU collectives, 2 CPU devices each)
trains one data-parallel PPO run over the 4-device mesh. Both processes finish with identical
parameters, process 0 alone writes the run directory, and its checkpoint holds exactly those
parameters, equal (up to float summation order) to a single-process run's.

The two processes compile without XLA:CPU's backend optimisations (the programs are tiny, so
compiling dominates; what they compute is the same)."""

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--num-envs", "8", "--total-timesteps", "768", "--no-gif", "--checkpoint-every", "0"]  # 3 updates of 8 x 32


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("distributed")
    port = _free_port()
    procs = []
    for i in range(2):
        env = dict(
            os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2 --xla_backend_optimization_level=0",
            JAX_PLATFORMS="cpu",
            JAXENVS_COORDINATOR=f"127.0.0.1:{port}", JAXENVS_NUM_PROCESSES="2", JAXENVS_PROCESS_ID=str(i),
        )
        cmd = [sys.executable, "-m", "jaxenvs.train", "--distributed", "--out", str(out / f"process{i}"), *ARGS]
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        logs = [p.communicate(timeout=400)[0] for p in procs]
    finally:  # a process left waiting for its peer (e.g. after a timeout) must not outlive the test
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log[-3000:]
    return out, logs


def test_two_processes_finish_with_identical_parameters(two_process_run):
    out, logs = two_process_run
    assert "on 4 cpu devices of 2 processes" in logs[0]
    digests = [re.search(rf"process {i} of 2: parameters ([0-9a-f]{{16}})", log).group(1) for i, log in enumerate(logs)]
    assert digests[0] == digests[1]
    # process 0 speaks and writes for the run; process 1 prints only its digest line
    assert "evaluation:" in logs[0] and "steps/s" in logs[0]
    assert "evaluation:" not in logs[1] and "steps/s" not in logs[1]
    assert not (out / "process1").exists()
    (run_dir,) = (out / "process0").iterdir()
    assert {"checkpoint.msgpack", "config.json", "metrics.csv", "evaluation.json"} <= {p.name for p in run_dir.iterdir()}


def test_distributed_checkpoint_holds_the_single_process_run(two_process_run):
    import jax

    import jaxenvs.train  # noqa: F401
    from jaxenvs.train.checkpoint import load_run
    from jaxenvs.train.distributed import params_digest

    out, logs = two_process_run
    (run_dir,) = (out / "process0").iterdir()
    trainer, runner, meta = load_run(run_dir)  # a 4-device, 2-process checkpoint on one device
    assert meta["update"] == 3 and jax.device_count() >= 1
    digest = re.search(r"process 0 of 2: parameters ([0-9a-f]{16})", logs[0]).group(1)
    assert params_digest(runner.params) == digest  # exactly the parameters the processes hold

    keys = jax.random.split(jax.random.key(meta["run"].seed), 1)  # how the CLI seeds one run
    single, _ = jax.vmap(trainer.train)(keys)
    initial = jax.vmap(trainer.init)(keys)
    flat = lambda p: np.concatenate([np.asarray(x).ravel() for x in jax.tree.leaves(p)])  # noqa: E731
    assert not np.allclose(flat(single.params), flat(initial.params))  # training moved them
    np.testing.assert_allclose(flat(runner.params), flat(single.params), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(runner.update), [3])
