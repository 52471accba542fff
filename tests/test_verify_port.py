"""jaxenvs.testing.verify_port: three verdicts with stated power, the exact and model tiers, the
certificate, the cache, and `jaxenvs verify`; assert_env_ok and assert_max_traces.

Ports: the FrozenLake-v1 and PointEnv ports of benchmarks/verify_power.py (model and exact tier)
and the built-in ports against tests/reference_envs.py (sample tier). Mutants must fail; faithful
ports pass where the tier can reach `detect`, and are inconclusive -- never passed -- where the
sample cannot. The statistics' own power is tested in tests/test_stats.py; the measured
false-alarm rate and the mutant ladder are benchmarks/verify_power.py's.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import sys

import jax
import jax.numpy as jnp
import pytest

from helpers import require

require("gymnasium")
require("pettingzoo")
require("scipy")

import jaxenvs  # noqa: E402
from jaxenvs.envs.grid_world import ACTION_TO_DIRECTION, GridWorld  # noqa: E402
from jaxenvs.testing import (  # noqa: E402
    ALPHA,
    DETECT,
    POWER,
    PortInconclusive,
    PortMismatch,
    ReferenceCache,
    TraceCountError,
    VerifySettings,
    assert_env_ok,
    assert_max_traces,
    verify_port,
)
from jaxenvs.wrappers import TimeLimit  # noqa: E402

import reference_envs as R  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("verify_power", os.path.join(ROOT, "benchmarks", "verify_power.py"))
V = importlib.util.module_from_spec(_spec)
sys.modules["verify_power"] = V  # dataclasses look their module up
_spec.loader.exec_module(V)

CACHE = ReferenceCache()  # reference rollouts shared by the faithful ports and their mutants
FROZEN = V.frozen_lake()
LOTTERY = jaxenvs.make("Lottery-v0")


# ---------------------------------------------------------------------------------------------
# model tier: FrozenLake-v1 against Gymnasium's transition table
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def frozen_report():
    return verify_port(FROZEN, V.frozen_reference, num_episodes=100, reference_cache=CACHE)


def test_frozen_lake_port_passes_on_the_model_tier(frozen_report):
    r = frozen_report
    assert r.verdict == "pass" and r.tiers == ("model", "sample")
    required = [s for s in r.statistics if s.required]
    assert {s.name for s in required} == {"initial observation", "transition | (observation, action)"}
    assert all(s.tier == "model" and s.effect == "tv" and s.detectable <= DETECT for s in required)
    assert all(s.p_value >= r.threshold for s in r.statistics)
    # the sample tier's statistics still ran, as support
    assert any(s.tier == "sample" and not s.required for s in r.statistics)


def test_planted_slip_bug_is_caught(frozen_report):
    del frozen_report  # the faithful run, in this process: its reference rollouts are in CACHE
    with pytest.raises(PortMismatch) as info:
        verify_port(V.frozen_lake(slip=0.35), V.frozen_reference, num_episodes=100, reference_cache=CACHE)
    e = info.value
    assert e.statistic == "transition | (observation, action)"
    assert e.report.verdict == "fail" and e.report.cache is not None  # the faithful run's reference rollouts
    assert re.search(r"port \([\d,]+ samples\): at observation \d+, action \d: .*TV 0\.0", str(e))


def test_user_transition_probs_are_the_model(frozen_report):
    """A table given as transition_probs replaces the reference's: the faithful port against the
    table of a 0.40 slip fails on it."""
    import gymnasium

    del frozen_report  # the reference rollouts come from CACHE (the faithful run, in this process)

    true = gymnasium.make("FrozenLake-v1", is_slippery=True).unwrapped.P

    def wrong(obs, action):
        outs = true[obs][action]
        if len(outs) != 3 or outs[0][0] != pytest.approx(1 / 3):
            return outs
        return [(0.4, *outs[0][1:]), (0.2, *outs[1][1:]), (0.4, *outs[2][1:])]

    with pytest.raises(PortMismatch, match=r"^transition \| \(observation, action\): model"):
        verify_port(FROZEN, V.frozen_reference, transition_probs=wrong, num_episodes=100, reference_cache=CACHE)


# ---------------------------------------------------------------------------------------------
# exact tier: deterministic ports replayed
# ---------------------------------------------------------------------------------------------


def test_point_env_passes_on_the_exact_tier():
    r = verify_port(V.point_env(), V.point_reference, state_to_jax=V.point_state, num_episodes=50, detect=0.05)
    assert r.verdict == "pass" and r.tiers[0] == "exact"
    names = {s.name: s for s in r.statistics}
    replay = names["trajectory replay (every step)"]
    assert replay.tier == "exact" and replay.detectable == 0 and replay.n_port > 50 * 10
    # the initial observation is sampled (extra resets) until its KS test detects 0.05
    assert names["initial observation[0]"].detectable <= 0.05 < names["episode length"].detectable
    assert r.states_checked >= 50


def test_scaled_action_fails_the_replay():
    with pytest.raises(PortMismatch) as info:
        verify_port(V.point_env("scale", 1.05), V.point_reference, state_to_jax=V.point_state, num_episodes=50, detect=0.05)
    assert info.value.report.statistics[0].tier == "exact"
    assert re.match(r"(step from reference states|trajectory replay).*: exact tier, replay: p-value 0 .*observation", str(info.value))


def test_a_reward_with_a_batch_axis_is_a_mismatch_not_squeezed():
    """A reward of shape (1,) (gymnax's Pendulum before b3a4e29) fails before any episode is drawn;
    the gymnax adapter passes the shape on instead of squeezing it away."""
    from jaxenvs.envs.point_env import PointEnv

    class RewardWithAxis(PointEnv):
        def step_env(self, key, state, action, params):
            out = super().step_env(key, state, action, params)
            return out[:2] + (out[2].reshape(1),) + out[3:]

    with pytest.raises(PortMismatch, match=r"reward shape: the port's step returns a reward of shape \(1,\); "
                                           r"the reference's is a scalar") as info:
        verify_port(TimeLimit(RewardWithAxis(), 100), V.point_reference, num_episodes=50)
    assert info.value.statistic == "reward shape"


@pytest.mark.parametrize("space", [jaxenvs.spaces.Discrete(3), jaxenvs.spaces.Box(-1.0, 1.0, (2,))], ids=["discrete", "box"])
def test_the_default_policys_block_of_actions_is_its_step_by_step_actions(space):
    """The reference's actions come POLICY_BLOCK steps a call for the default policy: the same
    values, bit for bit, as one call per step (which a policy reading its observation still gets)."""
    from jaxenvs.testing.runs import batched_policy_fn, default_policy, policy_block_fn

    policy, key, obs = default_policy(space, 1, False), jax.random.key(3), jnp.zeros((8, 4))
    block = policy_block_fn(policy)(key, 5, obs, 16, 8, 40)
    step = batched_policy_fn(policy)
    for t in range(40):
        assert (block[t] == step(key, 5 + t, obs, 16, 8)).all(), t
    assert not (block[0] == block[1]).all()  # the steps' keys differ


class WallOneCellEarly(GridWorld):
    """The right-hand wall stands one cell early: the last column cannot be entered."""

    def step_env(self, key, state, action, params):
        direction = jnp.asarray(ACTION_TO_DIRECTION)[jnp.clip(action, 0, 3)]
        high = jnp.maximum(jnp.array([params.size - 2, params.size - 1]), state.agent)
        agent = jnp.clip(state.agent + direction, 0, high)
        terminated = jnp.all(agent == state.target)
        state = state.replace(agent=agent)
        return self._obs(state), state, terminated.astype(jnp.float32), terminated, jnp.zeros((), bool), self._info(state)


def test_grid_world_wall_mutant_fails_exactly():
    with pytest.raises(PortMismatch) as info:
        verify_port(TimeLimit(WallOneCellEarly(), 300), R.REFERENCES["GridWorld-v0"],
                    state_to_jax=R.STATE_TO_JAX["GridWorld-v0"], num_episodes=50)
    assert re.search(r"observation \[.*\] after reference episode \d+ step \d+|at step \d+ of reference episode", str(info.value))


# ---------------------------------------------------------------------------------------------
# sample tier: inconclusive rather than a pass the sample could not have failed
# ---------------------------------------------------------------------------------------------


def test_sample_tier_says_inconclusive_with_the_episodes_needed():
    with pytest.raises(PortInconclusive) as info:
        verify_port(LOTTERY, R.LotteryEnv, num_episodes=200, max_episodes=200, detect=0.1)
    r = info.value.report
    assert r.verdict == "inconclusive" and r.episodes_needed > 200
    assert f"about {r.episodes_needed:,} episodes" in str(info.value)
    short = [s for s in r.statistics if s.required and s.detectable > r.detect]
    assert short and all(s.needed for s in short)


def test_sample_tier_draws_more_episodes_until_it_can_pass():
    r = verify_port(LOTTERY, R.LotteryEnv, num_episodes=200, max_episodes=6400, detect=0.15)
    assert r.verdict == "pass" and r.num_episodes > 200
    assert all(s.detectable <= 0.15 for s in r.statistics if s.required)


@pytest.mark.parametrize(
    "make,reference",
    [
        # a reward of the wrong sign: a losing lottery ticket pays +10
        (lambda: jaxenvs.make("Lottery-v0", losing_reward=10.0), R.LotteryEnv),
        # a probability changed by 0.1: jumps over hurdles succeed with 0.8 instead of 0.9
        (lambda: jaxenvs.make("HurdleRace-v0", jump_success_rate=0.8), R.HurdleRaceEnv),
    ],
    ids=["losing ticket +10", "jump probability 0.8"],
)
def test_sample_tier_mutants_fail(make, reference):
    with pytest.raises(PortMismatch) as info:
        verify_port(make(), reference, num_episodes=1000, max_episodes=1000, detect=0.3)
    msg = str(info.value)
    assert msg.startswith(info.value.statistic + ":") and "port (" in msg and " samples): " in msg and "reference (" in msg


# ---------------------------------------------------------------------------------------------
# the reference cache (a changed reference behind one factory runs again)
# ---------------------------------------------------------------------------------------------


def test_a_changed_reference_behind_one_factory_is_run_again():
    setting = {"losing": -10}

    class Changing(R.LotteryEnv):
        def step(self, action):
            o, r, term, trunc, info = super().step(action)
            return o, (setting["losing"] if r == -10 else r), term, trunc, info

    kwargs = dict(num_episodes=400, max_episodes=400, detect=0.3, raise_inconclusive=False)
    first = verify_port(LOTTERY, Changing, **kwargs)
    assert first.verdict != "fail" and first.cache is None
    setting["losing"] = 10  # the factory is the same object; what it builds has changed
    with pytest.raises(PortMismatch, match=r"^(return|reward \| \(observation, action\))"):
        verify_port(LOTTERY, Changing, **kwargs)
    # an explicit cache reuses rollouts, and the report says so
    cache = ReferenceCache()
    setting["losing"] = -10
    a = verify_port(LOTTERY, Changing, reference_cache=cache, **kwargs)
    b = verify_port(LOTTERY, Changing, reference_cache=cache, **kwargs)
    assert a.cache is None and b.cache.startswith("reference rollouts reused from a ReferenceCache")
    assert [s.p_value for s in a.statistics] == [s.p_value for s in b.statistics]


# ---------------------------------------------------------------------------------------------
# the certificate
# ---------------------------------------------------------------------------------------------


def test_report_is_a_certificate(frozen_report, tmp_path):
    r = frozen_report
    d = json.loads(r.to_json())
    for k in ("port", "reference", "versions", "verdict", "tiers", "num_episodes", "alpha", "detect", "power", "seed",
              "threshold", "statistics", "cache"):
        assert k in d
    assert d["verdict"] == "pass" and d["reference"].startswith("FrozenLake-v1")
    assert {"jaxenvs", "gymnasium"} <= set(d["versions"])
    s0 = d["statistics"][0]
    assert {"name", "tier", "p_value", "detectable", "effect", "n_port", "required"} <= set(s0)
    path = r.save(tmp_path / "frozen_lake.verify.json")
    assert json.loads(open(path).read()) == d
    # the text: every line within WIDTH columns, each statistic's result and figures said in words
    from jaxenvs.testing.report import WIDTH

    lines = str(r).splitlines()
    assert lines[0] == "verdict: PASS" and WIDTH == 100
    assert max(map(len, lines)) <= WIDTH, max(lines, key=len)
    # each statistic's block: its "  ok: ..." line and the indented lines that continue it (wrapped at WIDTH)
    blocks, current = [], None
    for line in lines:
        if line.startswith("  ") and not line.startswith("   "):
            current = [line.strip()]
            blocks.append(current)
        elif line.startswith("    ") and current is not None:
            current.append(line.strip())
        else:
            current = None
    texts = [" ".join(b) for b in blocks]
    for s in r.statistics:
        head = f"ok: {s.name} ({'required' if s.required else 'supporting'}; {s.tier} tier, {s.test})"
        (block,) = [t for t in texts if t.startswith(head + " ")]
        figures = block[len(head):]
        assert figures.startswith(f" p-value {s.p_value:.3g}; "), figures
        if s.tier == "model":  # draws of the port against the table's exact probabilities
            assert s.n_reference == 0 and f"samples: port {s.n_port:,} draws, reference: its exact probabilities" in figures
        else:
            assert f"samples: port {s.n_port:,}, reference {s.n_reference:,}" in figures
        if s.effect == "tv":
            assert f"detectable total variation {s.detectable:.3g} (bound {s.target(r.detect):g})" in figures
    assert "n port/ref" not in str(r) and " tv " not in str(r)


def test_a_fail_report_fits_100_columns_and_says_what_its_figures_are():
    """A FAIL detail with long summaries (built by hand: no env run): every line within 100
    columns, nothing of the summaries lost, the figures named in words."""
    from jaxenvs.testing import PortReport, Statistic
    from jaxenvs.testing.report import WIDTH

    port_text = "; ".join(f"stratum {i}: {{0: 0.{i}1, 1: 0.{9 - i}9}} (n=4096)" for i in range(8))
    stats = (
        Statistic("next observation, terminated | (observation, action)", "sample",
                  "pooled chi-square over strata + per-stratum exact", 0.9, 3.33e-16, "weighted tv", 32768, 32768),
        Statistic("transition | (observation, action)", "model", "goodness of fit per (observation, action)", 0.0,
                  0.0151, "tv", 32768, 0, True, port_text, "x" * 150, "needs about 1,000 draws"),
        Statistic("initial observation", "exact", "replay", 1.0, 0.0, "exact", 100, 100, False),
    )
    r = PortReport(port="<" + "Wrapper<" * 20 + "Env" + ">" * 21, port_id=None, reference="Ref-v0", versions={},
                   verdict="fail", tiers=("model", "sample"), num_episodes=100, horizon=10, seed=0, alpha=1e-3,
                   detect=0.02, power=0.95, threshold=1e-4, spaces=(), statistics=stats, states_checked=0,
                   episodes_needed=None, cache=None, seconds=1.0, notes=("a note " * 40,))
    text = str(r)
    assert max(map(len, text.splitlines())) <= WIDTH, max(text.splitlines(), key=len)
    flat = " ".join(text.split())
    assert " ".join(port_text.split()) in flat  # every stratum's figures kept
    assert "x" * 150 in text.replace("\n      ", "")  # a word past the width is broken, not lost
    assert "detectable weighted total variation 3.33e-16 (visitation-weighted, bound 0.02)" in flat
    assert "FAIL: transition | (observation, action) (required; model tier, goodness of fit per (observation, action))" in flat
    assert "samples: port 32,768 draws, reference: its exact probabilities" in flat
    assert "samples: port 32,768, reference 32,768" in flat and "exact comparison (any difference fails)" in flat
    assert "ok: initial observation (supporting; exact tier, replay)" in flat
    assert flat.count("a note") == 40 and "n port/ref" not in flat and "weighted tv" not in flat


# ---------------------------------------------------------------------------------------------
# jaxenvs verify
# ---------------------------------------------------------------------------------------------


def test_cli_verify_exit_status(tmp_path, monkeypatch, capsys):
    from jaxenvs.cli import main

    (tmp_path / "my_lottery.py").write_text(
        "import jaxenvs\nfrom jaxenvs.envs.lottery import Lottery\n"
        "jaxenvs.register('vtest/Lottery-v0', Lottery)\n"
        "jaxenvs.register('vtest/LotteryBug-v0', Lottery, kwargs={'losing_reward': 10.0})\n"
        "def reference():\n    import sys\n    sys.path.insert(0, %r)\n    import reference_envs\n    return reference_envs.LotteryEnv()\n"
        % os.path.dirname(os.path.abspath(__file__))
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    args = ["--reference", "my_lottery:reference", "--episodes", "200", "--max-episodes", "200"]
    assert main(["verify", "my_lottery:vtest/Lottery-v0", *args, "--save", "cert.json"]) == 3  # inconclusive
    out = capsys.readouterr().out
    assert "verdict: INCONCLUSIVE" in out and json.loads((tmp_path / "cert.json").read_text())["verdict"] == "inconclusive"
    assert main(["verify", "vtest/Lottery-v0", *args, "--detect", "0.6"]) == 3  # the local guarantee (0.1) holds it up
    assert "detect_local=0.1 NOT certified" in capsys.readouterr().out
    assert main(["verify", "vtest/Lottery-v0", *args, "--detect", "0.6", "--detect-local", "0.6"]) == 0
    assert "verdict: PASS" in capsys.readouterr().out
    assert main(["verify", "vtest/LotteryBug-v0", *args]) == 1
    assert "verdict: FAIL" in capsys.readouterr().out
    # mistakes: one line on stderr, exit 2
    for bad in (
        ["verify", "vtest/Lottery-v0", "--reference", "nocolon"],
        ["verify", "vtest/Lottery-v0", "--reference", "gymnasium:NoSuchEnv-v9"],
        ["verify", "vtest/Lottery-v0", "--reference", "my_lottery:reference", "--reference-kwargs", "[1]"],
        ["verify", "vtest/Lottery-v0", "--reference", "my_lottery:missing"],
        ["verify", "vtest/Lottery-v0", "--reference", "my_lottery:reference", "--detect", "2"],
    ):
        assert main(bad) == 2
        err = capsys.readouterr().err
        assert err.startswith("jaxenvs: error: ") and err.count("\n") == 1 and "Traceback" not in err


# ---------------------------------------------------------------------------------------------
# refusals
# ---------------------------------------------------------------------------------------------


def test_space_mismatch_is_named_before_any_rollout():
    with pytest.raises(PortMismatch, match=r"^observation space: port Dict\('agent': Box\(0, 5") as info:
        verify_port(jaxenvs.make("GridWorld-v0", size=6), R.REFERENCES["GridWorld-v0"])
    assert info.value.report is None


def test_one_settings_object_is_the_keyword_arguments(capsys):
    """`VerifySettings` is what the five keyword arguments make: the same run, the same report;
    mixing the two ways, a settings of another type or power <= alpha is refused in one line."""
    settings = VerifySettings(detect=0.15)
    common = dict(num_episodes=200, max_episodes=800, raise_inconclusive=False)
    a = verify_port(LOTTERY, R.LotteryEnv, detect=0.15, **common)
    b = verify_port(LOTTERY, R.LotteryEnv, settings=settings, **common)
    fields = ("verdict", "alpha", "detect", "power", "coverage", "detect_local", "num_episodes", "threshold")
    assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
    assert (b.alpha, b.detect, b.power) == (ALPHA, 0.15, POWER)
    assert [(s.name, s.p_value, s.detectable) for s in a.statistics] == [(s.name, s.p_value, s.detectable)
                                                                        for s in b.statistics]
    with pytest.raises(ValueError, match=r"^verify_port takes settings= or detect=, power=, not both"):
        verify_port(LOTTERY, R.LotteryEnv, settings=settings, power=0.9, detect=0.1)
    with pytest.raises(TypeError, match="^verify_port needs settings as a VerifySettings, got dict$"):
        verify_port(LOTTERY, R.LotteryEnv, settings={"detect": 0.1})
    with pytest.raises(ValueError, match=r"^verify_port needs power > alpha, got power=0.4, alpha=0.5$"):
        VerifySettings(alpha=0.5, power=0.4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.detect = 0.5
    from jaxenvs.cli import main

    rc = main(["verify", "Lottery-v0", "--reference", "gymnasium:CartPole-v1", "--alpha", "0.5", "--power", "0.4"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "verify_port needs power > alpha, got power=0.4, alpha=0.5" in err[0], err


def test_bad_arguments_are_refused():
    env = LOTTERY
    for kwargs, match in (
        ({"num_episodes": 5}, "num_episodes as an int >= 10"),
        ({"alpha": 1.5}, r"alpha in \(0, 1\)"),
        ({"detect": 0.0}, r"detect in \(0, 1\)"),
        ({"power": 1.0}, r"power in \(0, 1\)"),
        ({"num_episodes": 100, "max_episodes": 50}, "max_episodes >= num_episodes"),
    ):
        with pytest.raises(ValueError, match=match):
            verify_port(env, R.LotteryEnv, **kwargs)
    with pytest.raises(TypeError, match="zero-argument callable"):
        verify_port(env, R.LotteryEnv())
    with pytest.raises(TypeError, match="ReferenceCache"):
        verify_port(env, R.LotteryEnv, reference_cache={})
    with pytest.raises(ValueError, match="needs a ParallelEnv"):
        verify_port(jaxenvs.make("RockPaperScissors-v0"), R.LotteryEnv)


# ---------------------------------------------------------------------------------------------
# assert_env_ok and assert_max_traces
# ---------------------------------------------------------------------------------------------


def test_assert_env_ok_names_the_broken_rule():
    from jaxenvs.envs.rock_paper_scissors import RockPaperScissors

    class IntReward(RockPaperScissors):
        def step_env(self, key, state, action, params):
            out = super().step_env(key, state, action, params)
            return out[:2] + (out[2].astype(jnp.int32),) + out[3:]

    with pytest.raises(AssertionError, match=r"breaks the environment contract: \[reward-dtype\] .*int32"):
        assert_env_ok(IntReward(), num_steps=4, num_envs=2)


def test_assert_max_traces_counts_traces_not_calls():
    @jax.jit
    @assert_max_traces(n=1)
    def double(x):
        return 2 * x

    for v in (1.0, 2.0, 3.0):
        assert double(jnp.float32(v)) == 2 * v  # one trace, three calls
    with pytest.raises(TraceCountError, match="traced 2 times, at most 1 allowed"):
        double(jnp.zeros(3))  # a new shape: a second trace
    with pytest.raises(ValueError, match="n as an int >= 0"):
        assert_max_traces(n=-1)
