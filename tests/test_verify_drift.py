"""verify_port's trajectory replay tells float drift from a bug. A float32 port of a float64
original whose dynamics stretch errors separates from it after a while, although every step from
a reference state agrees; the replay accepts a separated trajectory while its divergence stays
within `DRIFT_FACTOR` times that of a *rounding twin* (the port's own replay with a rounding-sized
error fed in at every step) and fails one that jumps away. The toy with a known answer: the
logistic map x' = 4 x (1 - x), whose errors double every step (Lyapunov exponent ln 2), so a
float32 port leaves rtol 1e-4 after about log2(1e-4 / 6e-8) ~ 11 steps. The gymnax rows
(Pendulum, CartPole and their 10% mutants) are benchmarks/certificates.py's."""

from __future__ import annotations

import math
import re

import jax.numpy as jnp
import numpy as np
import pytest
from helpers import require

require("gymnasium")
require("scipy")

import gymnasium  # noqa: E402

from jaxenvs import spaces, struct  # noqa: E402
from jaxenvs.core import Environment, Traits  # noqa: E402
from jaxenvs.testing import PortMismatch, verify_port  # noqa: E402
from jaxenvs.testing.exact import DRIFT_FACTOR  # noqa: E402
from jaxenvs.wrappers import TimeLimit  # noqa: E402

HORIZON = 30


class LogisticEnv(gymnasium.Env):
    """The original, in float64: x starts uniform in [0.1, 0.9]; action 0 maps x to f(x) = 4 x (1 - x),
    action 1 to 1 - f(x) (both stretch errors by |4 - 8x|, ln 2 a step on average under their
    invariant arcsine density), clipped to [0, 1]; the observation is x (float32), the reward x;
    no end but the TimeLimit."""

    def __init__(self):
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.x = float(self.np_random.uniform(0.1, 0.9))
        return np.array([self.x], np.float32), {}

    def step(self, action):
        f = 4.0 * self.x * (1.0 - self.x)
        self.x = min(max(f if int(action) == 0 else 1.0 - f, 0.0), 1.0)
        return np.array([self.x], np.float32), self.x, False, False, {}


@struct.dataclass
class LogisticState:
    x: jnp.ndarray  # float32 scalar


@struct.dataclass
class LogisticParams:
    r: float = 4.0
    jump_above: float = 2.0  # a planted bug: above this x the map sends x to 0.5 (never, by default)


class Logistic(Environment):
    """The port, in float32."""

    traits = Traits(num_agents=1, chance="deterministic", information="perfect", reward_style="step")

    @property
    def default_params(self):
        return LogisticParams()

    def reset_env(self, key, params):
        import jax

        x = jax.random.uniform(key, (), jnp.float32, 0.1, 0.9)
        return x[None], LogisticState(x)

    def step_env(self, key, state, action, params):
        f = params.r * state.x * (1.0 - state.x)
        x = jnp.clip(jnp.where(action == 0, f, 1.0 - f), 0.0, 1.0)
        x = jnp.where(state.x > params.jump_above, 0.5, x).astype(jnp.float32)
        return x[None], LogisticState(x), x, jnp.zeros((), bool), jnp.zeros((), bool), {}

    def observation_space(self, params=None):
        return spaces.Box(0.0, 1.0, (1,), jnp.float32)

    def action_space(self, params=None):
        return spaces.Discrete(2)


def port(**params):
    import jaxenvs

    env = Logistic() if not params else jaxenvs.wrappers.WithParams(Logistic(), LogisticParams(**params))
    return TimeLimit(env, HORIZON)


def reference():
    return gymnasium.wrappers.TimeLimit(LogisticEnv(), HORIZON)


def state_to_jax(ref):
    return LogisticState(np.float32(ref.unwrapped.x))


KW = dict(state_to_jax=state_to_jax, num_episodes=200, detect=0.2, seed=3)


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
    import jaxenvs.testing.verify as V

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
