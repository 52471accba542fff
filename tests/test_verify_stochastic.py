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
    assert r.budget_s == 30.0 and r.seconds < 60


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
    r = verify_port(PORT, V.corridor_reference, num_episodes=200, budget_s=0.5, raise_inconclusive=False)
    assert r.verdict == "inconclusive" and r.num_episodes == 200
    pooled = next(s for s in r.statistics if s.effect == "weighted tv" and s.detectable > r.detect)
    assert pooled.needed.startswith("needs about")
    assert r.budget_needed_s and r.budget_needed_s > 0.5
    assert any("the budget that would certify detect=0.02" in n for n in r.notes)


def test_budget_is_checked():
    with pytest.raises(ValueError, match="budget_s as a number of seconds > 0"):
        verify_port(PORT, V.corridor_reference, budget_s=0)


def test_shared_and_old_gym_references_are_named():
    import gymnasium

    shared = V.corridor_reference()
    with pytest.raises(ValueError, match="same environment instance twice"):
        verify_port(PORT, lambda: shared, num_episodes=20)

    class OldGym(gymnasium.Env):
        observation_space = gymnasium.spaces.Discrete(7)
        action_space = gymnasium.spaces.Discrete(2)

        def reset(self):
            return 3

    with pytest.raises(ValueError, match="old gym API"):
        verify_port(PORT, OldGym, num_episodes=20)


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
