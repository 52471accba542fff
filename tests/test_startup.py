"""``benchmarks/startup.py`` and ``benchmarks/compare_results.py``: the output's structure (never
its timings), from one ``--quick --repeats 1`` run in fresh processes."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "benchmarks", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    from helpers import require

    require("rejax")
    out = tmp_path_factory.mktemp("startup")
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "startup.py"), "--quick", "--repeats", "1", "--out", str(out)],
        cwd=out, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc.stdout


def test_startup_json_structure(quick_run):
    out, stdout = quick_run
    result = json.loads((out / "startup.json").read_text())
    assert result["settings"]["quick"] is True and result["settings"]["repeats"] == 1
    assert result["settings"]["envs"] == ["GridWorld-v0"]
    # the warm run (programs from the cache) wrote the cold run's numbers, digit for digit
    assert result["same_outputs_cold_and_warm"] == {"GridWorld-v0": True}
    assert len(result["main_job"]["cold"]["outputs_sha256"]) == 1
    assert "load average" in result["machine"]["load_before"] and "load average" in result["machine"]["load_after"]
    assert result["floor_s"]["median"] > 0 and len(result["library_floor_s"]["runs"]) == 1
    assert result["library_floor_s"]["median"] > 0 and "main job's libraries" in (out / "startup.md").read_text()
    for kind in ("cold", "warm"):
        job = result["main_job"][kind]
        med = job["median"]
        assert len(job["runs"]) == 1
        # the trainer's own clock runs inside the process: less than its wall time, and the phases
        # it names (init and compile at least) fit inside its clock
        assert 0 < med["trainer_wall_s"] < med["wall_s"]
        assert med["before_clock_s"] == pytest.approx(med["wall_s"] - med["trainer_wall_s"])
        # (the trainer's line leaves out phases under 0.05 s: --quick trains for a few milliseconds, and
        # the training program compiles in the background, so the time waited for it may be shorter)
        assert {"init"} <= set(med["phases_s"]) <= {
            "imports", "init", "compile", "train", "progress evaluation", "evaluation warm-up", "evaluate", "plot", "gif"}
        # the run's timings.json: what JAX compiled; warm, every program comes from its persistent cache
        counts, (run,) = med["jax"]["counts"], job["runs"]
        if kind == "warm":
            assert counts["cache_misses"] == 0 and counts["cache_hits"] == counts["compile"] >= 2, counts
        else:
            assert counts["compile"] >= 2 and med["jax"]["seconds"]["compile_s"] > 0, counts
        assert run["learning_curve_drawn_in"] == "a helper process"  # the command, not an in-process call
        assert result["per_env"]["GridWorld-v0"][kind] == med  # the main job is the first (only) env's
        assert sum(med["phases_s"].values()) <= med["trainer_wall_s"] + 0.05 * len(med["phases_s"])
        assert any("wall time" in text for _, text in job["lines_of_first_run"])
        for prog in ("jaxenvs", "rejax"):
            fp = result["first_policy"][prog][kind]["median"]
            parts = ("imports_s", "build_s", "trace_s", "lower_s", "compile_s", "train_s")
            assert all(fp[k] > 0 for k in parts), fp
            # the stages are consecutive timestamps from process start to trained parameters
            assert fp["first_policy_s"] == pytest.approx(sum(fp[k] for k in parts), rel=1e-9)
            assert fp["first_policy_s"] < fp["wall_s"]
            run = result["first_policy"][prog][kind]["runs"][0]
            assert run["env_steps"] == 512 and run["num_params"] > 0
    # identical settings: the same network size for both programs
    assert (result["first_policy"]["jaxenvs"]["cold"]["runs"][0]["num_params"]
            > 0.5 * result["first_policy"]["rejax"]["cold"]["runs"][0]["num_params"])
    assert set(result["ratios"]) == {
        "main_cold_over_warm", "main_cold_over_floor", "main_warm_over_floor",
        "first_policy_cold_jaxenvs_over_rejax", "first_policy_warm_jaxenvs_over_rejax",
        "trace_lower_compile_cold_jaxenvs_over_rejax", "trace_lower_compile_warm_jaxenvs_over_rejax",
    }
    r = result["main_job"]
    assert result["ratios"]["main_cold_over_warm"] == pytest.approx(r["cold"]["median"]["wall_s"] / r["warm"]["median"]["wall_s"])
    imports = result["imports"]
    assert imports["total_s"] > 0 and "jax" in imports["cumulative_s"]
    md = (out / "startup.md").read_text()
    assert "| cold |" in md and "| jaxenvs cold |" in md and "| rejax warm |" in md and "| GridWorld-v0 |" in md
    assert md in stdout


def test_compare_results_prints_ratios_and_never_fails_on_timing(quick_run, tmp_path, capsys):
    out, _ = quick_run
    compare = _load("compare_results")
    new = json.loads((out / "startup.json").read_text())
    slower = json.loads(json.dumps(new))
    slower["main_job"]["cold"]["median"]["wall_s"] *= 10  # a tenfold slowdown is reported, not failed
    (tmp_path / "slow.json").write_text(json.dumps(slower))
    assert compare.main([str(tmp_path / "slow.json"), str(out / "startup.json")]) == 0
    text = capsys.readouterr().out
    assert "main_job.cold.median.wall_s" in text and "10.00x" in text
    rows = {k: r for k, _, _, r in compare.compare(slower, new)}
    assert rows["main_job.cold.median.wall_s"] == pytest.approx(10)
    assert rows["first_policy.rejax.warm.median.compile_s"] == pytest.approx(1)
    assert not any(".runs" in k for k in rows)  # single runs are left out, medians kept
    (tmp_path / "bad.json").write_text("{")
    assert compare.main([str(tmp_path / "bad.json"), str(out / "startup.json")]) == 2
    (tmp_path / "empty.json").write_text("{}")
    assert compare.main([str(tmp_path / "empty.json"), str(out / "startup.json")]) == 2


def test_compare_results_reads_a_run_directorys_timings(quick_run, tmp_path, capsys):
    """A run's timings.json (as .ci/run prints it) is set against startup.json's main job."""
    out, _ = quick_run
    compare = _load("compare_results")
    record = json.loads((out / "startup.json").read_text())
    timings = {"wall_s": 2 * record["main_job"]["warm"]["median"]["trainer_wall_s"], "phases_s": {"init": 1.0},
               "jax": {"seconds": {"compile_s": 1.0}, "counts": {"compile": 3}}}
    (tmp_path / "timings.json").write_text(json.dumps(timings))
    assert compare.main([str(tmp_path / "timings.json"), str(out / "startup.json"), "--kind", "warm"]) == 0
    text = capsys.readouterr().out
    assert "compared with the warm main job's medians" in text
    assert "main_job.warm.median.trainer_wall_s" in text and "2.00x" in text
    rows = {k: r for k, _, _, r in compare.compare(compare.as_main_job(timings, "warm"), record)}
    assert rows["main_job.warm.median.trainer_wall_s"] == pytest.approx(2)
    # a warm run compiles nothing (its programs load whole), so the compile seconds compare with the cold run's
    rows = {k: r for k, _, _, r in compare.compare(compare.as_main_job(timings, "cold"), record)}
    assert "main_job.cold.median.jax.seconds.compile_s" in rows


def test_trainer_phases_parses_the_wall_time_line():
    startup = _load("startup")
    lines = [(0.1, "compiling ...: done in 5.6s"),
             (9.0, "wall time 17.6s of this command (imports 0.5s, init 3.0s, progress evaluation 0.4s; the rest: writing files)")]
    assert startup.trainer_phases(lines) == (17.6, {"imports": 0.5, "init": 3.0, "progress evaluation": 0.4})
    assert startup.trainer_phases([(0.0, "no summary")]) == (None, {})


@pytest.mark.parametrize("tty", [True, False])
def test_a_message_inside_a_phase_gets_its_own_line(tty, capsys, monkeypatch):
    """In a terminal a phase prints "label ... " and waits for "done in" on the same line; the
    background compile's message, printed inside the init phase, must not be glued to it."""
    import re
    import sys

    from jaxenvs.train.app.timing import Say

    monkeypatch.setattr(sys.stdout, "isatty", lambda: tty)
    say = Say(True)
    with say.phase("building GridWorld-v0", "init"):
        say("compiling the training program (in the background) ...")
    with say.phase("loading checkpoint", "init"):
        pass
    with pytest.raises(KeyboardInterrupt):
        with say.phase("evaluating", "evaluate"):
            raise KeyboardInterrupt
    say("next")
    out = re.sub(r"\d+\.\d+s", "Ts", capsys.readouterr().out)
    if tty:
        assert out == ("building GridWorld-v0 ... \ncompiling the training program (in the background) ...\n"
                       "building GridWorld-v0: done in Ts\nloading checkpoint ... done in Ts\nevaluating ... \nnext\n")
    else:
        assert out == ("building GridWorld-v0 ...\ncompiling the training program (in the background) ...\n"
                       "building GridWorld-v0: done in Ts\nloading checkpoint ...\nloading checkpoint: done in Ts\n"
                       "evaluating ...\nnext\n")
