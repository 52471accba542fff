"""verify_port on a stochastic env with no transition table (the slippery corridor of
tests/reference_envs.py, ported in benchmarks/verify_power.py): the pooled transition
statistics and the from-state tier pass the faithful port within a budget, A/A runs do not
fail, planted bugs fail, and a budget too small says what it certified and what would do; the
gymnax CartPole port against Gymnasium's with the shipped state mapping; `jaxenvs verify` with
OpenSpiel and broken references. The measured false-alarm and catch rates over many seeds are
benchmarks/verify_power.py's (benchmarks/results/verify_power.md)."""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest
from helpers import require

require("gymnasium")
require("scipy")

import jaxenvs  # noqa: E402
from jaxenvs.testing import PortMismatch, verify_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if "verify_power" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("verify_power", os.path.join(ROOT, "benchmarks", "verify_power.py"))
    sys.modules["verify_power"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["verify_power"])
V = sys.modules["verify_power"]
PORT = V.corridor()
FAST = dict(detect=0.1, detect_local=0.2, coverage=0.05, budget_s=30.0, raise_inconclusive=False)


@pytest.mark.parametrize("with_state", [False, True], ids=["sample tier", "from-state tier"])
def test_faithful_stochastic_port_passes_within_the_budget(with_state):
    kwargs = {"state_to_jax": V.corridor_state} if with_state else {}
    r = verify_port(PORT, V.corridor_reference, seed=1, **FAST, **kwargs)
    assert r.verdict == "pass", str(r)
    names = {s.name: s for s in r.statistics}
    pooled = names["next observation, terminated | (observation, action)"]
    assert pooled.required and pooled.effect == "weighted tv" and pooled.detectable <= 0.1
    assert not names["episode length"].required  # the transitions certify the episodes' behaviour
    if with_state:
        fs = names["from reference states (rank of the reference's outcome)"]
        assert fs.tier == "from-state" and fs.n_reference > 1000 and fs.p_value >= r.threshold
    assert r.budget_s == 30.0 and any(n.startswith("budget: 30 CPU s") for n in r.notes)


def test_port_against_itself_does_not_fail():
    """A/A: the port against itself through the Gymnasium adapter (a slow reference: one seed,
    few episodes; the rate over seeds is benchmarks/verify_power.py's)."""
    r = verify_port(PORT, V.corridor_as_gymnasium, num_episodes=300, detect=0.2, budget_s=10.0, raise_inconclusive=False)
    assert r.verdict != "fail", str(r)


@pytest.mark.parametrize(
    "params,detect",
    [({"step_cost": 0.11}, 0.02), ({"bug_cell": 4, "bug_slip": 0.8}, 0.1)],
    ids=["step cost 0.01 off", "local bug in cell 4"],
)
def test_stochastic_mutants_fail(params, detect):
    with pytest.raises(PortMismatch, match=r"\| \(observation, action\)"):
        verify_port(V.corridor(**params), V.corridor_reference, detect=detect, budget_s=30.0)


def test_a_short_budget_states_what_it_certified_and_what_would_do():
    # the programs compiled first (a compile counts against the budget like any other work)
    verify_port(PORT, V.corridor_reference, num_episodes=200, max_episodes=200, raise_inconclusive=False)
    r = verify_port(PORT, V.corridor_reference, num_episodes=200, budget_s=0.5, raise_inconclusive=False)
    # the first round's 200 episodes always run; a fast CPU fits a part of the next round in 0.5 s
    # (a quiet 2-core machine reached 300), never what detect=0.02 needs (about 32,000)
    assert r.verdict == "inconclusive" and 200 <= r.num_episodes < r.episodes_needed
    assert any(n.startswith("budget: 0.5 CPU s") and n.endswith(f"{r.num_episodes:,} episodes a side") for n in r.notes)
    pooled = next(s for s in r.statistics if s.effect == "weighted tv" and s.detectable > r.detect)
    assert pooled.needed.startswith("needs about")
    assert r.budget_needed_s and r.budget_needed_s > 0.5
    assert any("the budget that would certify detect=0.02" in n for n in r.notes)


def test_budget_is_checked():
    with pytest.raises(ValueError, match="budget_s as a number of seconds > 0"):
        verify_port(PORT, V.corridor_reference, budget_s=0)


def test_old_gym_references_are_named():
    import gymnasium

    class OldGym(gymnasium.Env):
        observation_space = gymnasium.spaces.Discrete(7)
        action_space = gymnasium.spaces.Discrete(2)

        def reset(self):
            return 3

    with pytest.raises(ValueError, match="old gym API"):
        verify_port(PORT, OldGym, num_episodes=20)


# ---- budgets are budgets: CPU work, not wall time; stopped mid-round; one factory call ----------


class _Steps:
    """A reference factory counting its calls and every step its envs take (the corridor)."""

    def __init__(self):
        self.calls, self.steps = 0, 0

    def __call__(self):
        import gymnasium

        counter = self
        self.calls += 1

        class Counted(gymnasium.Wrapper):
            def step(self, action):
                counter.steps += 1
                return super().step(action)

        return Counted(V.corridor_reference())


def _work_clocks(monkeypatch, ref: _Steps, step_s: float, busy: float):
    """The budget's CPU clock reads `step_s` per reference step taken (a reference that costs
    `step_s` of CPU a step, and nothing else costs); the wall clock runs `busy` times as fast (a
    loaded machine)."""
    from jaxenvs.testing import runs

    monkeypatch.setattr(runs, "cpu_clock", lambda: ref.steps * step_s)
    monkeypatch.setattr(runs, "wall_clock", lambda: busy * ref.steps * step_s)
    monkeypatch.setattr(runs, "CHECK_EVERY_S", 0.0)  # every check reads the (patched) clocks


@pytest.mark.parametrize("busy", [1.0, 2.5], ids=["quiet", "busy"])
def test_a_slow_reference_stops_at_its_budget_mid_round(monkeypatch, busy):
    """10 ms of CPU a reference step under budget_s=5: about 500 steps, then the run stops inside
    its first round and keeps the episodes both sides completed; the same on a busy machine
    (wall time 2.5x the CPU time): the budget counts CPU work."""
    from jaxenvs.testing.reference import CHUNK

    ref = _Steps()
    _work_clocks(monkeypatch, ref, 0.01, busy)
    r = verify_port(PORT, ref, num_episodes=1000, budget_s=5.0, raise_inconclusive=False)
    assert ref.calls == 1  # the side-by-side envs are copies of the factory's one env
    assert 500 <= ref.steps <= 500 + CHUNK  # at most one lockstep step of one chunk past the budget
    assert r.verdict == "inconclusive" and 16 <= r.num_episodes < 1000
    note = next(n for n in r.notes if "stopped: the budget ended during episodes" in n)
    assert f"kept {r.num_episodes:,} of 1,000" in note
    assert any(n.startswith("budget: 5 CPU s") and n.endswith(f"{r.num_episodes:,} episodes a side") for n in r.notes)
    assert all(s.n_reference <= r.num_episodes * 50 for s in r.statistics)
    ids = [(s.name, s.n_port, s.n_reference, s.p_value) for s in r.statistics]
    if busy == 1.0:
        _QUIET.append((r.num_episodes, ref.steps, ids))
    elif _QUIET:  # the same verdict, episodes and statistics as on the quiet machine
        assert _QUIET[0] == (r.num_episodes, ref.steps, ids)


_QUIET: list = []


def test_the_wall_clock_guard_stops_a_reference_that_waits(monkeypatch):
    """A reference that waits (no CPU) is stopped by the guard at WALL_FACTOR x budget_s of wall
    time: counted here as 10 ms of wall time a step and no CPU at all."""
    from jaxenvs.testing import runs

    ref = _Steps()
    monkeypatch.setattr(runs, "cpu_clock", lambda: 0.0)
    monkeypatch.setattr(runs, "wall_clock", lambda: ref.steps * 0.01)
    monkeypatch.setattr(runs, "CHECK_EVERY_S", 0.0)
    r = verify_port(PORT, ref, num_episodes=1000, budget_s=2.0, raise_inconclusive=False)
    limit = int(runs.WALL_FACTOR * 2.0 / 0.01)
    assert limit <= ref.steps <= limit + 256 and r.num_episodes < 1000 and ref.calls == 1


def test_the_factory_is_called_once_by_verify_and_a_repeated_flag_is_refused(tmp_path, monkeypatch, capsys):
    from jaxenvs.cli import main

    (tmp_path / "counted_refs.py").write_text(
        "import gymnasium\nCALLS = []\n"
        "def lottery():\n    import reference_envs\n    CALLS.append(1)\n    return reference_envs.LotteryEnv()\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(os.path.dirname(os.path.abspath(__file__)))
    args = ["verify", "Lottery-v0", "--reference", "counted_refs:lottery", "--episodes", "100", "--max-episodes", "100"]
    assert main(args) == 3
    import counted_refs

    assert counted_refs.CALLS == [1]
    capsys.readouterr()
    for repeated, flag in (
        (["--reference", "counted_refs:lottery", "--reference", "gymnasium:CartPole-v1"], "--reference"),
        (["--reference", "counted_refs:lottery", "--budget", "5", "--budget=9"], "--budget"),
        (["--reference", "counted_refs:lottery", "--detect", "0.1", "--detect", "0.1"], "--detect"),
    ):
        assert main(["verify", "Lottery-v0", *repeated]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"jaxenvs: error: argument {flag}: given more than once (")
        assert "it takes one value: give it once" in err
    assert counted_refs.CALLS == [1]  # refused before the reference was built
    # a repeatable flag still repeats
    from jaxenvs.cli import build_parser

    assert len(build_parser().parse_args(["check", "GridWorld-v0", "-k", "size=4", "--kwarg", "size=6"]).kwarg) == 2


def test_jaxenvs_train_refuses_a_repeated_flag(capsys):
    from jaxenvs.train.app.parser import parse_args

    for argv, shown in ((["--lr", "1e-3", "--lr", "3e-4"], "--lr"), (["--env", "GridWorld-v0", "--env-id", "PointEnv-v0"],
                                                                   "--env/--env-id"), (["--no-gif", "--no-gif"], "--no-gif")):
        with pytest.raises(SystemExit) as info:
            parse_args(argv)
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"jaxenvs-train: error: argument {shown}: given more than once")
    assert parse_args(["--lr", "1e-3"]).lr == 1e-3 and parse_args(["--lr", "2e-3"]).lr == 2e-3


def test_the_budget_flag_says_its_unit():
    from jaxenvs.cli.verify import arguments
    from jaxenvs.cli.args import Parser
    from jaxenvs.testing.runs import BUDGET_S, WALL_FACTOR

    p = Parser(prog="jaxenvs verify")
    arguments(p)
    text = " ".join(p.format_help().split())
    assert "CPU seconds of this process" in text and f"stops at {WALL_FACTOR:g} times" in text
    assert f"BUDGET_S, {BUDGET_S:g}" in text


# ---- gymnax classic control against Gymnasium --------------------------------------------------


def test_gymnax_cartpole_passes_with_the_shipped_mapping_and_a_force_change_fails():
    require("gymnax")
    from jaxenvs.adapters.gymnax_states import STATE_TO_JAX, reference

    kwargs = dict(state_to_jax=STATE_TO_JAX["CartPole-v1"], num_episodes=50, detect=0.1)
    r = verify_port(jaxenvs.make("gymnax/CartPole-v1"), reference("CartPole-v1"), **kwargs)
    assert r.verdict == "pass" and r.tiers[0] == "exact"
    with pytest.raises(PortMismatch, match="step from reference states|trajectory replay"):
        verify_port(jaxenvs.make("gymnax/CartPole-v1", force_mag=11.0), reference("CartPole-v1"), **kwargs)


# ---- jaxenvs verify --------------------------------------------------------------------------


def test_cli_verify_takes_openspiel_and_names_broken_references(tmp_path, monkeypatch, capsys):
    from jaxenvs.cli import main

    (tmp_path / "refs.py").write_text(
        "def raising():\n    raise RuntimeError('no such board')\n"
        "def nothing():\n    return None\n"
    )
    monkeypatch.chdir(tmp_path)
    for ref in ("refs:raising", "refs:nothing"):
        assert main(["verify", "GridWorld-v0", "--reference", ref]) == 2
        err = capsys.readouterr().err
        assert err.startswith("jaxenvs: error: ") and "Traceback" not in err and ("raised RuntimeError" in err or "None" in err)
    require("pyspiel")
    assert main(["verify", "KuhnPoker-v0", "--reference", "pyspiel:kuhn_poker", "--episodes", "60", "--detect", "0.05"]) == 0
    assert "verdict: PASS" in capsys.readouterr().out
    assert main(["verify", "KuhnPoker-v0", "--reference", "pyspiel:kuhn_poker", "--episodes", "20"]) == 3
    assert "verdict: INCONCLUSIVE" in capsys.readouterr().out


BLOCK_GYMNASIUM = """
import sys

class Missing:  # as if gymnasium were not installed: every import of it fails as Python's does
    def find_spec(self, name, path=None, target=None):
        if name == "gymnasium" or name.startswith("gymnasium."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Missing())
for name in [m for m in sys.modules if m == "gymnasium" or m.startswith("gymnasium.")]:
    del sys.modules[name]
from jaxenvs.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("ref", ["gymnasium:CartPole-v1", "reference_envs:make_corridor"])
def test_cli_verify_without_gymnasium_is_a_usage_error(ref):
    """No gymnasium installed: `jaxenvs verify` exits 2 with one line naming it, no traceback
    (the reference named by gymnasium id, and a factory whose module imports gymnasium)."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "tests") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, "-c", BLOCK_GYMNASIUM, "verify", "GridWorld-v0", "--reference", ref],
                       capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jaxenvs: error: "), p.stderr
    assert "No module named 'gymnasium'" in lines[0] and p.stdout == ""
    if ref.startswith("gymnasium:"):
        assert "pip install 'jaxenvs[verify,gymnasium]'" in lines[0]


def test_sides_are_kept_as_long_as_their_longest_episode():
    """A side is cut after its last live step and padded back (not alive) to be joined with a
    longer one: returns, outcomes and lengths do not change."""
    from jaxenvs.testing.reference import Side

    def side(lengths, horizon):
        n = len(lengths)
        alive = np.arange(horizon)[None] < np.asarray(lengths)[:, None]
        term = alive & (np.arange(horizon)[None] == np.asarray(lengths)[:, None] - 1)
        rew = np.where(alive, 1.0, 0.0)[..., None]
        z = np.zeros((n, horizon, 1))
        return Side(np.zeros((n, 1)), z, z, z, rew, term, np.zeros((n, horizon), bool), alive)

    a, b = side([1, 3], 1000), side([5], 1000)
    ta, tb = a.trimmed(), b.trimmed()
    assert ta.alive.shape == (2, 3) and tb.alive.shape == (1, 5) and side([0], 50).trimmed().alive.shape == (1, 1)
    joined = Side.concat([ta, tb])
    assert joined.alive.shape == (3, 5) and joined.obs.shape == (3, 5, 1)
    np.testing.assert_array_equal(joined.returns()[:, 0], [1, 3, 5])
    np.testing.assert_array_equal(joined.outcome(), [0, 0, 0])
    np.testing.assert_array_equal(joined.alive.sum(1), [1, 3, 5])
    assert joined.steps(1000).alive.shape == (3, 1000) and joined.steps(1000).alive.sum() == 9


def test_lexicographic_ranks_are_the_ranks_of_the_rows_in_that_order():
    """The from-state tier ranks whole discrete outcome rows in lexicographic order: on one
    column the same ranks as `ranks`; on two, the ranks of the rows' lexicographic labels; and
    uniform when the reference's outcome is one more draw (KS against uniform)."""
    from scipy.stats import kstest

    from jaxenvs.testing.from_state import lex_ranks, ranks

    rng = np.random.default_rng(0)
    p = rng.integers(0, 3, size=(400, 16, 2)).astype(np.float64)
    r = rng.integers(0, 3, size=(400, 2)).astype(np.float64)
    one = lex_ranks(p[:, :, :1], r[:, :1], np.random.default_rng(1))
    np.testing.assert_array_equal(one, ranks(p[:, :, 0], r[:, 0], np.random.default_rng(1)))
    labels = lambda x: x[..., 0] * 3 + x[..., 1]  # noqa: E731 -- lexicographic order of rows of values 0..2
    np.testing.assert_array_equal(lex_ranks(p, r, np.random.default_rng(2)),
                                  ranks(labels(p), labels(r), np.random.default_rng(2)))
    assert kstest(lex_ranks(p, r, np.random.default_rng(3)), "uniform").pvalue > 1e-3


def test_the_guard_clock_counts_waits_but_not_waiting_for_a_cpu():
    import time

    from jaxenvs.testing.runs import idle_wall_clock

    t0, w0 = idle_wall_clock(), time.perf_counter()
    time.sleep(0.2)
    waited, wall = idle_wall_clock() - t0, time.perf_counter() - w0
    assert 0.19 <= waited <= wall + 1e-6
