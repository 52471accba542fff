"""The PettingZoo adapter passes PettingZoo's own parallel API and seed tests and reproduces the
underlying multi-agent environment agent by agent."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from gymnasium.utils.env_checker import data_equivalence

with warnings.catch_warnings():
    # importing pettingzoo.test loads one of PettingZoo's classic envs through its deprecated path
    warnings.simplefilter("ignore", DeprecationWarning)
    from pettingzoo.test import parallel_api_test, parallel_seed_test

import jaxenvs
from jaxenvs import spaces
from jaxenvs.adapters.pettingzoo import ParallelEnv
from jaxenvs.core import Environment, Traits
from jaxenvs.wrappers import TimeLimit
from helpers import registry_params


@struct.dataclass
class ToyParams:
    advance_prob: float = 0.7
    finish: int = 4


@struct.dataclass
class ToyState:
    position: jax.Array  # int32[2]


class ToyRace(Environment):
    """Two runners; action 1 advances with probability ``advance_prob``, 0 stays. The first to
    ``finish`` wins (+1/-1, 0 on a tie). Dict observation per agent, per-agent and shared info."""

    traits = Traits(num_agents=2, utility="zero_sum", reward_style="terminal")

    @property
    def default_params(self):
        return ToyParams()

    def reset_env(self, key, params):
        state = ToyState(jnp.zeros(2, jnp.int32))
        return self._obs(state), state

    def step_env(self, key, state, action, params):
        moved = jax.random.bernoulli(key, params.advance_prob, (2,)) & (action == 1)
        position = jnp.minimum(state.position + moved.astype(jnp.int32), params.finish)
        won = position >= params.finish
        done = jnp.any(won)
        reward = jnp.where(done & (won[0] != won[1]), jnp.where(won, 1.0, -1.0), 0.0).astype(jnp.float32)
        info = {"position": position, "leader": jnp.argmax(position).astype(jnp.int32)}
        return self._obs(ToyState(position)), ToyState(position), reward, done, jnp.zeros((), bool), info

    def _obs(self, state):
        return {"own": state.position, "other": state.position[::-1]}

    def observation_space(self, params=None):
        params = self.default_params if params is None else params
        cell = spaces.Box(0, params.finish, (), np.int32)
        return spaces.Dict({"own": cell, "other": cell})

    def action_space(self, params=None):
        return spaces.Discrete(2)

    def render_text(self, state, params=None):
        return " ".join(str(int(p)) for p in state.position)


TOY = TimeLimit(ToyRace(), 6)
MULTI = registry_params(multi_agent=True) + [pytest.param(TOY, id="ToyRace")]


@pytest.mark.parametrize("env", MULTI)
def test_pettingzoo_api_and_seed_tests_without_warnings(env):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(ParallelEnv(env), num_cycles=200)
        parallel_seed_test(lambda: ParallelEnv(env))


@pytest.mark.parametrize("env", MULTI)
def test_agent_dicts_reproduce_the_environment(env):
    """Per-agent obs/reward/info equal the raw environment's slices, with the documented key chain
    (key(seed), one split per call); flags are episode-level; agents empty at the episode's end."""
    par = ParallelEnv(env)
    raw = jaxenvs.make(env, autoreset=False) if isinstance(env, str) else env
    params = raw.default_params
    reset, step = jax.jit(raw.reset), jax.jit(raw.step)
    agents = list(raw.agents)
    assert par.possible_agents == agents == [str(i) for i in range(raw.num_agents)]
    for a in agents:
        assert par.observation_space(a) is par.observation_space(a)
        assert par.action_space(a) is par.action_space(a)
    assert par.action_space(agents[0]) is not par.action_space(agents[1])  # independent sampling RNGs

    key = jax.random.key(3)
    key, sub = jax.random.split(key)
    obs, state = reset(sub, params)
    p_obs, p_infos = par.reset(seed=3)
    assert p_infos == {a: {} for a in agents}
    rng = np.random.default_rng(0)
    for t in range(60):
        for i, a in enumerate(agents):
            want = jax.tree.map(lambda x: np.asarray(x[i]), obs)
            assert data_equivalence(p_obs[a], _as_space(par.observation_space(a), want)), (t, a)
            assert p_obs[a] in par.observation_space(a)
        actions = {a: int(rng.integers(par.action_space(a).n)) for a in par.agents}
        key, sub = jax.random.split(key)
        joint = jnp.array([actions[a] for a in agents])
        obs, state, reward, terminated, truncated, info = step(sub, state, joint, params)
        p_obs, p_rew, p_term, p_trunc, p_info = par.step(actions)
        assert p_rew == {a: float(reward[i]) for i, a in enumerate(agents)}
        assert all(type(r) is float for r in p_rew.values())
        assert p_term == {a: bool(terminated) for a in agents} and p_trunc == {a: bool(truncated) for a in agents}
        for i, a in enumerate(agents):
            for k, v in info.items():
                v = np.asarray(v)
                np.testing.assert_array_equal(p_info[a][k], v[i] if v.ndim and v.shape[0] == len(agents) else v)
        if terminated or truncated:
            assert par.agents == []
            with pytest.raises(RuntimeError, match="episode is over"):
                par.step(actions)
            return
        assert par.agents == agents
    pytest.fail("no episode ended within 60 steps")


def _as_space(space, x):
    from jaxenvs.adapters.gymnasium import obs_to_numpy

    return obs_to_numpy(space, x)


def test_toy_episode_truncates_at_its_time_limit():
    par = ParallelEnv(TOY)
    par.reset(seed=0)
    flags = []
    for _ in range(6):
        _, _, term, trunc, _ = par.step({"0": 0, "1": 0})  # nobody moves: only the limit ends it
        flags.append((term["0"], trunc["0"], trunc["1"]))
    assert flags == [(False, False, False)] * 5 + [(False, True, True)]
    assert par.agents == []


def test_bad_input_names_agents_and_spaces():
    par = ParallelEnv(TOY, render_mode="ansi")
    par.reset(seed=0)
    assert par.render() == "0 0"
    with pytest.raises(ValueError, match=r"one action per live agent \['0', '1'\]; missing \['1'\], unknown \['2'\]"):
        par.step({"0": 1, "2": 1})
    with pytest.raises(ValueError, match=r"agent '1'.*action 2 is outside the action space Discrete\(2\)"):
        par.step({"0": 1, "1": 2})
    with pytest.raises(TypeError, match="dict mapping each agent"):
        par.step([1, 1])
    with pytest.raises(ValueError, match="single-agent environment"):
        ParallelEnv("GridWorld-v0")
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        ParallelEnv(TOY, render_mode="rgb_array")  # the toy has no render()


@pytest.mark.parametrize("env_id", [p for p in registry_params(multi_agent=True)])
def test_registered_envs_render(env_id):
    raw = jaxenvs.make(env_id, autoreset=False)
    par = ParallelEnv(env_id, render_mode="rgb_array")
    par.reset(seed=1)
    np.testing.assert_array_equal(par.render(), np.asarray(jax.jit(raw.render)(par.state)))
    text = ParallelEnv(env_id, render_mode="ansi")
    text.reset(seed=1)
    assert text.render() == raw.render_text(text.state)
