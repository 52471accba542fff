"""verify_port's trajectory replay tells float drift from a bug. A float32 port of a float64
original whose dynamics stretch errors separates from it after a while, although every step from
a reference state agrees; the replay accepts a separated trajectory while its divergence stays
within `DRIFT_FACTOR` times that of a *rounding twin* (the port's own replay with a rounding-sized
error fed in at every step) and fails one that jumps away. The toy with a known answer: the
logistic map x' = 4 x (1 - x) (benchmarks/verify_local.py), whose errors double every step
(Lyapunov exponent ln 2), so a float32 port leaves rtol 1e-4 after about log2(1e-4 / 6e-8) ~ 11
steps. The gymnax rows
(Pendulum, CartPole and their 10% mutants) are benchmarks/certificates.py's."""

from __future__ import annotations

import math
import re

import pytest
from helpers import benchmark, require

require("gymnasium")
require("scipy")

from jaxenvs.testing import PortMismatch, verify_port  # noqa: E402
from jaxenvs.testing.exact import DRIFT_FACTOR  # noqa: E402

L = benchmark("verify_local")
port, reference = L.logistic, L.logistic_reference
KW = dict(L.LOGISTIC_KW, seed=3)


@pytest.fixture(scope="module")
def faithful():
    return verify_port(port(), reference, **KW)


def test_a_float32_port_of_a_chaotic_float64_original_passes_with_its_drift_stated(faithful):
    r = faithful
    replay = next(s for s in r.statistics if s.name == "trajectory replay (every step)")
    assert r.verdict == "pass" and replay.p_value == 1.0
    note = next(n for n in r.notes if n.startswith("trajectory replay"))
    assert "at the rate rounding predicts" in note
    # errors double each step: from float32 rounding (~6e-8 of x) to rtol 1e-4 in ~11 steps; the
    # earliest trajectory a few steps sooner, the median within a few of it
    first, median = (int(v) for v in re.search(r"from step (\d+) \(median (\d+)\)", note).groups())
    predicted = math.log2(1e-4 / 6e-8)
    assert 3 <= first <= median and abs(median - predicted) <= 4, note
    separated = int(note.split(" of ")[0].rsplit(" ", 1)[-1])
    assert separated >= 100  # most of the 200 trajectories of 30 steps separate: the drift is real


def test_the_plain_tolerance_alone_fails_the_same_port(monkeypatch):
    """Without the drift allowance (the replay as it was) the faithful port fails: what the
    allowance changes is this verdict, nothing else."""
    import jaxenvs.testing.port_verification as V

    plain = V.replay_trajectories
    monkeypatch.setattr(V, "replay_trajectories", lambda *a, rounding=None: plain(*a, rounding=None))
    with pytest.raises(PortMismatch, match="trajectory replay"):
        verify_port(port(), reference, **KW)


def test_a_changed_constant_still_fails():
    """r 1% off: the one-step tier sees it at the first reference state."""
    with pytest.raises(PortMismatch) as e:
        verify_port(port(r=3.96), reference, **KW)
    assert e.value.statistic == "step from reference states (obs, reward, flags)"


def test_a_jump_the_one_step_states_miss_is_a_divergence_beyond_the_twin():
    """The jump checked by the replay alone: no reference state of the one-step tier lies above
    0.9999, the replay's trajectories reach it, and the divergence there is many times the twin's."""
    with pytest.raises(PortMismatch) as e:
        verify_port(port(jump_above=0.9999), reference, **KW)
    assert e.value.statistic == "trajectory replay (every step)"
    ratio = re.search(r"; ([0-9.e+-]+)x the tolerance, its rounding twin ([0-9.e+-]+)x", str(e.value))
    assert ratio and float(ratio.group(1)) > 1 + DRIFT_FACTOR * float(ratio.group(2)), str(e.value)[-600:]
