"""``python -m train`` and ``python -m train.evaluate`` through subprocesses, with tiny budgets."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from jaxenvs.train.__main__ import chunk_length

ROOT = Path(__file__).resolve().parents[1]


def run(*args, timeout=240):
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    # 2 seeds x 8 envs x 32 steps: 4 updates of 256 env steps, in 2 chunks
    p = run("jaxenvs.train", "--total-timesteps", "1024", "--num-envs", "8", "--seeds", "2", "--chunks", "2", "--out", str(out))
    assert p.returncode == 0, p.stderr
    (run_dir,) = out.iterdir()
    return run_dir, p.stdout


def test_cli_writes_the_run_directory(run_dir):
    run_dir, stdout = run_dir
    assert run_dir.name.startswith("GridWorld-v0-")  # the default environment
    config = json.loads((run_dir / "config.json").read_text())
    assert config["env_id"] == "GridWorld-v0" and config["num_seeds"] == 2 and config["num_envs"] == 8
    with open(run_dir / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["env_steps"]) for r in rows] == [256, 512, 768, 1024]
    assert {"episode_return_mean", "episode_return_std", "pg_loss_mean", "entropy_mean"} <= set(rows[0])
    per_seed = json.loads((run_dir / "metrics.json").read_text())["per_seed"]
    assert len(per_seed["entropy"]) == 4 and len(per_seed["entropy"][0]) == 2
    assert (run_dir / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (run_dir / "policy.gif").read_bytes()[:6] in (b"GIF89a", b"GIF87a")
    assert (run_dir / "checkpoint.msgpack").stat().st_size > 0
    for name in ("learning_curve.png", "policy.gif", "checkpoint.msgpack"):
        assert str(run_dir / name) in stdout
    assert "steps 1,024/1,024 x2 seeds" in stdout and "steps/s" in stdout and "ETA" in stdout


def test_evaluate_reads_the_run_and_resume_continues_it(run_dir):
    run_dir, _ = run_dir
    p = run("jaxenvs.train.evaluate", str(run_dir))
    assert p.returncode in (0, 1), p.stderr  # 1 = evaluated but not solved on this tiny budget
    result = json.loads(p.stdout)
    assert result["env_id"] == "GridWorld-v0" and len(result["seeds"]) == 2
    assert {"success_rate", "length_ratio", "solved"} <= set(result["seeds"][0])
    assert result["seeds"][0] == json.loads((run_dir / "evaluation.json").read_text())["seeds"][0]

    p = run("jaxenvs.train", "--resume", str(run_dir), "--total-timesteps", "1536", "--no-gif")
    assert p.returncode == 0, p.stderr
    assert "resuming" in p.stdout and "at update 4" in p.stdout
    with open(run_dir / "metrics.csv") as f:
        assert [int(r["env_steps"]) for r in csv.DictReader(f)] == [256 * i for i in range(1, 7)]
    assert json.loads((run_dir / "config.json").read_text())["total_timesteps"] == 1536


def test_cli_rejects_bad_input_clearly(tmp_path):
    p = run("jaxenvs.train", "--env", "GridWorld-v9", "--out", str(tmp_path))
    assert p.returncode != 0 and "GridWorld-v0" in p.stderr  # suggests the registered id
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"lr": 1e-3, "num_env": 4}))
    p = run("jaxenvs.train", "--config", str(bad), "--out", str(tmp_path))
    assert p.returncode != 0 and "num_env" in p.stderr and "num_envs" in p.stderr


def test_chunks_divide_the_updates_evenly():
    assert chunk_length(200, 20) == 10
    assert chunk_length(196, 20) == 7  # 28 chunks of 7: the largest divisor <= ceil(196 / 20)
    assert chunk_length(197, 20) == 1  # a prime number of updates: chunks of one update
    assert chunk_length(3, 20) == 1
