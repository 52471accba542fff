"""The ``jaxenvs`` command line: every command once through a real process (the console script or
``python -m jaxenvs``), and the user mistakes in-process through ``jaxenvs.cli.main``: one line
on stderr, exit status 2 for the command line and 1 for what lies outside it, no traceback."""

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
from jaxenvs.envs.grid_world import GridWorld
from jaxenvs.rollout import episode_stats, random_policy, rollout

SCRIPT = Path(sys.executable).parent / "jaxenvs"
EPISODE_RE = re.compile(r"^episode (\d+): (return [-\d.]+|returns .+?)  length (\d+)  (terminated|truncated)$", re.M)


def run(*args, script=False):
    cmd = [str(SCRIPT)] if script else [sys.executable, "-m", "jaxenvs"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=120)


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("jaxenvs: error: "), lines
    return lines[0]


# ---- every command through a process -----------------------------------------------------------
@pytest.mark.skipif(not SCRIPT.exists(), reason="the console script is not installed (pip install -e .)")
def test_list_through_console_script():
    p = run("list", script=True)
    assert p.returncode == 0, p.stderr
    lines = {line.split()[0]: line for line in p.stdout.strip().splitlines()}
    jaxenvs.registration.load_lazy_namespaces()  # as `jaxenvs list` does
    assert set(lines) == set(jaxenvs.registry)
    assert re.search(r"max_episode_steps=300\s+agents=1 simultaneous deterministic", lines["GridWorld-v0"])
    assert "terminal-reward minimal" in lines["GridWorld-v0"]


def test_describe():
    p = run("describe", "GridWorld")  # unversioned: the latest version
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("GridWorld-v0  (jaxenvs.envs.grid_world.GridWorld)")
    for line in ("action_space:      Discrete(4)", "param size = 5", "trait chance: deterministic",
                 "max_episode_steps: 300"):
        assert line in p.stdout


def test_play_text_matches_an_in_process_rollout():
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


def test_play_multi_agent_gif(tmp_path):
    path = tmp_path / "race.gif"
    p = run("play", "HurdleRace-v0", "--episodes", "3", "--render", "gif", str(path))
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


def test_check_passes_on_grid_world():
    p = run("check", "GridWorld-v0", "--steps", "10", "--num-envs", "2")
    assert p.returncode == 0, p.stderr
    expected = r"GridWorld-v0: passed \d+ rules \(2 envs x 10 random steps: \d+ terminated, \d+ truncated\)\n"
    assert re.fullmatch(expected, p.stdout), p.stdout


def test_bench():
    p = run("bench", "GridWorld-v0", "--num-envs", "8", "--steps", "20", "--repeats", "2")
    assert p.returncode == 0, p.stderr
    assert "GridWorld-v0: 8 envs x 20 steps" in p.stdout
    assert re.search(r"^compile: [\d.]+ s \(excluded\)$", p.stdout, re.M)
    m = re.search(r"^([\d,]+) steps/s$", p.stdout, re.M)
    assert m and int(m.group(1).replace(",", "")) > 0


def test_unknown_id_in_a_process():
    p = run("play", "GridWrold-v0")
    assert p.returncode == 2
    assert "no environment registered as 'GridWrold-v0'; did you mean 'GridWorld-v0'?" in one_error_line(p.stderr)


# ---- user mistakes, in-process -----------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, status, message",
    [
        ([], 2, "the following arguments are required: COMMAND"),
        (["frob"], 2, "invalid choice: 'frob'"),
        (["describe", "bad id!"], 2, "malformed environment id 'bad id!'"),
        (["play", "GridWorld-v0", "--episodes", "0"], 2, "argument --episodes: expected an integer >= 1, got '0'"),
        (["play", "GridWorld-v0", "--seed", "x"], 2, "argument --seed: invalid int value: 'x'"),
        (["play", "GridWorld-v0", "--policy", "greedy"], 2, "argument --policy: invalid choice: 'greedy'"),
        (["play", "GridWorld-v0", "--render", "avi", "x.avi"], 2, "--render takes 'text', 'human', 'gif PATH' or"),
        (["play", "GridWorld-v0", "--render", "gif"], 2, "--render takes"),
        (["play", "GridWorld-v0", "--render", "gif", "x.png"], 2, "unknown suffix '.png'; use one of .gif, .mp4"),
        (["play", "GridWorld-v0", "--render", "gif", "x.mp4"], 2, "--render gif needs a path ending in .gif"),
        (["play", "GridWorld-v0", "--render", "gif", "/no/such/dir/x.gif"], 1, "folder '/no/such/dir' does not exist"),
        (["play", "GridWorld-v0", "-k", "size=1"], 2, "GridWorld size must be an integer >= 2, got 1"),
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


def test_missing_extras_and_display(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # as if not installed
    assert main(["play", "GridWorld-v0", "--render", "mp4", str(tmp_path / "a.mp4")]) == 1
    err = capsys.readouterr().err
    assert "saving MP4 needs the imageio-ffmpeg package: pip install imageio-ffmpeg" in one_error_line(err)
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
    assert "--render MODE [MODE ...]" in capsys.readouterr().out


def test_play_reports_unfinished_episodes(capsys):
    # no time limit: the episode is cut at --max-steps and reported as unfinished
    argv = ["play", "PointEnv-v0", "-k", "max_episode_steps=None", "--max-steps", "3", "--episodes", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    pattern = r"^episode \d: return -[\d.]+  length 3  unfinished \(stopped after 3 steps; raise --max-steps\)$"
    lines = re.findall(pattern, out, re.M)
    assert len(lines) == 2, out
