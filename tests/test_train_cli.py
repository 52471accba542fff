"""``jaxenvs-train`` and ``jaxenvs evaluate``: one tiny run through subprocesses (as a
user runs it), and the command line's misuse cases in-process (they fail before compiling)."""

import csv
import dataclasses
import json
import re
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jaxenvs.train.app.__main__ import main
from jaxenvs.train.app.metrics_log import first_nonfinite_update
from jaxenvs.train.app.parser import build_parser
from jaxenvs.train.app.chunks import chunk_plan
from jaxenvs.train.configs import (
    PPOConfig, RunSettings, TRPOConfig, config_from_dict, get_config, load_config_file,
    run_record, run_settings_from_dict,
)
from jaxenvs.train.grading import format_table

ROOT = Path(__file__).resolve().parents[1]
# the hints name the `jaxenvs` command: the one installed beside this Python comes first on PATH
BIN_ON_PATH = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])


# the subprocesses compile without XLA:CPU's backend optimisations: their runs are tiny, so compiling
# dominates, and what they compute is the same (the XLA_FLAGS the test session set stay)
FAST_COMPILE = "--xla_backend_optimization_level=0"


def run(*args, cache=None, timeout=300):
    env = {**os.environ, "JAXENVS_CACHE_DIR": str(cache) if cache else "",
           "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip()}
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    cache = Path(os.environ["JAXENVS_TEST_CACHE_DIR"])  # the session's (tests/conftest.py)
    # 2 seeds x 8 envs x 32 steps: 4 updates of 256 env steps, in 2 chunks
    p = run("jaxenvs.train", "--total-timesteps", "1024", "--num-envs", "8", "--seeds", "2", "--chunks", "2",
            "--out", str(out), cache=cache)
    assert p.returncode == 0, p.stderr
    (run_dir,) = out.iterdir()
    return run_dir, p.stdout, cache


def test_cli_writes_the_run_directory(run_dir):
    run_dir, stdout, cache = run_dir
    assert run_dir.name.startswith("GridWorld-v0-")  # the default environment
    config = json.loads((run_dir / "config.json").read_text())
    assert config["env_id"] == "GridWorld-v0" and config["num_envs"] == 8 and "num_seeds" not in config
    assert config["run"] == {"num_seeds": 2, "seed": 0, "num_chunks": 2}  # the run settings, apart
    assert "chunk 2/2" in stdout  # --chunks 2: two calls
    with open(run_dir / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["env_steps"]) for r in rows] == [256, 512, 768, 1024]
    assert {"episode_return_mean", "episode_return_std", "pg_loss_mean", "entropy_mean"} <= set(rows[0])
    stored = json.loads((run_dir / "metrics.json").read_text())
    assert len(stored["per_seed"]["entropy"]) == 4 and len(stored["per_seed"]["entropy"][0]) == 2
    # GridWorld's progress measures after each chunk, per seed, in [0, 1] and >= 1
    progress = stored["progress"]
    assert [p["env_steps"] for p in progress] == [0, 512, 1024]  # the untrained policy, then after each chunk
    assert all(len(p["success_rate"]) == 2 and all(0 <= x <= 1 for x in p["success_rate"]) for p in progress)
    assert all(all(x >= 1 for x in p["length_ratio"]) for p in progress)
    assert (run_dir / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (run_dir / "policy.gif").read_bytes()[:6] in (b"GIF89a", b"GIF87a")
    assert not list(run_dir.glob(".*tmp"))  # atomic writes leave no temporary files
    for name in ("learning_curve.png", "policy.gif", "checkpoint.msgpack"):
        assert str(run_dir / name) in stdout
    assert "steps 1,024/1,024 x2 seeds" in stdout and "steps/s" in stdout and "ETA" in stdout
    assert "success_rate" in stdout and "length_ratio" in stdout  # the progress line's measures
    # what the rows judge, beside what the verdict judges
    assert "progress rows: measured on 200 episodes per seed; the verdict at the end on 1000 episodes per seed" in stdout
    for phase in ("compiling", "evaluating 1000 episodes", "writing policy.gif", "wall time"):
        assert phase in stdout
    assert "verdict:" in stdout and "seed 1" in stdout
    assert list(cache.iterdir())  # the persistent compilation cache was written
    timings = json.loads((run_dir / "timings.json").read_text())  # what .ci/run prints
    assert {"init", "train", "evaluate", "gif"} <= set(timings["phases_s"]) and timings["wall_s"] > 0
    counts = timings["jax"]["counts"]  # the session's cache may already hold these programs (another test's run)
    # every program compiled (init, chunk, evaluation, GIF at least) went through JAX's cache: a hit, or written to it
    assert counts["compile"] >= 3
    assert counts["cache_hits"] + counts["cache_misses"] >= counts["compile"]
    assert "executables" not in timings and not (cache / "executables").exists()  # no store of whole programs


def test_learning_curve_panels_hold_the_progress_measures(run_dir):
    from jaxenvs.train.app.plotting import curve_panels

    run_dir, _, _ = run_dir
    stored = json.loads((run_dir / "metrics.json").read_text())
    ret = np.array([[np.nan if x is None else x for x in r] for r in stored["per_seed"]["episode_return"]])
    length = np.array([[np.nan if x is None else x for x in r] for r in stored["per_seed"]["episode_length"]])
    panels = curve_panels(np.array(stored["env_steps"]), ret, length, stored["progress"], env_id="GridWorld-v0")
    assert [p["label"] for p in panels] == [
        "success rate (evaluation)", "length / optimal length (evaluation)",
        "mean episode length (training)",  # GridWorld's return is 1 in every episode: no panel
    ]
    success = np.array([p["success_rate"] for p in stored["progress"]])
    np.testing.assert_allclose(panels[0]["mean"], success.mean(axis=1))
    np.testing.assert_allclose(panels[0]["low"], success.min(axis=1))
    np.testing.assert_allclose(panels[0]["x"], [0, 512, 1024])


@pytest.mark.parametrize("env_id", ["GridWorld-v0", "PointEnv-v0", "HurdleRace-v0", "Lottery-v0", "RockPaperScissors-v0"])
def test_learning_curve_has_a_panel_per_progress_measure_of_every_env(env_id):
    """Each env's curve leads with its own progress measures (a flat return of 0 or 1 says nothing
    in HurdleRace, Rock-Paper-Scissors and GridWorld); rows as the trainer stores them, 2 seeds."""
    import jaxenvs
    from jaxenvs.train.app.plotting import _label, curve_panels
    from jaxenvs.train.tuned import entry

    names = entry(env_id).progress
    rng = np.random.default_rng(0)
    values = {n: rng.uniform(size=(3, 2)) for n in names}
    progress = [{"env_steps": 100 * (i + 1), **{n: list(values[n][i]) for n in names}} for i in range(3)]
    ret = np.array([[np.nan, np.nan], [0.5, np.nan], [1.0, 2.0]])  # no episode ended yet: carried forward
    length = np.array([[3.0, 5.0], [2.0, 4.0], [2.0, 2.0]])
    panels = curve_panels(np.array([100, 200, 300]), ret, length, progress, env_id=env_id)
    assert [p["label"] for p in panels] == [f"{_label(n, env_id)} (evaluation)" for n in names] + [
        "mean episodic return (training)", "mean episode length (training)",
    ]
    for n, p in zip(names, panels):
        np.testing.assert_array_equal(p["x"], [100, 200, 300])
        np.testing.assert_allclose(p["mean"], values[n].mean(axis=1))
        np.testing.assert_allclose(p["low"], values[n].min(axis=1))
        np.testing.assert_allclose(p["high"], values[n].max(axis=1))
    np.testing.assert_allclose(panels[len(names)]["mean"], [np.nan, 0.5, 1.5])
    np.testing.assert_allclose(panels[len(names)]["high"], [np.nan, 0.5, 2.0])
    np.testing.assert_allclose(panels[-1]["mean"], [4.0, 3.0, 2.0])
    # constant by construction (zero-sum self-play's return 0, a one-step game's length 1): no panel
    flat = curve_panels(np.array([100, 200, 300]), np.zeros((3, 2)), np.ones((3, 2)), progress, env_id=env_id)
    assert [p["label"] for p in flat] == [p["label"] for p in panels[: len(names)]]


def test_evaluate_reads_the_run_and_resume_continues_it(run_dir):
    run_dir, _, cache = run_dir
    p = run("jaxenvs", "evaluate", str(run_dir), "--json", cache=cache)
    assert p.returncode in (0, 1), p.stderr  # 1 = evaluated but not solved on this tiny budget
    result = json.loads(p.stdout)
    assert result["env_id"] == "GridWorld-v0" and len(result["seeds"]) == 2 and result["num_episodes"] == 1000
    assert {"success_rate", "length_ratio", "solved"} <= set(result["seeds"][0])
    assert result["seeds"][0] == json.loads((run_dir / "evaluation.json").read_text())["seeds"][0]
    assert p.returncode == (0 if result["solved"] else 1)

    lines = format_table(result).splitlines()  # what the command prints without --json
    assert lines[0].startswith("evaluation: GridWorld-v0, 1000 episodes per seed") and "(2 seeds)" in lines[0]
    assert lines[1] == "solved when: success_rate = 1 and length_ratio <= 1.1"
    assert lines[2].split()[:3] == ["metric", "seed", "0"] and "seed 1" in lines[2]
    success = next(line for line in lines if line.startswith("success_rate"))
    assert success.split()[1] == f"{result['seeds'][0]['success_rate']:.4g}" and "fraction of episodes" in success
    assert lines[-1].startswith("verdict: " + ("SOLVED" if result["solved"] else "NOT SOLVED"))

    p = run("jaxenvs.train", "--resume", str(run_dir), "--total-timesteps", "1536", "--no-gif", cache=cache)
    assert p.returncode == 0, p.stderr
    assert "resuming" in p.stdout and "at update 4" in p.stdout
    with open(run_dir / "metrics.csv") as f:
        assert [int(r["env_steps"]) for r in csv.DictReader(f)] == [256 * i for i in range(1, 7)]
    assert json.loads((run_dir / "config.json").read_text())["total_timesteps"] == 1536


def test_chunk_plan_makes_the_number_of_chunks_asked_for():
    assert chunk_plan(59, 2) == [30, 29]  # a prime number of updates still gives 2 calls
    assert chunk_plan(200, 20) == [10] * 20
    assert chunk_plan(3, 20) == [1, 1, 1]  # at most one chunk per update
    for n, k in [(59, 20), (196, 20), (7, 3), (1, 1)]:
        plan = chunk_plan(n, k)
        assert sum(plan) == n and len(plan) == min(n, k) and max(plan) - min(plan) <= 1


def test_nonfinite_updates_are_found_from_the_flag_or_the_losses():
    finite = {"pg_loss": np.zeros((3, 2)), "vf_loss": np.ones((3, 2)), "episode_return": np.full((3, 2), np.nan)}
    assert first_nonfinite_update(finite) is None  # NaN returns only mean no episode ended
    assert first_nonfinite_update({**finite, "vf_loss": np.array([[1, 1], [1, np.inf], [np.nan, 1]])}) == 1
    assert first_nonfinite_update({**finite, "nonfinite": np.array([[0, 0], [0, 0], [0, 1]], bool)}) == 2
    assert first_nonfinite_update({**finite, "nonfinite": np.zeros((3, 2), bool)}) is None


def test_every_config_field_is_checked_with_a_message_naming_it():
    cases = {
        "lr": [float("nan"), float("inf"), 0.0, "0.001", True],
        "ent_coef": [float("nan"), -0.1],
        "vf_coef": [-1.0],
        "reward_scale": [float("nan"), 0.0],
        "gamma": [1.5, -0.1],
        "num_envs": [0, 2.5, "8"],
        "anneal_lr": [1, "yes"],
        "hidden_sizes": [[], [0], [64.0]],
        "activation": ["gelu"],
        "env_kwargs": [[1]],
    }
    for field, values in cases.items():
        for v in values:
            with pytest.raises((ValueError, TypeError), match=rf"PPOConfig\.{field} must be .*; got {re.escape(repr(v))}"):
                get_config("GridWorld-v0", **{field: v})
    run_cases = {"num_seeds": [0, 1 << 17, 2.0], "seed": [10**23, -1, "0"], "num_chunks": [0, True]}
    for field, values in run_cases.items():
        for v in values:
            with pytest.raises((ValueError, TypeError), match=rf"RunSettings\.{field} must be .*; got {re.escape(repr(v))}"):
                RunSettings(**{field: v})
    for cls in (PPOConfig, TRPOConfig, RunSettings):
        from jaxenvs.train.fields import help_of, rule_of

        missing = [f.name for f in dataclasses.fields(cls) if rule_of(f) is None or not help_of(f)]
        assert not missing, cls  # every field has a rule and a help text
    with pytest.raises(ValueError, match="clip_eps"):
        get_config().replace(clip_eps=-1.0)


def _main(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _usage_error(capsys, *argv):
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    assert e.value.code == 2
    return capsys.readouterr().err


@pytest.fixture
def no_cache(monkeypatch):
    monkeypatch.setenv("JAXENVS_CACHE_DIR", "")


def test_usage_errors_exit_2_with_a_message(tmp_path, capsys, no_cache):
    out = str(tmp_path / "runs")
    for argv, words in [
        (["--lr", "nan"], ["PPOConfig.lr", "nan", "> 0"]),
        (["--lr", "inf"], ["PPOConfig.lr", "inf"]),
        (["--seed", str(10**23)], ["RunSettings.seed", str(10**23)]),
        (["--vf-coef", "-1"], ["vf_coef", "-1"]),
        (["--env", "GridWorld-v9"], ["GridWorld-v0"]),  # suggests the registered id
    ]:
        code, _, err = _main(capsys, *argv, "--out", out)
        assert code == 2 and all(w in err for w in words) and "Traceback" not in err, (argv, err)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())  # no run directory left
    assert "invalid int value" in _usage_error(capsys, "--seed", "10**23")

    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    code, _, err = _main(capsys, "--out", str(a_file))
    assert code == 2 and "is a file" in err
    for text, words in [
        ('{"lr": 1e-3, "num_env": 4}', ["num_env", "num_envs"]),
        ('{"lr": "fast"}', ["PPOConfig.lr", "'fast'"]),
        ("[1, 2]", ["JSON object"]),
        ("{lr: 1}", ["not valid JSON"]),
    ]:
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        code, _, err = _main(capsys, "--config", str(bad), "--out", out)
        assert code == 2 and all(w in err for w in words), (text, err)
    code, _, err = _main(capsys, "--config", str(tmp_path / "missing.json"), "--out", out)
    assert code == 2 and "missing.json" in err
    code, _, err = _main(capsys, "--resume", str(tmp_path))
    assert code == 2 and "not a run directory" in err
    code, _, err = _main(capsys, "--resume", str(tmp_path / "nowhere"))
    assert code == 2 and "does not exist" in err


@pytest.mark.parametrize("env_id", ["GridWorld-v0", "KuhnPoker-v0"])
def test_play_search_and_lookahead_are_refused_for_envs_that_cannot_use_them(env_id, tmp_path, capsys, no_cache):
    """Tree search and look-ahead play perfect-information two-player games only: the flags (or the
    fields in --config) are refused before anything is built, naming what was given and what takes it;
    the games that take them still do (--show-config resolves without building anything)."""
    out = str(tmp_path / "runs")
    for argv, named in [(["--play-lookahead", "2"], "--play-lookahead 2"), (["--play-search", "8"], "--play-search 8"),
                        (["--play-search", "8", "--play-lookahead", "1"], "--play-search 8, --play-lookahead 1")]:
        code, _, err = _main(capsys, "--env", env_id, *argv, "--out", out)
        assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert f"{named}: tree search and look-ahead play two-player zero-sum turn-based games" in err
        assert f"(TicTacToe-v0, ConnectFour-v0); {env_id} is not one" in err
    cfg = tmp_path / "cfg.json"
    cfg.write_text('{"play_lookahead": 3}')
    code, _, err = _main(capsys, "--env", env_id, "--config", str(cfg), "--out", out)
    assert code == 2 and "play_lookahead 3 (from --config)" in err
    assert not (tmp_path / "runs").exists()
    code, stdout, err = _main(capsys, "--env", "TicTacToe-v0", "--play-lookahead", "2", "--show-config")
    assert code == 0 and json.loads(stdout)["play_lookahead"] == 2, err


def test_help_shows_defaults_and_tuned_values_and_show_config_resolves_them(capsys, no_cache):
    text = build_parser().format_help()
    assert "--lr X" in text and "default: 0.0003" in text and "PointEnv-v0 0.001" in text
    assert "--num-minibatches" in text and "--anneal-lr, --no-anneal-lr" in text  # one flag per field
    assert "JAXENVS_CACHE_DIR" in text and "tuned defaults per environment" in text
    from jaxenvs.train import tuned

    for env in tuned.training_defaults("ppo"):
        assert env in text
    code, out, _ = _main(capsys, "--env", "PointEnv-v0", "--seeds", "3", "--show-config")
    shown = json.loads(out)
    assert code == 0 and shown["lr"] == 1e-3 and shown["ent_coef"] == 0.0 and shown["run"]["num_seeds"] == 3
    assert shown == run_record(get_config("PointEnv-v0"), RunSettings(num_seeds=3))


def test_config_file_without_algo_takes_the_algo_flag(tmp_path, capsys, no_cache):
    path = tmp_path / "trpo.json"
    path.write_text(json.dumps({"max_kl": 0.02, "num_envs": 8}))  # TRPO fields, no "algo" key
    code, out, _ = _main(capsys, "--algo", "trpo", "--config", str(path), "--show-config")
    shown = json.loads(out)
    assert code == 0 and shown["algo"] == "trpo" and shown["max_kl"] == 0.02 and shown["num_envs"] == 8
    code, _, err = _main(capsys, "--config", str(path), "--show-config")  # PPO has no max_kl: a usage error
    assert code == 2 and "max_kl" in err
    path.write_text(json.dumps({"algo": "ppo", "lr": 1e-3}))
    code, _, err = _main(capsys, "--algo", "trpo", "--config", str(path), "--show-config")
    assert code == 2 and "is for algorithm 'ppo', not 'trpo'" in err


def test_seed_i_of_seeds_n_starts_as_seed_i_alone():
    """Seed i of ``--seeds N --seed s`` gets the init key of ``--seed s+i`` alone (a run of one seed
    keeps the key it always had: the one split of jax.random.key(seed)); what still differs between
    the two runs is the float rounding of the vmapped program (docs/training.md)."""
    import jax

    from jaxenvs.train.app.run import seed_keys

    data = lambda k: np.asarray(jax.random.key_data(k))
    many = seed_keys(3, 4)
    assert many.shape == (4,) and jax.dtypes.issubdtype(many.dtype, jax.dtypes.prng_key)
    for i in range(4):
        alone = seed_keys(3 + i, 1)
        np.testing.assert_array_equal(data(many)[i], data(alone)[0])
        np.testing.assert_array_equal(data(alone)[0], data(jax.random.split(jax.random.key(3 + i), 1))[0])
    assert len({tuple(k) for k in data(many)}) == 4  # four different keys
    RunSettings(seed=2**63 - 4, num_seeds=4)  # the last seed is 2**63 - 1: allowed
    with pytest.raises(ValueError, match=r"seeds 9223372036854775805 \.\. 9223372036854775808 pass 2\*\*63 - 1"):
        RunSettings(seed=2**63 - 3, num_seeds=4)


def test_run_settings_live_apart_from_the_config(tmp_path, capsys, no_cache):
    config, settings = get_config("PointEnv-v0", algo="trpo"), RunSettings(num_seeds=4, seed=3, num_chunks=5)
    record = run_record(config, settings)
    assert record["run"] == {"num_seeds": 4, "seed": 3, "num_chunks": 5} and not {"num_seeds", "seed", "num_chunks"} & set(record)
    assert config_from_dict(record) == config and run_settings_from_dict(record) == settings
    assert run_settings_from_dict(config.to_dict()) == RunSettings()  # none given: the defaults
    # a config file with a run setting at top level: refused, saying where it goes
    path = tmp_path / "top.json"
    path.write_text(json.dumps({**config.to_dict(), "seed": 3}))
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['seed'\].*run settings \(seed\) go in its \"run\" object"):
        load_config_file(str(path))
    with pytest.raises(TypeError, match=r"unknown run setting\(s\) \['seeds'\] in \"run\"; valid: \['num_chunks', 'num_seeds', 'seed'\]"):
        run_settings_from_dict({"run": {"seeds": 2}})
    with pytest.raises(TypeError, match=r"\"run\" must be a JSON object of run settings"):
        run_settings_from_dict({"run": [1]})
    # the algorithm configs no longer take them, and say where they went
    with pytest.raises(TypeError, match=r"unknown PPOConfig field\(s\) \['num_seeds'\].*num_seeds is a run setting \(RunSettings"):
        get_config("GridWorld-v0", num_seeds=2)
    with pytest.raises(TypeError, match=r"unknown TRPOConfig field\(s\) \['num_chunks', 'seed'\].*are run settings"):
        config.replace(seed=1, num_chunks=2)
    assert settings.replace(seed=8) == RunSettings(num_seeds=4, seed=8, num_chunks=5)

    # a run's config.json given to --config: its settings land in "run", flags override them
    path = tmp_path / "run.json"
    path.write_text(json.dumps(record))
    assert load_config_file(str(path)) == record
    code, out, _ = _main(capsys, "--config", str(path), "--chunks", "7", "--show-config")
    assert code == 0 and json.loads(out) == run_record(config, settings.replace(num_chunks=7))
    path.write_text(json.dumps({**record, "run": {"num_seeds": 2, "seeds": 1}}))
    code, _, err = _main(capsys, "--config", str(path), "--show-config")
    assert code == 2 and "run.json" in err and "unknown run setting(s) ['seeds']" in err


def test_a_run_setting_without_a_rule_is_an_error():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class MoreSettings(RunSettings):
        workers: int = 1

    with pytest.raises(TypeError, match=r"MoreSettings has no rule for field\(s\) \['workers'\]; declare them with train\.fields\.field"):
        MoreSettings()


# The XLA:CPU hang (jax 0.10.x, the concurrency-optimized scheduler; see train/xla.py): LAPACK's QR
# (the orthogonal initialiser) in a seed-vmapped init hung forever, deterministically on a 2-core
# machine, whenever the scheduler was on, i.e. whenever JAX started before jaxenvs.train set
# XLA_FLAGS (every notebook that imports jax first). The trainer's programs hold no QR any more, so
# the import order does not matter: here JAX starts first, and the smallest program found to hang
# (the jitted init of 2 GridWorld seeds with 8 envs) finishes, and so does seed-vmapped training
# (HurdleRace, 3 seeds: the init and a whole update in one program), at the smallest settings that
# still run every phase of an update (one update, one epoch, one minibatch: compiling dominates).
# XLA_FLAGS holds only --xla_backend_optimization_level=0 (half the compile time; the hang did not
# depend on it, see train/xla.py): the scheduler is at its default, on.
JAX_FIRST = """
import jax
jax.numpy.zeros(1).block_until_ready()  # JAX starts first: XLA_FLAGS are fixed without the flag
import jaxenvs.train.xla as xla
assert xla.jax_started()
from jaxenvs.train.configs import get_config
from jaxenvs.train.trainers import make_trainer
trainer = make_trainer(get_config("GridWorld-v0", num_envs=8, total_timesteps=1024))
keys = jax.random.split(jax.random.key(0), 2)
jax.block_until_ready(jax.jit(jax.vmap(trainer.init, in_axes=(0, None)))(keys, trainer.config.hparams()))
print("GridWorld-v0 init of 2 seeds finished")
trainer = make_trainer(get_config("HurdleRace-v0", num_envs=8, num_steps=16, total_timesteps=128, num_minibatches=1,
                                  update_epochs=1))
runner, metrics = jax.jit(jax.vmap(trainer.train))(jax.random.split(jax.random.key(0), 3))
print("HurdleRace-v0 3 seeds:", jax.tree.leaves(metrics)[0].shape)
print("finished")
"""


def test_seed_vmapped_training_finishes_when_jax_started_first(tmp_path):
    env = {**os.environ, "XLA_FLAGS": "--xla_backend_optimization_level=0"}  # no scheduler flag
    env["JAXENVS_CACHE_DIR"] = ""  # compile here, with this process's flags
    p = subprocess.run([sys.executable, "-c", JAX_FIRST], capture_output=True, text=True, timeout=400, env=env,
                       cwd=tmp_path)
    assert p.returncode == 0 and "finished" in p.stdout, p.stderr[-3000:]
    assert "GridWorld-v0 init of 2 seeds finished" in p.stdout and "HurdleRace-v0 3 seeds: (3, 1)" in p.stdout


def test_the_trainer_programs_hold_no_lapack_call():
    """What hung was a LAPACK custom call (QR) in a seed-vmapped program; none may come back."""
    import jax

    from jaxenvs.train.configs import get_config
    from jaxenvs.train.trainers import make_trainer

    trainer = make_trainer(get_config("GridWorld-v0", num_envs=8, num_steps=16, total_timesteps=256))
    keys = jax.random.split(jax.random.key(0), 2)
    hlo = jax.jit(jax.vmap(trainer.init, in_axes=(0, None))).lower(keys, trainer.config.hparams()).as_text()
    assert "custom_call" not in hlo or "lapack" not in hlo.lower()


def test_the_printed_evaluate_hint_works_from_another_directory(run_dir, tmp_path):
    run_dir, stdout, cache = run_dir
    (hint,) = [line.split("evaluate again: ", 1)[1] for line in stdout.splitlines() if line.startswith("evaluate again: ")]
    assert hint == f"jaxenvs evaluate {run_dir.resolve()}"
    env = {**os.environ, "JAXENVS_CACHE_DIR": str(cache), "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip(),
           "PATH": BIN_ON_PATH}
    p = subprocess.run(["bash", "-c", hint], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode in (0, 1) and "evaluation: GridWorld-v0" in p.stdout, p.stderr


CUSTOM_MODULE = """
import jaxenvs
from jaxenvs.envs.grid_world import GridWorld
jaxenvs.register("custom/Grid-v0", entry_point=lambda **kw: GridWorld(**kw), max_episode_steps=20)
"""


def test_a_custom_env_from_the_current_directory_trains_and_its_hints_work_elsewhere(tmp_path):
    here, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    here.mkdir(), elsewhere.mkdir()
    (here / "my_module.py").write_text(CUSTOM_MODULE)
    env = {**os.environ, "JAXENVS_CACHE_DIR": "", "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip()}
    p = subprocess.run([sys.executable, "-m", "jaxenvs.train", "--env", "my_module:custom/Grid-v0", "--total-timesteps", "64",
                        "--num-envs", "2", "--num-steps", "4", "--num-minibatches", "1", "--update-epochs", "1",
                        "--hidden-sizes", "8", "--chunks", "1", "--no-gif"], cwd=here, capture_output=True, text=True,
                       timeout=400, env=env)
    assert p.returncode == 0, p.stderr
    (run_dir,) = (here / "runs").iterdir()
    assert run_dir.name.startswith("custom_Grid-v0-")  # no module part in the name
    assert "solved when: no criterion for this environment" in p.stdout and "no verdict" in p.stdout
    assert "hint: my_module:custom/Grid-v0 has no tuned training values" in p.stdout and "--total-timesteps 640" in p.stdout
    assert "policy GIF:     (not written: --no-gif)" in p.stdout
    (hint,) = [line.split("evaluate again: ", 1)[1] for line in p.stdout.splitlines() if line.startswith("evaluate again: ")]
    assert hint.startswith(f"cd {here} && jaxenvs evaluate {run_dir.resolve()}")
    q = subprocess.run(["bash", "-c", hint], cwd=elsewhere, capture_output=True, text=True, timeout=300,
                       env={**env, "PATH": BIN_ON_PATH})
    assert q.returncode == 0 and "evaluation: my_module:custom/Grid-v0" in q.stdout, q.stderr
    assert f"warning: importing {(here / 'my_module.py').resolve()} (module 'my_module'" in q.stderr  # before it runs
    # the run plays from the folder that holds the module, as check does; elsewhere a one-line error says why
    (play,) = [line.split("play it:        ", 1)[1] for line in p.stdout.splitlines() if line.startswith("play it: ")]
    assert play == f"cd {here} && jaxenvs play {run_dir.resolve()}"
    q = subprocess.run([sys.executable, "-m", "jaxenvs", "play", str(run_dir)], cwd=here, capture_output=True, text=True,
                       timeout=300, env=env)
    assert q.returncode == 0 and q.stdout.startswith("custom/Grid-v0: greedy policy of"), q.stderr
    q = subprocess.run([sys.executable, "-m", "jaxenvs", "play", str(run_dir)], cwd=elsewhere, capture_output=True,
                       text=True, timeout=300, env=env)
    assert q.returncode == 1 and "Traceback" not in q.stderr and len(q.stderr.strip().splitlines()) == 1
    assert "its environment's module cannot be imported" in q.stderr and "run jaxenvs from the folder" in q.stderr


@pytest.mark.parametrize("env_id, words", [
    ("Foo-v0", "no environment registered as 'Foo-v0'"),
    ("no_such_module:Foo-v0", "could not import module 'no_such_module'"),
])
def test_unknown_env_ids_fail_in_one_line_showing_the_module_form(env_id, words, tmp_path, capsys):
    assert main(["--env", env_id, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert words in err and "module:ns/Name-v0" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_without_the_train_extra_the_command_names_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "optax", None)  # as if optax were not installed
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jaxenvs-train: error:") and 'pip install "jaxenvs[train]"' in err and len(err.strip().splitlines()) == 1


def test_a_tuned_run_below_its_bar_says_what_to_try():
    from types import SimpleNamespace

    from jaxenvs.train.grading import solved_hint

    config = SimpleNamespace(env_id="TicTacToe-v0", ALGO="ppo", total_timesteps=400_000)
    hint = solved_hint({"solved": False}, config)
    assert hint == ("TicTacToe-v0 has tuned training values (400,000 env steps), and this run stayed below its bar; "
                    "tuned values solve most seeds, not every one on every machine: try another --seed, --seeds 4 to "
                    "see the spread (each seed judged alone), or --total-timesteps 800000")
    assert solved_hint({"solved": True}, config) is None and solved_hint({"solved": None}, config) is None


def test_the_progress_note_says_what_rows_and_verdict_judge():
    from jaxenvs.train.grading import progress_note

    assert progress_note("TicTacToe-v0") == ("progress rows: measured on 64 games per seat per seed; the verdict at "
                                             "the end on 1000 games per seat per seed")
    assert progress_note("KuhnPoker-v0") == "progress rows and the verdict at the end: exact (enumerated, no episodes played)"
