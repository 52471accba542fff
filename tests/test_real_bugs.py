"""benchmarks/real_bugs.py: one historical bug re-run end to end (buggy FAIL, fixed PASS) and the
published results checked against the script's own schema."""

import glob
import importlib.util
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results", "real_bugs")

pytest.importorskip("gymnax")
pytest.importorskip("gymnasium")
pytest.importorskip("scipy")


@pytest.fixture(scope="module")
def real_bugs():
    spec = importlib.util.spec_from_file_location("real_bugs", os.path.join(ROOT, "benchmarks", "real_bugs.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["real_bugs"] = module  # a dataclass looks its module up while it is defined
    spec.loader.exec_module(module)
    return module


def _triple(real_bugs, name):
    return next(t for t in real_bugs.triples() if t.name == name)


# A small call: 100 episodes, a 0.25 total-variation effect, 5 s of sampling. The buggy side stops at
# the space check (the first phase, no episode run); the fixed side runs the model tier in full.
SMALL = {"num_episodes": 100, "detect": 0.25, "budget_s": 5.0}


def test_frozen_lake_observation_space_bug_caught_at_a_small_budget(real_bugs):
    record = real_bugs.run_triple(_triple(real_bugs, "frozenlake-obs-space"), SMALL)
    buggy, fixed = record["buggy"], record["fixed"]
    assert buggy["verdict"] == "fail" and buggy["caught_by"] == "observation space", buggy
    assert "Box" in buggy["message"] and "Discrete(16)" in buggy["message"], buggy["message"]
    assert fixed["verdict"] == "pass", fixed
    assert fixed["episodes"] == 100 and fixed["budget_s"] == 5.0
    assert record["outcome"] == "caught" and record["settings"] == SMALL
    assert real_bugs.check_record(record) == []


def test_published_results_follow_the_schema(real_bugs):
    paths = sorted(glob.glob(os.path.join(RESULTS, "*.json")))
    names = {t.name for t in real_bugs.triples()}
    assert {os.path.basename(p)[:-5] for p in paths} == names, "one JSON per triple, no stale ones"
    for path in paths:
        with open(path) as fh:
            record = json.load(fh)
        assert real_bugs.check_record(record) == [], path
        assert record["name"] == os.path.basename(path)[:-5]
        assert record["citation"]["links"] and all(u.startswith("https://github.com/") for u in record["citation"]["links"])
        if record["outcome"] == "missed":
            assert record["why"], path
    table = real_bugs._table(real_bugs.load_records(RESULTS))
    for name in names:
        assert f"| {name} |" in table, f"{name} missing from the results table"
    with open(os.path.join(RESULTS, "README.md")) as fh:
        assert table in fh.read(), "benchmarks/results/real_bugs/README.md is stale: rerun the script"
    with open(os.path.join(ROOT, "docs", "real-bugs.md")) as fh:
        page = fh.read()
    start, end = real_bugs.MARKERS
    assert page.split(start, 1)[1].split(end, 1)[0] == "\n" + table, "docs/real-bugs.md's table is stale"


def test_check_record_names_what_is_wrong(real_bugs):
    side = {"verdict": "fail", "caught_by": "x", "tier": "sample", "p_value": 0.0, "message": "", "episodes": 10,
            "wall_s": 1.0, "cpu_s": 1.0, "budget_s": 60.0}
    good = {
        "name": "n", "library": "gymnax", "env": "e", "original": "o",
        "citation": {"repository": "r", "introduced": "i", "fixed": "f", "links": [], "nature": "n"},
        "buggy_source": "b", "fixed_source": "f", "settings": {}, "versions": {}, "buggy": side,
        "fixed": dict(side, verdict="pass"), "outcome": "caught", "why": "", "load": {}, "command": "c",
        "supplementary": None,
    }
    assert real_bugs.check_record(good) == []
    assert real_bugs.check_record(dict(good, outcome="missed")) == [
        "outcome 'missed' but the verdicts say 'caught'", "a missed triple must say why"]
    assert real_bugs.check_record(dict(good, buggy=dict(side, episodes=True))) == [
        "buggy['episodes'] is bool, expected <class 'int'>"]
    assert real_bugs.check_record({k: v for k, v in good.items() if k != "load"}) == ["record lacks 'load'"]
    assert real_bugs.check_record(dict(good, fixed=dict(side, verdict="maybe"))) == [
        "fixed verdict 'maybe' is not one of ('pass', 'fail', 'inconclusive', 'error')"]
    more = {"settings": {"policy": "p"}, "buggy": side, "fixed": dict(side, verdict="inconclusive"), "why": "w"}
    assert real_bugs.check_record(dict(good, supplementary=dict(more, outcome="fixed-failed"))) == []
    assert real_bugs.check_record(dict(good, supplementary=dict(more, outcome="caught"))) == [
        "supplementary outcome 'caught' but the verdicts say 'fixed-failed'"]


def test_the_command_line_refuses_an_unknown_triple(real_bugs, capsys):
    with pytest.raises(SystemExit) as e:
        real_bugs.main(["--only", "no-such-bug"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "unknown triple(s) no-such-bug" in err and "frozenlake-actions" in err
