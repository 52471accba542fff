"""jaxenvs.testing: verify_port against the tutorials' numpy references, mutation tests, the numpy
two-sample tests, assert_env_ok and assert_max_traces.

The five built-in ports must pass against tests/reference_envs.py with and without
``state_to_jax``; deliberately broken ports (mutants) must each raise PortMismatch with the
default settings. Envs are built once per module so that each compiles once.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import require

require("gymnasium")
require("pettingzoo")

import jaxenvs  # noqa: E402
from jaxenvs.envs.grid_world import ACTION_TO_DIRECTION, GridWorld  # noqa: E402
from jaxenvs.envs.hurdle_race import HurdleRace  # noqa: E402
from jaxenvs.testing import PortMismatch, TraceCountError, assert_env_ok, assert_max_traces, verify_port  # noqa: E402
from jaxenvs.testing import stats  # noqa: E402
from jaxenvs.wrappers import TimeLimit  # noqa: E402

import reference_envs as R  # noqa: E402

ENVS = {env_id: jaxenvs.make(env_id) for env_id in R.REFERENCES}
# episodes per run: the default where a run is cheap or its compiled rollout is shared with a
# mutant's; 200 where plain-numpy references take ~100 steps an episode (a compiled rollout serves
# one number of episodes, so the runs of one env keep to one number)
EPISODES = {"GridWorld-v0": 1000, "PointEnv-v0": 200, "HurdleRace-v0": 1000, "Lottery-v0": 1000, "RockPaperScissors-v0": 1000}
STATE_EPISODES = dict(EPISODES, **{"GridWorld-v0": 200})


# ---------------------------------------------------------------------------------------------
# faithful ports pass
# ---------------------------------------------------------------------------------------------

# GridWorld's reference run at seed 0 is shared with the mutants below
FAITHFUL = [
    ("GridWorld-v0", 0),
    ("PointEnv-v0", 0),
    ("HurdleRace-v0", 0),
    ("HurdleRace-v0", 1),
    ("Lottery-v0", 0),
    ("Lottery-v0", 1),
    ("Lottery-v0", 2),
    ("RockPaperScissors-v0", 0),
    ("RockPaperScissors-v0", 1),
]


@pytest.mark.parametrize("env_id,seed", FAITHFUL)
def test_faithful_port_passes(env_id, seed):
    num_episodes = EPISODES[env_id]
    report = verify_port(ENVS[env_id], R.REFERENCES[env_id], num_episodes=num_episodes, seed=seed)
    assert report.num_episodes == num_episodes
    assert all(s.p_value >= report.threshold for s in report.statistics)
    assert report.threshold == pytest.approx(report.alpha / len(report.statistics))
    names = [s.name for s in report.statistics]
    assert {"initial observation", "episode length", "return"} <= {n.split("[")[0] for n in names}
    assert all(s.n_port > 0 and s.n_reference > 0 for s in report.statistics)
    if env_id != "PointEnv-v0":  # discrete observations and actions: transitions are compared
        assert "next observation, terminated | (observation, action)" in names
    assert report.states_checked == 0


@pytest.mark.parametrize("env_id", list(R.REFERENCES))
def test_faithful_port_passes_with_state_to_jax(env_id):
    report = verify_port(
        ENVS[env_id], R.REFERENCES[env_id], state_to_jax=R.STATE_TO_JAX[env_id], num_episodes=STATE_EPISODES[env_id]
    )
    assert report.states_checked >= 16  # t = 0 of the first 16 episodes at least
    if ENVS[env_id].traits.chance == "stochastic":
        assert report.statistics[0].name.startswith("step from reference states")


# ---------------------------------------------------------------------------------------------
# mutants are caught with the default settings
# ---------------------------------------------------------------------------------------------


class WallOneCellEarly(GridWorld):
    """The right-hand wall stands one cell early: the last column cannot be entered."""

    def step_env(self, key, state, action, params):
        direction = jnp.asarray(ACTION_TO_DIRECTION)[jnp.clip(action, 0, 3)]
        high = jnp.maximum(jnp.array([params.size - 2, params.size - 1]), state.agent)
        agent = jnp.clip(state.agent + direction, 0, high)
        terminated = jnp.all(agent == state.target)
        state = state.replace(agent=agent)
        return self._obs(state), state, terminated.astype(jnp.float32), terminated, jnp.zeros((), bool), self._info(state)


class TerminatesOneCellEarly(GridWorld):
    """Terminates (with the reward) one cell before the target."""

    def step_env(self, key, state, action, params):
        obs, state, _, _, truncated, info = super().step_env(key, state, action, params)
        terminated = info["distance"] <= 1
        return obs, state, terminated.astype(jnp.float32), terminated, truncated, info


MUTANTS = {
    # a probability changed by 0.1: jumps over hurdles succeed with 0.8 instead of 0.9
    "jump probability 0.8": ("HurdleRace-v0", lambda: jaxenvs.make("HurdleRace-v0", jump_success_rate=0.8)),
    "wall one cell early": ("GridWorld-v0", lambda: TimeLimit(WallOneCellEarly(), 300)),
    # a reward of the wrong sign: a losing lottery ticket pays +10
    "losing ticket +10": ("Lottery-v0", lambda: jaxenvs.make("Lottery-v0", losing_reward=10.0)),
    "termination one cell early": ("GridWorld-v0", lambda: TimeLimit(TerminatesOneCellEarly(), 300)),
    # a reset distribution that reaches one more cell: the first hurdle may also stand on cell 3
    "first hurdle on 1..3": ("HurdleRace-v0", lambda: TimeLimit(HurdleRace(hurdle_slots=((1, 2, 3), (4, 5), (7, 8))), 50)),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_mutant_is_caught(mutant):
    env_id, make = MUTANTS[mutant]
    with pytest.raises(PortMismatch) as info:
        verify_port(make(), R.REFERENCES[env_id])
    msg = str(info.value)
    # the message names the statistic and gives both sides' values and sample sizes
    assert msg.startswith(info.value.statistic + ":")
    assert "port (n=" in msg and "reference (n=" in msg


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_mutant_is_caught_with_state_to_jax(mutant):
    env_id, make = MUTANTS[mutant]
    with pytest.raises(PortMismatch) as info:
        verify_port(make(), R.REFERENCES[env_id], state_to_jax=R.STATE_TO_JAX[env_id], num_episodes=STATE_EPISODES[env_id])
    if ENVS[env_id].traits.chance == "deterministic":
        # GridWorld's mutants differ on some reference transition, named with both sides' values
        assert info.value.statistic == "transition"
        assert re.match(r"transition: \w+ after reference episode \d+ step \d+, action \d: port .+, reference .+", str(info.value))


def test_space_mismatch_is_named_before_any_rollout():
    with pytest.raises(PortMismatch, match=r"^observation space: port Dict\('agent': Box\(0, 5"):
        verify_port(jaxenvs.make("GridWorld-v0", size=6), R.REFERENCES["GridWorld-v0"])


def test_bad_arguments_are_refused():
    env = ENVS["Lottery-v0"]
    with pytest.raises(ValueError, match="num_episodes as an int >= 10"):
        verify_port(env, R.LotteryEnv, num_episodes=5)
    with pytest.raises(ValueError, match=r"alpha in \(0, 1\)"):
        verify_port(env, R.LotteryEnv, alpha=1.5)
    with pytest.raises(TypeError, match="zero-argument callable"):
        verify_port(env, R.LotteryEnv())
    with pytest.raises(ValueError, match="needs a ParallelEnv"):
        verify_port(ENVS["RockPaperScissors-v0"], R.LotteryEnv)


# ---------------------------------------------------------------------------------------------
# the two-sample tests
# ---------------------------------------------------------------------------------------------


def test_chi2_and_kolmogorov_tails_match_tables():
    # 95% quantiles of chi-square(1), chi-square(10) and chi-square(100) (tables), to 1e-9
    for x, df in ((3.841458820694124, 1), (18.307038053275146, 10), (124.34211340400407, 100)):
        assert stats.chi2_sf(x, df) == pytest.approx(0.05, abs=1e-9)
    assert stats.chi2_sf(0.0, 3) == 1.0
    # the Kolmogorov distribution's 95% quantile is 1.3580986393225505
    assert stats._kolmogorov_sf(1.3580986393225505) == pytest.approx(0.05, abs=1e-9)
    # exact binomial: 0 of 10 at p = 1/2 has two-sided probability 2 / 1024
    assert stats.binomial_two_sided([0, 5], [10, 10], 0.5) == pytest.approx([2 / 1024, 1.0])


def test_tests_keep_their_false_alarm_rate_and_detect_a_shift():
    rng = np.random.default_rng(0)
    p_cat = [stats.categorical_test(rng.integers(0, 6, 300), rng.integers(0, 6, 400)) for _ in range(200)]
    p_ks = [stats.ks_test(rng.normal(size=300), rng.normal(size=400))[1] for _ in range(200)]
    # at most 5% of faithful pairs below 0.05 (binomial sd ~1.5%: 9% is > 2.5 sd above)
    assert np.mean(np.array(p_cat) < 0.05) <= 0.09
    assert np.mean(np.array(p_ks) < 0.05) <= 0.09
    # a category only one side produces, 30 times in 1000, is found
    x = rng.integers(0, 5, 1000)
    y = np.where(rng.random(1000) < 0.03, 5, rng.integers(0, 5, 1000))
    assert stats.categorical_test(x, y) < 1e-6
    assert stats.ks_test(rng.normal(size=1000), rng.normal(0.3, size=1000))[1] < 1e-6


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
