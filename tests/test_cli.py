"""The ``jaxenvs`` command line: every command once through a real process (the console script or
``python -m jaxenvs``), and the user mistakes in-process through ``jaxenvs.cli.main``: one line
on stderr, exit status 2 for the command line and 1 for what lies outside it, no traceback."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs.cli import main
from helpers import require, tiny_run_dir
from jaxenvs.envs.grid_world import GridWorld
from jaxenvs.rendering import render_frames
from jaxenvs.rollout import episode_stats, random_policy, rollout

SCRIPT = Path(sys.executable).parent / "jaxenvs"
EPISODE_RE = re.compile(r"^episode (\d+): (return [-\d.]+|returns .+?)  length (\d+)  (terminated|truncated)$", re.M)


@pytest.fixture(scope="module")
def cache_dir():
    """The compilation cache the module's processes use: the session's (tests/conftest.py), not the user's."""
    return Path(os.environ["JAXENVS_TEST_CACHE_DIR"])


@pytest.fixture
def run(cache_dir):
    def run(*args, script=False, env=None):
        cmd = [str(SCRIPT)] if script else [sys.executable, "-m", "jaxenvs"]
        env = {**os.environ, "JAXENVS_CACHE_DIR": str(cache_dir), **(env or {})}
        return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=120, env=env)

    return run


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("jaxenvs: error: "), lines
    return lines[0]


# ---- every command through a process -----------------------------------------------------------
def test_list_through_console_script(run):
    assert SCRIPT.exists(), f"the console script {SCRIPT} is missing: install the package (pip install -e .)"
    p = run("list", script=True)
    assert p.returncode == 0, p.stderr
    jaxenvs.registration.load_lazy_namespaces()  # as `jaxenvs list` does
    assert p.stdout.strip() == jaxenvs.pprint_registry(print_output=False)  # one listing
    rows = p.stdout.strip().splitlines()
    lines = {line.split()[0]: line for line in rows if not line.startswith(("=====", " "))}
    assert set(lines) == set(jaxenvs.registry)
    assert re.search(r"max_episode_steps=300\s+agents=1 simultaneous deterministic", lines["GridWorld-v0"])
    about = {row.split()[0]: nxt for row, nxt in zip(rows, rows[1:]) if nxt.startswith("    ")}
    assert about["GridWorld-v0"] == "    Reach the target on a square grid (Gymnasium's custom-environment tutorial)."
    assert about["TicTacToe-v0"].endswith("(PettingZoo's tictactoe_v3).")  # no reST markup in a terminal
    if "gymnax/CartPole-v1" in lines:  # gymnax installed (the newest stack's venv may leave it out)
        assert about["gymnax/CartPole-v1"] == "    gymnax: JAX implementation of CartPole-v1 OpenAI gym environment."


def test_describe(run):
    p = run("describe", "GridWorld")  # unversioned: the latest version
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("GridWorld-v0  (jaxenvs.envs.grid_world.GridWorld)")
    for line in ("action_space:      Discrete(4)", "param size = 5", "trait chance: deterministic",
                 "max_episode_steps: 300", "    0 = right (x+1)", "    1 = up (y+1: down on screen)"):
        assert line in p.stdout
    assert "dynamics" not in p.stdout and "  agents: " not in p.stdout  # single-agent


def test_describe_spaces_actions_and_multi_agent_traits():
    from jaxenvs.cli import describe_env

    point = describe_env("PointEnv-v0")
    assert "action_space:      Box(-0.1, 0.1, (2,), float32)" in point
    assert "observation_space: Box(-inf, inf, (2,), float32)" in point
    assert "dynamics" not in point and " = " not in point.split("action_space")[1].split("param")[0]
    rps = describe_env("RockPaperScissors-v0").splitlines()
    i = rps.index("  action_space:      Discrete(3) (per agent)")
    assert rps[i + 1 : i + 4] == ["    0 = Rock", "    1 = Paper", "    2 = Scissors"]
    assert "  trait dynamics: simultaneous" in rps and "  agents: ('0', '1')" in rps
    lottery = describe_env("Lottery-v0")
    assert "    0 = PowerRich\n    1 = MegaHaul\n    2 = NoTicket" in lottery
    assert "    0 = RUN\n    1 = JUMP" in describe_env("HurdleRace-v0")
    # the action names follow the dynamics: action 1 ("up") adds 1 to y, which the picture draws lower
    from jaxenvs.envs.grid_world import ACTION_TO_DIRECTION

    assert ACTION_TO_DIRECTION.tolist() == [[1, 0], [0, 1], [-1, 0], [0, -1]]


def test_play_text_matches_an_in_process_rollout(run):
    p = run("play", "GridWorld-v0", "--episodes", "2", "--seed", "1", "--render", "text", "-k", "size=3")
    assert p.returncode == 0, p.stderr
    found = EPISODE_RE.findall(p.stdout)
    assert [f[0] for f in found] == ["1", "2"]
    # the same rollout in-process: each of 2 parallel non-resetting envs plays its first episode
    env = jaxenvs.make("GridWorld-v0", autoreset=False, size=3)
    traj = rollout(env, jax.random.key(1), random_policy(env), 300, num_envs=2, record_states=False)
    firsts = [e for e in episode_stats(traj, include_unfinished=True) if e.start == 0]
    assert [(f"return {e.returns:.3f}", str(e.length), e.outcome) for e in firsts] == [f[1:] for f in found]
    # one 3x3 picture per state, from the first state to the one the episode ended in
    for i, ep in enumerate(firsts, 1):
        pictures = re.findall(rf"^--- episode {i}, t=\d+\n((?:[.AT]{{3}}\n){{3}})", p.stdout, re.M)
        assert len(pictures) == ep.length + 1
        assert pictures[0].count("A") == 1 and pictures[0].count("T") == 1
        if ep.outcome == "terminated":
            assert "T" not in pictures[-1]  # the agent stands on the target
    assert re.search(r"^2 episodes: mean return [\d.]+, mean length [\d.]+$", p.stdout, re.M)
    # the boards come first, then what came of them
    assert p.stdout.rindex("--- episode 2, t=") < p.stdout.index("episode 1: return")


def test_play_refuses_a_render_mode_the_env_lacks_before_playing(run):
    require("gymnax")  # gymnax's envs have no text rendering
    p = run("play", "gymnax/CartPole-v1", "--render", "text")
    assert p.returncode == 1 and p.stdout == "", p.stdout  # nothing played, nothing printed
    # gymnax's envs draw no frames either: no other --render is suggested
    assert p.stderr == ("jaxenvs: error: --render text: gymnax/CartPole-v1 cannot draw that way (GymnaxEnv has no "
                        "render_text()); leave --render out\n")


def test_play_multi_agent_gif(tmp_path, run):
    path = tmp_path / "race.gif"
    p = run("play", "--render", "gif", "--out", str(path), "HurdleRace-v0", "--episodes", "3")
    assert p.returncode == 0, p.stderr
    found = EPISODE_RE.findall(p.stdout)
    assert len(found) == 3
    total = 0
    for _, returns, length, outcome in found:
        r = dict(kv.split("=") for kv in returns.removeprefix("returns ").split())
        assert set(r) == {"0", "1"} and float(r["0"]) == -float(r["1"])  # zero-sum, per agent
        assert outcome in ("terminated", "truncated")
        total += int(length) + 1  # every state of the episode, the final one included
    assert f"saved {total} frames to {path}" in p.stdout
    frames = iio.imread(path, index=None)
    durations = [iio.immeta(path, index=i)["duration"] for i in range(len(frames))]
    assert sum(durations) == total * 250  # HurdleRace renders at 4 fps
    assert frames.dtype == np.uint8 and frames.shape[-1] == 3


def test_check_passes_on_grid_world(run):
    from jaxenvs.checker import RULES

    p = run("check", "GridWorld-v0", "--steps", "10", "--num-envs", "2")
    assert p.returncode == 0, p.stderr
    expected = (
        r"GridWorld-v0: passed (\d+) rules \(2 envs x 10 random steps: \d+ terminated, \d+ truncated\)\n"
        r"  passed: (.+)\n  not applicable: (.+)\n"
    )
    m = re.fullmatch(expected, p.stdout)
    assert m, p.stdout
    passed, skipped = m.group(2).split(", "), m.group(3).split(", ")
    assert len(passed) == int(m.group(1)) and set(passed) | set(skipped) == set(RULES)
    # GridWorld is deterministic, has no legal-action mask, no turns and no chance nodes
    assert skipped == ["key-sensitivity", "mask-structure", "mask-autoreset", "current-player", "mask-mover",
                       "mask-step", "non-mover-ignored", "chance-outcomes", "apply-chance"]


def test_check_list_rules(capsys):
    from jaxenvs import checker
    from jaxenvs.checker import RULEBOOK, RULES

    assert main(["check", "--list-rules"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(RULES)
    assert all(len(line.split()) > 3 for line in lines)  # every rule says what it checks
    described = dict(re.match(r"(\S+)\s+(.*)", line).groups() for line in lines)
    assert described == {r.id: r.text for r in RULEBOOK.values()}  # the one list, read by the docstring and the docs too
    assert all(f"{rule}  " in checker.__doc__ for rule in RULES)


def test_docs_rule_table_reads_the_same_list():
    from jaxenvs.checker import RULEBOOK, RULES

    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parents[1] / "docs" / "gen_assets.py"
    spec = importlib.util.spec_from_file_location("gen_assets_for_test", path)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    rows = [line for line in gen.checker_rules_table().splitlines()[2:]]
    assert [row.split("`")[1] for row in rows] == list(RULES)
    assert all(RULEBOOK[row.split("`")[1]].text in row for row in rows)
    assert [row.endswith("| yes |") for row in rows] == [r.skippable for r in RULEBOOK.values()]


def test_bench_fills_the_compilation_cache(run, tmp_path):
    cache = tmp_path / "cache"
    p = run("bench", "--num-envs", "8", "--steps", "20", "--repeats", "2",  # no ID: GridWorld-v0
            env={"JAXENVS_CACHE_DIR": str(cache), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"})
    assert p.returncode == 0, p.stderr
    assert any(cache.iterdir())  # the command line keeps its compiled programs
    assert "no ID given: timing GridWorld-v0" in p.stdout
    assert "GridWorld-v0: 8 envs x 20 steps" in p.stdout
    assert re.search(r"^compile: [\d.]+ s \(excluded\)$", p.stdout, re.M)
    m = re.search(r"^([\d,]+) steps/s$", p.stdout, re.M)
    assert m and int(m.group(1).replace(",", "")) > 0


def test_unknown_id_in_a_process(run):
    p = run("play", "GridWrold-v0")
    assert p.returncode == 2
    assert "no environment registered as 'GridWrold-v0'; did you mean 'GridWorld-v0'?" in one_error_line(p.stderr)


# ---- user mistakes, in-process -----------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, status, message",
    [
        ([], 2, "the following arguments are required: COMMAND"),
        (["frob"], 2, "invalid choice: 'frob'"),
        (["train", "GridWorld-v0", "--num-envs", "4"], 2,
         "training is its own command, jaxenvs-train: run jaxenvs-train --env GridWorld-v0 --num-envs 4 (see jaxenvs-train --help"),
        (["describe", "bad id!"], 2, "malformed environment id 'bad id!'"),
        (["play", "GridWorld-v0", "--episodes", "0"], 2, "argument --episodes: expected an integer >= 1, got '0'"),
        (["play", "GridWorld-v0", "--seed", "x"], 2, "argument --seed: expected an integer in [0, 2**63), got 'x'"),
        (["play", "GridWorld-v0", "--seed", str(10**23)], 2, f"argument --seed: expected an integer in [0, 2**63), got '{10**23}'"),
        (["bench", "GridWorld-v0", "--seed", str(2**63)], 2, "argument --seed: expected an integer in [0, 2**63)"),
        (["play", "GridWorld-v0", "--seed", "-1"], 2, "argument --seed: expected an integer in [0, 2**63), got '-1'"),
        (["play", "GridWorld-v0", "--policy", "greedy"], 2, "--policy takes random or a run directory of jaxenvs-train; 'greedy' is not a directory"),
        (["play", "GridWorld-v0", "--render", "avi", "--out", "x.avi"], 2, "argument --render: expected one of text, human, gif, mp4, got 'avi'"),
        (["play", "GridWorld-v0", "--render", "x.gif"], 2, "got 'x.gif'; write --render gif --out x.gif"),
        (["play", "GridWorld-v0", "--render", "gif"], 2, "--render gif needs --out PATH (a file ending in .gif)"),
        (["play", "GridWorld-v0", "--out", "x.gif"], 2, "--out is for --render gif or --render mp4"),
        (["play", "GridWorld-v0", "--render", "gif", "--out", "x.png"], 2, "--render gif needs a path ending in .gif, got --out 'x.png'"),
        (["play", "GridWorld-v0", "--render", "gif", "x.gif"], 2, "unrecognized arguments: x.gif"),  # the path goes after --out
        (["play", "GridWorld-v0", "--render", "gif", "--out", "x.mp4"], 2, "--render gif needs a path ending in .gif"),
        (["play", "GridWorld-v0", "--render", "gif", "--out", "/no/such/dir/x.gif"], 2, "--out: cannot save a video as '/no/such/dir/x.gif': folder '/no/such/dir' does not exist"),
        # a folder that exists but cannot take a file (even for root): refused before playing
        (["play", "GridWorld-v0", "--render", "gif", "--out", "/proc/x.gif"], 2, "--out: cannot save a video as '/proc/x.gif': No such file or directory"),
        (["play", "GridWorld-v0", "--fps", "inf"], 2, "argument --fps: expected a finite number > 0, got 'inf'"),
        (["play", "GridWorld-v0", "--fps", "nan"], 2, "argument --fps: expected a finite number > 0, got 'nan'"),
        (["play", "GridWorld-v0", "--fps", "-2"], 2, "argument --fps: expected a finite number > 0, got '-2'"),
        (["play"], 2, "play needs an environment ID, or --policy RUN_DIR to play a trained run"),
        (["play", "GridWorld-v0", "--sample"], 2, "--sample and --run-seed are for a trained policy"),
        (["check"], 2, "check needs an environment ID (or --list-rules)"),
        (["check", "no.such.mod:Foo-v0"], 2, "could not import module 'no.such.mod' named in the environment id"),
        (["describe", "Foo-v0"], 2, "no environment registered as 'Foo-v0'; registered: ['ConnectFour-v0', 'GridWorld-v0',"),
        (["describe", "gridworld-v0"], 2, "no environment registered as 'gridworld-v0'; did you mean 'GridWorld-v0'?"),
        (["play", "GridWorld-v0", "-k", "size=1"], 2, "GridWorld size must be an integer in [2, 46340], got 1"),
        (["play", "GridWorld-v0", "-k", "colour=1"], 2, "got unknown keyword argument(s) ['colour']; valid:"),
        (["play", "GridWorld-v0", "-k", "size"], 2, "argument --kwarg/-k: expected NAME=VALUE, got 'size'"),
        (["bench", "GridWorld-v0", "--num-envs", "-3"], 2, "argument --num-envs: expected an integer >= 1"),
        (["check", "GridWorld-v0", "--steps", "2"], 2, "check_env needs num_steps as an int >= 3, got 2"),
    ],
)
def test_user_mistakes(argv, status, message, capsys):
    assert main(argv) == status
    out, err = capsys.readouterr()
    assert message in one_error_line(err)
    assert out == ""


def test_out_naming_a_folder(tmp_path, capsys):
    (tmp_path / "x.gif").mkdir()
    for out in (tmp_path, tmp_path / "x.gif"):
        assert main(["play", "GridWorld-v0", "--render", "gif", "--out", str(out)]) == 2
        assert "--out" in one_error_line(capsys.readouterr().err)


def test_missing_extras_and_display(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # as if not installed
    assert main(["play", "GridWorld-v0", "--render", "mp4", "--out", str(tmp_path / "a.mp4")]) == 1
    err = capsys.readouterr().err
    assert (
        "saving an MP4 (or save a .gif) needs 'imageio_ffmpeg', which is not installed: "
        'pip install "jaxenvs[render]"' in one_error_line(err)
    )
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    assert main(["play", "Lottery-v0", "--render", "human", "--max-steps", "3"]) == 1
    out, err = capsys.readouterr()
    assert "no display to open a window on" in one_error_line(err)
    assert len(EPISODE_RE.findall(out)) == 1  # the episode ran and was reported first


class IntRewardGridWorld(GridWorld):
    """Breaks the contract: an int32 reward."""

    def step_env(self, key, state, action, params):
        obs, state, reward, terminated, truncated, info = super().step_env(key, state, action, params)
        return obs, state, reward.astype(jnp.int32), terminated, truncated, info


def test_check_failure_exits_1_with_the_rule(monkeypatch, capsys):
    monkeypatch.setitem(
        jaxenvs.registry, "test/IntReward-v0", jaxenvs.EnvSpec("test/IntReward-v0", IntRewardGridWorld, 20)
    )
    assert main(["check", "test/IntReward-v0", "--steps", "5", "--num-envs", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("jaxenvs check: test/IntReward-v0 FAILED [") and "reward" in err and "int32" in err
    assert "Traceback" not in err


def test_version_and_help(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"jaxenvs {jaxenvs.__version__}"
    assert main(["play", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--render MODE 'text' (print each state)" in out and "[MODE ...]" not in out
    assert "episodes to run (default: 1, or 4 with --render gif/mp4)" in out and "(default: random)" in out  # defaults shown


def test_top_level_help_and_train_point_to_jaxenvs_train(capsys):
    assert main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Training is its own command: jaxenvs-train (e.g. jaxenvs-train --env GridWorld-v0; jaxenvs-train --help)" in out
    # the command line the pointer prints is one jaxenvs-train accepts
    from jaxenvs.train.app.parser import parse_args

    assert main(["train", "PointEnv-v0", "--total-timesteps", "64"]) == 2
    err = capsys.readouterr().err
    suggested = err.split("run jaxenvs-train ", 1)[1].split(" (see", 1)[0].split()
    args = parse_args(suggested)
    assert (args.env_id, args.total_timesteps) == ("PointEnv-v0", 64)


def test_play_reports_unfinished_episodes(capsys):
    # no time limit: the episode is cut at --max-steps and reported as unfinished
    argv = ["play", "PointEnv-v0", "-k", "max_episode_steps=None", "--max-steps", "3", "--episodes", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    pattern = r"^episode \d: return -[\d.]+  length 3  unfinished \(stopped after 3 steps; raise --max-steps\)$"
    lines = re.findall(pattern, out, re.M)
    assert len(lines) == 2, out


# ---- playing a trained run ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained_grid_world(tmp_path_factory):
    """A run directory as python -m jaxenvs.train writes it (config.json + checkpoint.msgpack) of
    PPO trained on a 3x3 GridWorld for 4,096 env steps: enough to walk straight to the target."""
    from jaxenvs.train.configs import get_config

    config = get_config(
        "GridWorld-v0", env_kwargs={"size": 3}, total_timesteps=4096, num_envs=16, num_steps=16, lr=3e-3,
        hidden_sizes=(32, 32),
    )
    return tiny_run_dir(tmp_path_factory.mktemp("runs"), "GridWorld-v0-tiny", config)


CHECKPOINT_NAME = "checkpoint.msgpack"


def test_play_a_trained_run_reaches_the_target_in_the_fewest_steps(trained_grid_world, tmp_path, monkeypatch, capsys):
    import jaxenvs.cli.play as cli  # play_episodes as the play command calls it

    played = []

    def recording(*a, **k):  # the episodes and states the command renders
        played.append(cli.play_episodes.__wrapped__(*a, **k))
        return played[-1]

    recording.__wrapped__ = cli.play_episodes
    monkeypatch.setattr(cli, "play_episodes", recording)
    path = tmp_path / "trained.gif"
    # no ID: the run's environment and env kwargs (a 3x3 grid)
    assert main(["play", "--policy", str(trained_grid_world), "--episodes", "8", "--seed", "3",
                 "--render", "gif", "--out", str(path), "--no-legend"]) == 0  # the frames alone (no captions)
    out = capsys.readouterr().out
    assert out.startswith(f"GridWorld-v0: greedy policy of {trained_grid_world} (seed 0)\n")
    (episodes, states), = played
    assert len(episodes) == 8
    env = jaxenvs.make("GridWorld-v0", autoreset=False, size=3)
    total = 0
    for ep, s in zip(episodes, states):
        s = env.unwrapped_state(s)
        agent, target = np.asarray(s.agent), np.asarray(s.target)
        assert agent.shape == (ep.length + 1, 2) and (agent <= 2).all()  # the run's 3x3 grid
        assert ep.outcome == "terminated" and ep.returns == 1.0
        assert (agent[-1] == target[-1]).all() and not (agent[:-1] == target[:-1]).all(axis=1).any()
        # the optimal number of steps: the Manhattan distance from the start, one cell per step
        assert ep.length == np.abs(agent[0] - target[0]).sum()
        assert (np.abs(np.diff(agent, axis=0)).sum(axis=1) == 1).all()
        total += ep.length + 1
    # the GIF holds exactly those states: GridWorld frames have 4 colours, which GIF keeps exactly
    frames = iio.imread(path, index=None)
    stacked = jax.tree.map(lambda *xs: np.concatenate(xs), *states)
    expected = render_frames(env, stacked)
    durations = [iio.immeta(path, index=i)["duration"] for i in range(len(frames))]
    assert sum(durations) == total * 250 and f"saved {total} frames to {path}" in out
    # identical consecutive frames are stored once: compare after dropping repeats
    keep = np.r_[True, (expected[1:] != expected[:-1]).any(axis=(1, 2, 3))]
    np.testing.assert_array_equal(frames, expected[keep])


def test_video_captions_mark_each_episode_and_its_end():
    from types import SimpleNamespace

    from jaxenvs.cli.play import _episode_captions

    eps = [SimpleNamespace(outcome="terminated", length=2), SimpleNamespace(outcome="truncated", length=1)]
    states = [{"x": np.zeros(3)}, {"x": np.zeros(2)}]
    assert _episode_captions(eps, states, 2) == [
        "episode 1/2, step 0", "episode 1/2, step 1", "episode 1/2, step 2: terminated, 2 steps",
        "episode 2/2, step 0", "episode 2/2, step 1: truncated, 1 steps",
    ]


def test_play_a_trained_run_mistakes(trained_grid_world, tmp_path, capsys):
    run = str(trained_grid_world)
    assert main(["play", "PointEnv-v0", "--policy", run]) == 2
    assert f"the run in {run!r} was trained on GridWorld-v0, not PointEnv-v0" in one_error_line(capsys.readouterr().err)
    assert main(["play", run, "--policy", run]) == 2
    assert "give the run either as ID or as --policy, not both" in one_error_line(capsys.readouterr().err)
    assert main(["play", "--policy", run, "--run-seed", "3"]) == 2
    assert f"--run-seed 3: the run in {run!r} has 1 seed(s), 0 to 0" in one_error_line(capsys.readouterr().err)
    assert main(["play", "--policy", str(tmp_path)]) == 2
    assert "has no config.json or checkpoint.msgpack" in one_error_line(capsys.readouterr().err)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((trained_grid_world / "config.json").read_text())
    (broken / CHECKPOINT_NAME).write_bytes(b"not a checkpoint")
    assert main(["play", "--policy", str(broken)]) == 1
    assert f"cannot load the run in {str(broken)!r}" in one_error_line(capsys.readouterr().err)


def test_a_run_directory_as_id_is_the_policy(trained_grid_world, tmp_path):
    from jaxenvs.cli import build_parser
    from jaxenvs.cli.play import _run_dir_as_id

    args = build_parser().parse_args(["play", str(trained_grid_world), "--render", "human"])
    _run_dir_as_id(args)
    assert (args.policy, args.env_id) == (str(trained_grid_world), None)
    args = build_parser().parse_args(["play", "GridWorld-v0"])  # an id stays an id
    _run_dir_as_id(args)
    assert (args.policy, args.env_id) == ("random", "GridWorld-v0")


def test_play_a_trained_run_without_the_train_extra(trained_grid_world, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "jaxenvs.train.checkpoint", None)  # as if flax were missing
    assert main(["play", "--policy", str(trained_grid_world)]) == 1
    err = one_error_line(capsys.readouterr().err)
    assert "playing a trained run needs the train extra" in err and err.endswith("pip install 'jaxenvs[train]'")


def test_gloo_banner_filter_keeps_everything_else():
    from jaxenvs.train.app.stdout_filter import filter_lines

    banner = b"[Gloo] Rank 1 is connected to 7 peer ranks. Expected number of connected peer ranks is : 7\n"
    out, rest = filter_lines(b"steps 10/20\r" + banner + b"done\n[Gl")
    assert (out, rest) == (b"steps 10/20\rdone\n", b"[Gl")
    out, rest = filter_lines(rest + banner[3:] + b"eta 5s\r")
    assert (out, rest) == (b"eta 5s\r", b"")  # a progress line without newline goes out at once
    assert filter_lines(b"[Gloo] other news\n") == (b"[Gloo] other news\n", b"")
    assert filter_lines(b"[Gloo] Rank 0", final=True) == (b"[Gloo] Rank 0", b"")
    assert filter_lines(banner.rstrip(b"\n"), final=True) == (b"", b"")


# ---- benchmarks/steps_per_sec.py's command line ------------------------------------------------
@pytest.fixture(scope="module")
def steps_per_sec():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "steps_per_sec.py"
    spec = importlib.util.spec_from_file_location("steps_per_sec_cli", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_steps_per_sec_options_show_defaults_and_keep_the_committed_results(steps_per_sec, capsys):
    parser = steps_per_sec.build_parser()
    options = [a for a in parser._actions if a.option_strings and a.dest != "help"]
    help_text = " ".join(parser.format_help().split())
    for a in options:
        assert a.help, a.dest
        assert " ".join(a.help.split()) + " (default: " in help_text
    assert help_text.count("(default: ") == len(options)
    # by default the results go to an untracked folder, never over the committed ones
    out = parser.get_default("out")
    assert Path(out).parts[0] == "runs" and out != steps_per_sec.COMMITTED
    ignored = subprocess.run(["git", "check-ignore", "-q", out + ".json"], cwd=Path(__file__).resolve().parents[1])
    assert ignored.returncode == 0  # gitignored
    # a partial run may not replace the committed full results: refused before any timing
    with pytest.raises(SystemExit) as e:
        steps_per_sec.main(["--envs", "GridWorld-v0", "--out", steps_per_sec.COMMITTED + ".json"])
    assert e.value.code == 2
    assert "only --full (with its own --envs and --num-envs, no --devices) may replace the committed full results" in (
        " ".join(capsys.readouterr().err.split()))
    with pytest.raises(SystemExit):
        steps_per_sec.main(["--num-envs", "0"])
    assert "expected an integer >= 1, got '0'" in capsys.readouterr().err


def test_steps_per_sec_ratios_are_paired_per_round(steps_per_sec):
    """The ratio against the lean loop is the median of per-round ratios, not the ratio of the
    medians: a round in which the machine was slow for both programs cancels out."""
    timings = {"lean JAX": (0.1, [1.0, 4.0, 2.0]), "jaxenvs vmap": (0.2, [2.0, 8.0, 2.5])}
    # per round 0.5, 0.5, 0.8 -> median 0.5 (the ratio of the medians would be 2.0 / 2.5 = 0.8)
    assert steps_per_sec.paired_ratios(timings, "lean JAX") == {"jaxenvs vmap": 0.5}
    # the timing itself: every program once per round, compiled apart
    calls = []

    def program(tag):
        def run(key):
            calls.append(tag)  # runs when traced: once per program
            return jax.random.uniform(key)
        return run

    out = steps_per_sec.time_in_turn({"a": program("a"), "b": program("b")}, rounds=3)
    assert sorted(calls) == ["a", "b"]
    assert set(out) == {"a", "b"}
    for compile_s, times in out.values():
        assert compile_s > 0 and len(times) == 3 and all(t > 0 for t in times)


def test_steps_per_sec_plot_keeps_one_colour_per_method(steps_per_sec):
    methods = ["jaxenvs vmap", "jaxenvs VectorEnv", "lean JAX", "python loop", "gymnasium SyncVectorEnv"]
    rows = [
        {"env": env, "method": m, "num_envs": n, "steps_per_sec": 1e3 * n * (i + 1), "compile_s": None}
        for env, ms in (("GridWorld-v0", methods), ("Lottery-v0", methods[1:2] + methods[3:4]),
                        ("PointEnv-v0", methods[:2] + methods[3:]))
        for i, m in enumerate(ms) for n in (1, 64)
    ]
    fig = steps_per_sec.plot(rows, "cpu")
    seen = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            seen.setdefault(line.get_label(), set()).add(line.get_color())
    assert set(seen) == set(methods) and all(len(c) == 1 for c in seen.values())  # same colour in every panel
    assert len({c for cs in seen.values() for c in cs}) == len(methods)  # and distinct methods differ
    assert [t.get_text() for t in fig.legends[0].get_texts()] == methods
    scaling = steps_per_sec.method_colors(["jaxenvs vmap, 4 devices", "jaxenvs vmap, 1 devices", "python loop"])
    assert len(set(scaling.values())) == 3 and scaling["python loop"] == steps_per_sec.METHOD_COLORS["python loop"]


def test_compilation_cache_folder(monkeypatch, tmp_path):
    from jaxenvs import _cache

    before = jax.config.jax_compilation_cache_dir
    min_time = jax.config.jax_persistent_cache_min_compile_time_secs
    try:
        jax.config.update("jax_compilation_cache_dir", None)
        monkeypatch.delenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", raising=False)
        monkeypatch.setenv("JAXENVS_CACHE_DIR", str(tmp_path / "c"))
        assert _cache.enable_compilation_cache() == tmp_path / "c" and (tmp_path / "c").is_dir()
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "c")
        assert jax.config.jax_persistent_cache_min_compile_time_secs == _cache.MIN_COMPILE_S
        jax.config.update("jax_compilation_cache_dir", None)
        for off in ("off", "", "0"):
            monkeypatch.setenv("JAXENVS_CACHE_DIR", off)
            assert _cache.cache_dir() is None and _cache.enable_compilation_cache() is None
        monkeypatch.delenv("JAXENVS_CACHE_DIR")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert _cache.cache_dir() == tmp_path / "xdg" / "jaxenvs" / "jax"  # per user
        (tmp_path / "file").write_text("")
        monkeypatch.setenv("JAXENVS_CACHE_DIR", str(tmp_path / "file" / "sub"))
        assert _cache.enable_compilation_cache() is None  # cannot be created: off, the command still runs
        assert jax.config.jax_compilation_cache_dir is None
        jax.config.update("jax_compilation_cache_dir", str(tmp_path / "mine"))
        assert _cache.enable_compilation_cache() == tmp_path / "mine"  # an explicit setting wins
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", min_time)


def test_module_id_imports_a_module_from_the_current_directory(tmp_path, monkeypatch, capsys):
    # a console script (unlike python -m) does not put the current directory on sys.path
    (tmp_path / "cli_custom_envs.py").write_text(
        "import jaxenvs\n"
        "from jaxenvs.envs.grid_world import GridWorld\n"
        "jaxenvs.register('clicustom/Grid-v0', GridWorld, max_episode_steps=9)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path), ".")])
    monkeypatch.delitem(jaxenvs.registry, "clicustom/Grid-v0", raising=False)
    try:
        assert main(["describe", "cli_custom_envs:clicustom/Grid-v0"]) == 0
        assert "clicustom/Grid-v0" in capsys.readouterr().out
    finally:
        jaxenvs.registry.pop("clicustom/Grid-v0", None)
        sys.modules.pop("cli_custom_envs", None)
    assert main(["describe", "no_such_module_here:clicustom/Grid-v0"]) == 2
    err = one_error_line(capsys.readouterr().err)
    assert "could not import module 'no_such_module_here' named in the environment id 'no_such_module_here:clicustom/Grid-v0'" in err
    assert main(["describe", "Nowhere-v0"]) == 2
    assert "(an environment of your own: 'my_module:Nowhere-v0' imports my_module first" in capsys.readouterr().err


def test_check_help_mentions_no_policy_option(capsys):
    assert main(["check", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--policy" not in out and "module:id" in out
    assert main(["play", "--help"]) == 0
    assert "--policy" in capsys.readouterr().out


@pytest.mark.parametrize("command", [["bench"], ["profile", "GridWorld-v0", "--no-plot", "--no-wrappers"]])
def test_a_batch_too_large_for_memory_is_a_usage_error(command, tmp_path, capsys):
    from jaxenvs.cli import main

    argv = command + ["--num-envs", "2147483647", "--steps", "16"]
    status = main(argv + (["--out", str(tmp_path)] if command[0] == "profile" else []))
    out, err = capsys.readouterr()
    assert status == 2
    assert "--num-envs 2147483647: the batch does not fit in the memory of the cpu device" in one_error_line(err)
    if command[0] == "profile":  # says where its files go before it starts
        assert f"writing profile_GridWorld-v0.json into {tmp_path.resolve()}" in out
