"""Run directories and checkpoints of ``jaxenvs-train``: resume on every environment, Ctrl-C,
non-finite training, corrupt or mismatched files, atomic writes, colliding names.

Runs are tiny (2 envs x 4 steps per update, one 8-unit layer) and in-process; they use the
session's compilation cache (tests/conftest.py).
"""

import json
import os
import shutil
import time

import jax
import numpy as np
import pytest
from flax import serialization

import jaxenvs
from jaxenvs.train import __main__ as cli
from jaxenvs.train.app import chunks as chunks_module
from jaxenvs.train.app import run as run_module
from jaxenvs.train.checkpoint import CheckpointError, atomic_write, check_run_dir, load_run
from jaxenvs.train.configs import RunSettings
from jaxenvs.cli import main as jaxenvs_main

TINY = ["--num-envs", "2", "--num-steps", "4", "--num-minibatches", "1", "--update-epochs", "1", "--hidden-sizes", "8",
        "--chunks", "1", "--no-gif", "--no-eval"]


def tiny(**replace) -> list[str]:
    """`TINY` with some of its flags' values replaced (``chunks="2"``): a flag is given once."""
    out = list(TINY)
    for name, value in replace.items():
        out[out.index("--" + name.replace("_", "-")) + 1] = value
    return out
STEPS = 8  # env steps per update


def train(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def only_run(out):
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


def files(run_dir):
    return {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("grid")
    assert cli.main(["--total-timesteps", str(STEPS), *TINY, "--out", str(out)]) == 0
    return only_run(out)


def test_resume_continues_a_point_env_run_and_a_finished_run_is_left_alone(tmp_path, capsys):
    code, _, err = train(capsys, "--env", "PointEnv-v0", "--total-timesteps", str(STEPS), *TINY, "--out", str(tmp_path))
    assert code == 0, err
    run_dir = only_run(tmp_path)
    # no episode ends in 4 steps: metrics.json stores null, which resume reads back
    assert json.loads((run_dir / "metrics.json").read_text())["per_seed"]["episode_return"] == [[None]]
    code, out, err = train(capsys, "--resume", str(run_dir), "--total-timesteps", str(2 * STEPS))
    assert code == 0, err
    assert "at update 1" in out
    stored = json.loads((run_dir / "metrics.json").read_text())
    assert stored["env_steps"] == [STEPS, 2 * STEPS] and stored["per_seed"]["episode_return"] == [[None], [None]]
    assert len(stored["per_seed"]["pg_loss"]) == 2
    _, _, meta = load_run(run_dir)
    assert meta["update"] == 2 and json.loads((run_dir / "config.json").read_text())["total_timesteps"] == 2 * STEPS

    before = files(run_dir)
    code, out, _ = train(capsys, "--resume", str(run_dir), "--no-eval", "--no-gif")  # the outputs it was run with
    assert code == 0 and "is complete" in out and "nothing to do" in out
    assert files(run_dir) == before  # nothing rewritten


class _NoBackgroundCompile:
    """Stands in for the `Background` job of `train.app.chunks` (the training program's compile) where a
    run is stopped before its training program is needed: nothing compiles (a real compile would go
    on in a thread after the test, in the way of the next ones). The initial state's program still
    compiles in its own background job (`train.app.run`): the run needs it."""

    def __init__(self, fn, name=""):
        del fn, name

    @staticmethod
    def any_running():
        return False


@pytest.mark.parametrize("env_id", sorted(jaxenvs.registry))
def test_ctrl_c_during_compilation_leaves_a_run_resume_can_use(env_id, tmp_path, capsys, monkeypatch):
    def interrupt(self, plan):
        raise KeyboardInterrupt

    saved = []
    real_save = run_module.Run.save

    def save(self):
        saved.append(self.runner)
        return real_save(self)

    monkeypatch.setattr(run_module.Run, "compile_chunks", interrupt)
    monkeypatch.setattr(run_module.Run, "_lower_chunk_program", lambda self, plan, template: None)
    monkeypatch.setattr(chunks_module, "Background", _NoBackgroundCompile)  # the training program's job
    monkeypatch.setattr(run_module.Run, "save", save)
    code, out, _ = train(capsys, "--env", env_id, "--total-timesteps", str(STEPS), *TINY, "--out", str(tmp_path))
    assert code == 130 and "--resume" in out
    run_dir = only_run(tmp_path)
    trainer, runner, meta = load_run(run_dir)  # every env's state round-trips through the checkpoint
    assert meta["update"] == 0 and trainer.config.env_id == env_id
    assert len(saved) == 2  # the run directory's first checkpoint, and again at the interrupt
    key_data = lambda a: jax.random.key_data(a) if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key) else a  # noqa: E731
    started, loaded = jax.tree.leaves(saved[-1]), jax.tree.leaves(runner)
    assert len(started) == len(loaded) > 0
    for a, b in zip(started, loaded):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(np.asarray(key_data(a)), np.asarray(key_data(b)))
    if env_id == "GridWorld-v0":  # and resume trains it to the end (the program grid_run compiled)
        monkeypatch.undo()
        code, out, err = train(capsys, "--resume", str(run_dir))
        assert code == 0, err
        assert load_run(run_dir)[2]["update"] == 1


def test_nonfinite_training_stops_with_exit_1_and_keeps_the_last_good_checkpoint(tmp_path, capsys):
    # one Adam step of size 1e38 per update: update 1 is computed from finite params, update 2 is not
    code, _, err = train(capsys, "--total-timesteps", str(2 * STEPS), *tiny(chunks="2"), "--lr", "1e38",
                         "--out", str(tmp_path))
    assert code == 1 and "training diverged" in err and "update 2" in err and "Traceback" not in err
    run_dir = only_run(tmp_path)
    _, runner, meta = load_run(run_dir)
    assert meta["update"] == 1  # the state before the poisoned chunk
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(runner.params))
    assert len(json.loads((run_dir / "metrics.json").read_text())["env_steps"]) == 1


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda b: b"", "is empty"),
        (lambda b: b[: len(b) // 2], "truncated or corrupt"),
        (lambda b: np.random.default_rng(0).bytes(len(b)), "not"),
        (lambda b: serialization.msgpack_serialize({"weights": np.zeros(3)}), "not a jaxenvs checkpoint"),
    ],
)
def test_a_damaged_checkpoint_is_reported_with_its_path(grid_run, tmp_path, capsys, damage, words):
    run_dir = tmp_path / "run"
    shutil.copytree(grid_run, run_dir)
    ckpt = run_dir / "checkpoint.msgpack"
    ckpt.write_bytes(damage(ckpt.read_bytes()))
    with pytest.raises(CheckpointError, match=words) as e:
        load_run(run_dir)
    assert str(ckpt) in str(e.value)
    assert jaxenvs_main(["evaluate", str(run_dir)]) == 2 and str(ckpt) in capsys.readouterr().err
    code, _, err = train(capsys, "--resume", str(run_dir))
    assert code == 2 and str(ckpt) in err and "Traceback" not in err


def test_a_config_that_disagrees_with_the_checkpoint_is_reported(grid_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(grid_run, run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    (run_dir / "config.json").write_text(json.dumps({**config, "num_envs": 4, "hidden_sizes": [16]}))
    with pytest.raises(CheckpointError, match="disagrees with .*checkpoint.msgpack.*hidden_sizes.*num_envs: config.json has 4"):
        load_run(run_dir)
    (run_dir / "config.json").write_text(json.dumps({**config, "total_timesteps": 99}))
    assert load_run(run_dir)[0].config.total_timesteps == 99  # a change --resume makes
    # the run settings are compared too: the seeds may not change, the chunks may
    (run_dir / "config.json").write_text(json.dumps({**config, "run": {**config["run"], "seed": 1, "num_seeds": 3}}))
    with pytest.raises(CheckpointError, match=r"\(run\.num_seeds: config.json has 3, the checkpoint 1; run\.seed: config.json "
                       r"has 1, the checkpoint 0\); only total_timesteps, run\.num_chunks may differ"):
        load_run(run_dir)
    (run_dir / "config.json").write_text(json.dumps({**config, "run": {**config["run"], "num_chunks": 5}}))
    assert load_run(run_dir)[2]["run"] == RunSettings(num_chunks=5)
    assert load_run(run_dir, num_chunks=7)[2]["run"].num_chunks == 7  # --resume --chunks 7


def test_evaluate_on_a_directory_that_is_not_a_run_exits_2(tmp_path, capsys):
    for argv, words in [
        ([str(tmp_path)], "not a run directory"),
        ([str(tmp_path / "nope")], "does not exist"),
        ([str(tmp_path), "--seed", str(10**23)], "--seed"),
    ]:
        assert jaxenvs_main(["evaluate", *argv]) == 2 and words in capsys.readouterr().err
    with pytest.raises(CheckpointError, match="no config.json and no checkpoint.msgpack"):
        check_run_dir(tmp_path)


def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path, monkeypatch):
    monkeypatch.setattr(run_module, "_run_stamp", lambda: "20250101-120000")
    dirs = [run_module.make_run_dir(tmp_path, "GridWorld-v0") for _ in range(3)]
    assert [d.name for d in dirs] == ["GridWorld-v0-20250101-120000", "GridWorld-v0-20250101-120000-2",
                                      "GridWorld-v0-20250101-120000-3"]
    assert all(d.is_dir() for d in dirs)


def test_atomic_write_leaves_the_old_file_whole_when_writing_fails(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_write(path) as tmp:
            tmp.write_text("half")
            raise RuntimeError("disk full")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["metrics.json"]
    with atomic_write(path) as tmp:
        tmp.write_text("new")
    assert path.read_text() == "new"


def test_unequal_chunks_share_one_program_and_train_as_equal_chunks_do(tmp_path, capsys):
    params = []
    # 3 updates as chunks of 2 and 1 (one program whose scan skips its last step in the second
    # call), or as 3 chunks of 1 (the program the other tests here compiled)
    for chunks, lengths in (("2", "2 or 1"), ("3", "1")):
        out = tmp_path / chunks
        code, stdout, err = train(capsys, "--total-timesteps", str(3 * STEPS), *tiny(chunks=chunks), "--out", str(out))
        assert code == 0, err
        compiled = [line for line in stdout.splitlines() if line.startswith("compiling") and "done in" in line]
        assert len(compiled) == 1 and f"chunks of {lengths} update(s)" in compiled[0]
        assert f"chunk {chunks}/{chunks}" in stdout and json.loads((only_run(out) / "config.json").read_text())["run"]["num_chunks"] == int(chunks)
        run_dir = only_run(out)
        assert json.loads((run_dir / "metrics.json").read_text())["env_steps"] == [STEPS, 2 * STEPS, 3 * STEPS]
        _, runner, meta = load_run(run_dir)
        assert meta["update"] == 3
        params.append(runner.params)
    for a, b in zip(jax.tree.leaves(params[0]), jax.tree.leaves(params[1])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


# ---- signals, storage, outputs and settings (issue 31) ---------------------------------------


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_save_a_checkpoint_like_ctrl_c(signame, tmp_path, capsys, monkeypatch):
    import signal

    def stop(self, plan):
        os.kill(os.getpid(), getattr(signal, signame))  # what kill, timeout, docker stop or SLURM send
        raise AssertionError("the signal did not stop the run")

    monkeypatch.setattr(run_module.Run, "compile_chunks", stop)
    monkeypatch.setattr(run_module.Run, "_lower_chunk_program", lambda self, plan, template: None)
    monkeypatch.setattr(chunks_module, "Background", _NoBackgroundCompile)  # the training program's job
    before = signal.getsignal(getattr(signal, signame))
    code, out, _ = train(capsys, "--total-timesteps", str(STEPS), *TINY, "--out", str(tmp_path))
    assert code == 130 and f"interrupted by {signame}: checkpoint saved" in out and "--resume" in out
    assert load_run(only_run(tmp_path))[2]["update"] == 0
    assert signal.getsignal(getattr(signal, signame)) == before  # the previous handler is put back


def test_resume_into_an_unwritable_run_directory_fails_before_training_with_exit_3(grid_run, tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(grid_run, run_dir)
    (run_dir / f".write-probe.{os.getpid()}").mkdir()  # the probe file cannot be created (as in a read-only dir)
    before = files(run_dir)
    code, out, err = train(capsys, "--resume", str(run_dir), "--total-timesteps", str(3 * STEPS))
    assert code == 3 and "cannot write into the run directory" in err and "nothing was trained" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "compiling" not in out and files(run_dir) == before


def test_a_full_disk_is_refused_before_training(grid_run, tmp_path, capsys, monkeypatch):
    import collections

    run_dir = tmp_path / "run"
    shutil.copytree(grid_run, run_dir)
    monkeypatch.setattr(run_module.shutil, "disk_usage", lambda p: collections.namedtuple("u", "total used free")(1, 1, 10))
    code, _, err = train(capsys, "--resume", str(run_dir), "--total-timesteps", str(3 * STEPS))
    assert code == 3 and "bytes free" in err and "checkpoint needs" in err


def test_exit_statuses_are_documented():
    from jaxenvs.train.app.exits import EXIT_STATUSES
    from jaxenvs.train.app.parser import build_parser

    assert "3 the run directory could not be written" in build_parser().epilog
    assert "1 training diverged" in EXIT_STATUSES and "130 interrupted" in EXIT_STATUSES


def test_evaluation_json_comes_before_the_plot_and_resume_writes_what_is_missing(tmp_path, capsys, monkeypatch):
    from jaxenvs.train.app import plotting

    def killed(*a, **k):
        raise KeyboardInterrupt  # a kill while the curve is drawn

    monkeypatch.setattr(plotting, "plot_learning_curve", killed)
    tiny_eval = [a for a in TINY if a != "--no-eval"]
    code, _, _ = train(capsys, "--total-timesteps", str(STEPS), *tiny_eval, "--out", str(tmp_path))
    assert code == 130
    run_dir = only_run(tmp_path)
    assert (run_dir / "evaluation.json").exists() and not (run_dir / "learning_curve.png").exists()
    monkeypatch.undo()
    code, out, err = train(capsys, "--resume", str(run_dir), "--no-gif")
    assert code == 0, err
    assert "learning_curve.png" in out and "missing or older than its checkpoint" in out
    assert (run_dir / "learning_curve.png").exists()
    code, out, _ = train(capsys, "--resume", str(run_dir), "--no-gif")
    assert code == 0 and "is complete" in out


class Killed(BaseException):
    """A kill the command cannot catch (SIGKILL): no checkpoint saved, nothing printed."""


def _kill(*args, **kwargs):
    raise Killed


@pytest.mark.parametrize("point", ["gif", "record"])
def test_a_kill_between_outputs_is_finished_by_resume(point, grid_run, tmp_path, capsys, monkeypatch):
    """Killed while the GIF is written (the learning curve finished meanwhile, as the helper process
    finishes it after the command dies) or after the last output, before the record of them:
    ``--resume`` does not call the run complete, and writes every output."""
    from jaxenvs.train.app import outputs, plotting

    run_dir = tmp_path / "run"
    shutil.copytree(grid_run, run_dir)
    for name in ("learning_curve.png", "outputs.json"):  # as left by a kill just after training's last checkpoint
        (run_dir / name).unlink()
    if point == "gif":
        def killed_in_the_gif(*args, **kwargs):
            deadline = time.monotonic() + 120
            while not (run_dir / "learning_curve.png").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            raise Killed

        monkeypatch.setattr(plotting, "policy_gif", killed_in_the_gif)
    else:
        monkeypatch.setattr(outputs.RunOutputs, "record_outputs", _kill)
    with pytest.raises(Killed):
        cli.main(["--resume", str(run_dir)])
    monkeypatch.undo()
    left = {p.name for p in run_dir.iterdir()}
    assert {"evaluation.json", "learning_curve.png"} <= left and "outputs.json" not in left
    assert ("policy.gif" in left) == (point == "record")
    code, out, err = train(capsys, "--resume", str(run_dir))
    assert code == 0, err
    said = "policy.gif is missing" if point == "gif" else "outputs.json is missing"
    assert f"trained to the end (8 env steps) but {said} or older than its checkpoint; writing the outputs" in out
    assert json.loads((run_dir / "outputs.json").read_text()) == {
        "update": 1, "outputs": ["evaluation.json", "learning_curve.png", "policy.gif"]}
    assert all((run_dir / name).stat().st_size > 0 for name in ("evaluation.json", "learning_curve.png", "policy.gif"))
    code, out, _ = train(capsys, "--resume", str(run_dir))
    assert code == 0 and "is complete" in out


def test_a_missing_matplotlib_and_gif_writer_are_named_and_the_other_outputs_kept(grid_run, tmp_path, capsys, monkeypatch):
    """Without matplotlib (the learning curve) and imageio (the GIF) the run still writes its
    evaluation and metrics, names each missing package and the extra that installs it, exits 2
    without blaming --env, and is not complete: once they are back, --resume writes both."""
    import sys

    run_dir = tmp_path / "run"
    shutil.copytree(grid_run, run_dir)
    for name in ("learning_curve.png", "outputs.json"):
        (run_dir / name).unlink()
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ModuleNotFoundError
    monkeypatch.setitem(sys.modules, "imageio.v3", None)
    code, out, err = train(capsys, "--resume", str(run_dir))
    assert code == 2 and "--env" not in err and "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("jaxenvs-train: error: ")]
    assert "drawing learning_curve.png needs 'matplotlib', which is not installed: pip install \"jaxenvs[train]\"" in line
    assert "writing policy.gif: saving a GIF needs 'imageio.v3', which is not installed: pip install \"jaxenvs[render]\"" in line
    assert "Every other output is written" in line and f"--resume {run_dir.resolve()}" in line
    assert "learning curve: (not written: drawing learning_curve.png needs 'matplotlib'" in out
    assert "policy GIF:     (not written: writing policy.gif: saving a GIF needs 'imageio.v3'" in out
    assert "success_rate" in out  # the evaluation's table
    left = {p.name for p in run_dir.iterdir()}
    assert {"evaluation.json", "metrics.json", "metrics.csv", "checkpoint.msgpack"} <= left
    assert not {"learning_curve.png", "policy.gif", "outputs.json"} & left
    monkeypatch.undo()
    code, out, err = train(capsys, "--resume", str(run_dir), "--no-eval")
    assert code == 0, err
    assert {"learning_curve.png", "policy.gif", "outputs.json"} <= {p.name for p in run_dir.iterdir()}


def test_a_deleted_metrics_json_is_rebuilt_with_its_updates_marked_not_relabelled(grid_run, tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(grid_run, run_dir)
    (run_dir / "metrics.json").unlink()
    code, out, err = train(capsys, "--resume", str(run_dir), "--total-timesteps", str(2 * STEPS))
    assert code == 0, err
    assert f"{run_dir / 'metrics.json'} was missing" in out
    stored = json.loads((run_dir / "metrics.json").read_text())
    assert stored["env_steps"] == [STEPS, 2 * STEPS]  # update 2 stays at env step 16
    assert stored["per_seed"]["pg_loss"][0] == [None] and stored["per_seed"]["pg_loss"][1][0] is not None


@pytest.mark.parametrize("deleted", [("metrics.csv",), ("metrics.json", "metrics.csv")])
def test_resuming_a_finished_run_rewrites_deleted_metrics(deleted, grid_run, tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(grid_run, run_dir)
    csv_before = (run_dir / "metrics.csv").read_text()
    for name in deleted:
        (run_dir / name).unlink()
    code, out, err = train(capsys, "--resume", str(run_dir), "--no-gif", "--no-eval")
    assert code == 0, err
    assert f"{', '.join(deleted)} {'is' if len(deleted) == 1 else 'are'} missing or older than its checkpoint; writing the outputs" in out
    csv_after = (run_dir / "metrics.csv").read_text()
    if deleted == ("metrics.csv",):  # rebuilt from metrics.json: the same file
        assert csv_after == csv_before
    else:  # nothing left to rebuild the values from: the update is there, its values empty
        header, row = csv_after.splitlines()
        # the columns of the metrics every trainer reports (a trainer's own extras come back with its next update)
        assert "episode_return_mean" in header and set(header.split(",")) <= set(csv_before.splitlines()[0].split(","))
        assert row.startswith(f"1,{STEPS},") and set(row.split(",")[2:]) == {""}
        assert json.loads((run_dir / "metrics.json").read_text())["env_steps"] == [STEPS]
    code, out, _ = train(capsys, "--resume", str(run_dir), "--no-gif", "--no-eval")
    assert code == 0 and "is complete" in out


def test_a_damaged_metrics_json_is_refused_naming_the_file(grid_run, tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(grid_run, run_dir)
    text = (run_dir / "metrics.json").read_text()
    (run_dir / "metrics.json").write_text(text[: len(text) // 2])
    code, _, err = train(capsys, "--resume", str(run_dir), "--total-timesteps", str(2 * STEPS))
    assert code == 2 and f"{run_dir / 'metrics.json'} is damaged" in err and "Traceback" not in err


@pytest.mark.parametrize("setting, value, words", [("x64", True, "JAX_ENABLE_X64=1"), ("prng_impl", "rbg", "JAX_DEFAULT_PRNG_IMPL=rbg")])
def test_resume_refuses_other_jax_settings_naming_them(setting, value, words, grid_run, tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(grid_run, run_dir)
    path = run_dir / "checkpoint.msgpack"
    payload = serialization.msgpack_restore(path.read_bytes())
    assert payload["jax"] == {"x64": False, "prng_impl": "threefry2x32"}  # recorded by the run
    payload["jax"] = {**payload["jax"], setting: value}
    path.write_bytes(serialization.msgpack_serialize(payload))
    code, _, err = train(capsys, "--resume", str(run_dir), "--total-timesteps", str(2 * STEPS))
    assert code == 2 and words in err and "Traceback" not in err


def test_training_runs_under_jax_debug_nans(tmp_path, capsys):
    # PointEnv: no episode ends in a 4-step rollout, where the metrics once used NaN as "no value"
    jax.config.update("jax_debug_nans", True)
    try:
        code, _, err = train(capsys, "--env", "PointEnv-v0", "--total-timesteps", str(STEPS), *TINY, "--out", str(tmp_path))
    finally:
        jax.config.update("jax_debug_nans", False)
    assert code == 0, err
    stored = json.loads((only_run(tmp_path) / "metrics.json").read_text())
    assert stored["per_seed"]["episode_return"] == [[None]] and stored["per_seed"]["episodes"] == [[0.0]]


def test_a_real_ctrl_c_during_the_background_compile_exits_130_not_an_abort(tmp_path):
    """The command in its own process, Ctrl-C (SIGINT) while the training program still compiles in
    its background thread (a cold cache; Tic-Tac-Toe's program, with its per-update games, compiles
    for many seconds): the checkpoint is saved and the process exits 130, where interpreter
    shutdown under the compiling thread used to abort it (``FATAL: exception not rethrown``, 134)."""
    import signal
    import subprocess
    import sys

    env = dict(os.environ, JAXENVS_CACHE_DIR=str(tmp_path / "empty-cache"), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jaxenvs.train", "--env", "TicTacToe-v0", "--total-timesteps", "4096",
         "--num-envs", "8", "--num-steps", "16", "--hidden-sizes", "8", "--no-gif", "--out", str(tmp_path / "runs")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
        # a test run started in the background (nohup, `cmd &` in a script) inherits SIGINT ignored,
        # and Python then leaves it ignored: the command as a person starts it at a terminal has it on
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines = []
    for line in proc.stdout:  # wait until the run directory exists (a checkpoint can then be saved)
        lines.append(line)
        if "evaluating the untrained policy" in line:
            break
    assert any("in the background" in line for line in lines), lines
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    out = "".join(lines) + out
    assert "FATAL" not in err and "terminate called" not in err, err
    assert proc.returncode == 130, (proc.returncode, out[-2000:], err[-2000:])
    assert "checkpoint saved" in out and "--resume" in out
    # the background compile was still running when the run stopped: it never reported being done
    assert not any(line.startswith("compiling the training program") and "done in" in line for line in out.splitlines())
    assert load_run(only_run(tmp_path / "runs"))[2]["update"] == 0


LAB_MODULE = """
import sys
import jaxenvs
from jaxenvs.envs.grid_world import GridWorld
sys.stderr.write("lab_envs ran\\n")
jaxenvs.register("lab/Grid-v0", entry_point=lambda **kw: GridWorld(**kw), max_episode_steps=20)
"""


@pytest.fixture
def lab_module(tmp_path, monkeypatch):
    """``./lab_envs.py`` registering ``lab/Grid-v0``, importable from the current folder;
    ``forget()`` makes the next load import it again (as a new process would)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [str(tmp_path), *(p for p in __import__("sys").path if p not in ("", "."))])
    (tmp_path / "lab_envs.py").write_text(LAB_MODULE)

    def forget():
        import sys

        sys.modules.pop("lab_envs", None)
        jaxenvs.registry.pop("lab/Grid-v0", None)

    forget()
    yield forget
    forget()


def _notice(err: str, path) -> None:
    """The one warning line naming the module's resolved file comes before the module's own code runs."""
    lines = err.strip().splitlines()
    i = lines.index("lab_envs ran")
    warned = [line for line in lines[:i] if line.startswith("warning: importing ")]
    assert len(warned) == 1 and str(path.resolve()) in warned[0], lines
    assert "module 'lab_envs' of the env id 'lab_envs:lab/Grid-v0'" in warned[0] and "its code runs as you" in warned[0]


def test_loading_a_run_of_a_module_env_names_the_module_file_first(lab_module, tmp_path, capsys):
    """--resume, load_policy and ``jaxenvs play .`` inside the run directory (which may ship a
    module of its own) each print one line naming the file they import before its code runs."""
    from jaxenvs.cli import main as jaxenvs_main
    from jaxenvs.train import load_policy

    code, _, err = train(capsys, "--env", "lab_envs:lab/Grid-v0", "--total-timesteps", str(STEPS), *TINY,
                         "--out", str(tmp_path / "runs"))
    assert code == 0 and "warning: importing" not in err, err  # the user named the module on the command line
    run_dir = only_run(tmp_path / "runs")
    lab_module()
    code, out, err = train(capsys, "--resume", str(run_dir), "--no-eval", "--no-gif")
    assert code == 0 and "is complete" in out, err
    _notice(err, tmp_path / "lab_envs.py")
    lab_module()
    policy = load_policy(run_dir)
    assert policy.env_id == "lab_envs:lab/Grid-v0"
    _notice(capsys.readouterr().err, tmp_path / "lab_envs.py")
    policy = load_policy(run_dir)  # imported already: nothing runs, nothing said
    assert capsys.readouterr().err == ""
    # a run directory from someone else, shipping its own lab_envs.py, played from inside it
    shipped = run_dir / "lab_envs.py"
    shipped.write_text(LAB_MODULE)
    lab_module()
    os.chdir(run_dir)  # play puts the current folder first on the import path, as python -m does
    assert jaxenvs_main(["play", ".", "--episodes", "1"]) == 0
    _notice(capsys.readouterr().err, shipped)
