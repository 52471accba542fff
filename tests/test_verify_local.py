"""verify_port's local guarantee: every (observation, action) stratum holding at least `coverage`
of the visits is certified at `detect_local` on its own, whatever `detect` is. A slippery corridor
(tests/reference_envs.py's, slip 0.2) whose port slips with 0.35 only when moving right from cell
2 (a stratum of about 9% of the first visits, TV 0.15 there, a visitation-weighted TV near 0.014)
never passes at detect=0.1; the faithful port passes; the settings are validated, in
`verify_port` and as `jaxenvs verify --coverage/--detect-local`. The pass and catch rates over
seeds: benchmarks/verify_local.py (benchmarks/results/verify_local.md)."""

from __future__ import annotations


import pytest
from helpers import benchmark, require

require("gymnasium")
require("scipy")

from jaxenvs.testing import PortMismatch, verify_port  # noqa: E402
from jaxenvs.testing import stats  # noqa: E402

L = benchmark("verify_local")
V = L.VP
MUTANT = L.right_slip_corridor()
PORT = V.corridor()
LOCAL = "transition | (observation, action), each covered stratum"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_local_bug_at_a_covered_stratum_fails_at_a_loose_detect(seed):
    """detect=0.1 is ten times the bug's weighted effect: the weighted statistics cannot see it,
    the covered stratum (2, right) does."""
    with pytest.raises(PortMismatch) as e:
        verify_port(MUTANT, V.corridor_reference, seed=seed, detect=0.1)
    r = e.value.report
    assert r.verdict == "fail" and e.value.statistic in (LOCAL, "next observation, terminated | (observation, action)")
    worst = r.local["worst"]
    assert worst["where"] == "(observation 2, action 1)" and 0.09 < worst["tv"] < 0.21 and worst["share"] > 0.05


def test_a_local_bug_on_a_small_sample_is_inconclusive_not_pass():
    """700 episodes: the weighted statistics reach detect=0.1 (without the local guarantee this
    run was a PASS) but not every covered stratum reaches detect_local=0.1: inconclusive."""
    r = verify_port(MUTANT, V.corridor_reference, seed=2, detect=0.1, num_episodes=700, max_episodes=700,
                    raise_inconclusive=False)
    assert r.verdict == "inconclusive", str(r)
    loc = next(s for s in r.statistics if s.name == LOCAL)
    assert loc.required and loc.goal == 0.1 and loc.detectable > 0.1 and loc.needed.startswith("needs about")
    # the weighted statistics alone would have passed: only the local one holds the run up
    assert [s.name for s in r.undetermined] == [LOCAL]
    assert "detect_local=0.1 NOT certified" in " ".join(str(r).split())


def test_the_faithful_corridor_passes_and_names_its_weakest_covered_stratum():
    r = verify_port(PORT, V.corridor_reference, seed=1, detect=0.1, detect_local=0.2, coverage=0.05,
                    raise_inconclusive=False)
    assert r.verdict == "pass", str(r)
    assert (r.coverage, r.detect_local) == (0.05, 0.2)
    loc = r.local
    assert loc["how"] == "per stratum" and loc["bound"] <= 0.2 and loc["covered"] >= 8
    w = loc["weakest"]
    assert w["share"] >= 0.05 and w["where"].startswith("(observation ")
    # the bound is the per-stratum chi-square bound at the run's level, Bonferroni over the covered strata
    level = r.threshold / loc["covered"]
    assert loc["bound"] == pytest.approx(stats.detectable_tv(w["n_eff"], w["df"], level, r.power), rel=1e-9)
    text = " ".join(str(r).split())  # the report's lines wrapped at 100 columns, joined
    assert "local: every stratum with >= 0.05 of the visits" in text and "detect_local=0.2 certified" in text
    assert '"detect_local": 0.2' in r.to_json()


@pytest.mark.parametrize("name,value", [("coverage", 0), ("coverage", 1.5), ("detect_local", -0.1),
                                        ("detect_local", float("nan")), ("coverage", "0.1"), ("detect_local", True)])
def test_local_settings_are_checked(name, value):
    with pytest.raises(ValueError, match=rf"verify_port needs {name} in \(0, 1\), got"):
        verify_port(PORT, V.corridor_reference, **{name: value})


@pytest.mark.parametrize("flag", ["--coverage", "--detect-local"])
@pytest.mark.parametrize("value", ["0", "-0.2", "nan", "inf", "lots"])
def test_cli_local_flags_are_checked(flag, value, capsys):
    from jaxenvs.cli import main

    rc = main(["verify", "GridWorld-v0", "--reference", "gymnasium:CartPole-v1", flag, value])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0] == (f"jaxenvs: error: argument {flag}: expected a number in (0, 1), got {value!r} "
                      "(see jaxenvs verify --help)")


def test_local_strata_test_covers_by_share_and_bounds_each_stratum():
    """Three strata: two covered (shares 0.6 and 0.35), one below coverage=0.1 (0.05); a
    stratum the port never visited, with share 0.2, is covered and certifies nothing."""
    import numpy as np

    tables = {"a": np.array([[300, 300], [290, 310]]), "b": np.array([[100, 250], [160, 190]]),
              "c": np.array([[5, 5], [4, 6]])}
    weights = {"a": 0.6, "b": 0.35, "c": 0.05}
    res = stats.local_strata_test(tables, weights, 0.1)
    assert [c["stratum"] for c in res["covered"]] == ["a", "b"] and res["uncovered"] == 1
    assert res["uncovered_share"] == pytest.approx(0.05)
    b = res["covered"][1]
    assert b["tv"] == pytest.approx(abs(100 / 350 - 160 / 350)) and b["n_eff"] == pytest.approx(350 * 350 / 700)
    # p: Bonferroni over the two covered strata of each one's exact test
    assert res["p"] == pytest.approx(min(1.0, 2 * min(stats.table_test(tables["a"]), stats.table_test(tables["b"]))))
    bound, weakest = stats.detectable_local(res["covered"], 1e-3, 0.95)
    assert weakest["stratum"] == "b"  # the smaller sample bounds least tightly
    assert bound == pytest.approx(stats.detectable_tv(175.0, 1, 1e-3 / 2, 0.95))
    factor = stats.needed_local(res["covered"], 0.05, 1e-3, 0.95)
    grown = [dict(c, n_eff=c["n_eff"] * factor) for c in res["covered"]]
    assert stats.detectable_local(grown, 1e-3, 0.95)[0] == pytest.approx(0.05, rel=1e-6)
    never = stats.local_strata_test(tables, weights, 0.1, missing={"d": 0.2})
    assert never["covered"][2]["stratum"] == "d" and stats.detectable_local(never["covered"], 1e-3, 0.95)[0] == 1.0
    assert stats.needed_local(never["covered"], 0.05, 1e-3, 0.95) is None
