"""The built-in environments under JAX configurations users turn on: strict dtype promotion,
x64, and disabled jit (each through JAX's own context manager, so no other test is affected)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import enable_x64

import jaxenvs
from jaxenvs import spaces
from jaxenvs.checker import RULES, check_env
from jaxenvs.rollout import random_policy, rollout

IDS = ["GridWorld-v0", "PointEnv-v0", "HurdleRace-v0", "Lottery-v0", "RockPaperScissors-v0"]
KEY = jax.random.key(0)


@pytest.mark.parametrize("env_id", IDS)
def test_envs_vector_env_and_rollout_trace_under_strict_dtype_promotion(env_id):
    # GridWorld's reset and HurdleRace's step added int32 and bool, which strict promotion refuses
    # when the function is traced: tracing (eval_shape, no compilation) is what is checked here
    env = jaxenvs.make(env_id)
    agents = (env.num_agents,) if env.multi_agent else ()
    venv = jaxenvs.VectorEnv(env, 3)

    def everything(key):
        obs, state = env.reset(key)
        env.step(key, state, env.action_space().sample(key, agents))
        obs, state = venv.reset(key)
        out = venv.step(key, state, env.action_space().sample(key, (3, *agents)))
        return out, rollout(env, key, random_policy(env), 4, num_envs=2, record_states=False).reward

    with jax.numpy_dtype_promotion("strict"):
        (obs, state, reward, terminated, truncated, info), rewards = jax.eval_shape(everything, KEY)
    assert terminated.shape == (3,) and rewards.shape[:2] == (4, 2)


def test_check_env_under_strict_dtype_promotion():
    with jax.numpy_dtype_promotion("strict"):
        report = check_env(jaxenvs.make("GridWorld-v0"), num_envs=1, num_steps=3)
    assert "jit" in report.rules and "scan" in report.rules


LOTTERY = jaxenvs.make("Lottery-v0", autoreset=False)


@jax.jit
def _jitted_draws(key):
    _, state = LOTTERY.reset(key)
    won = jax.vmap(lambda k: LOTTERY.step(k, state, jnp.int32(1))[5]["won"])(jax.random.split(key, 400))
    return won, spaces.MultiBinary((3, 7)).sample(key, (20,))


def _draws():
    """Lottery outcomes (MegaHaul, 400 keys) and MultiBinary samples for one key, on the host."""
    won, bits = _jitted_draws(KEY)  # traced and compiled again under another x64 setting
    return np.asarray(won), np.asarray(bits)


def test_same_key_same_draws_with_and_without_x64():
    won32, bits32 = _draws()
    with enable_x64(True):
        won64, bits64 = _draws()
    np.testing.assert_array_equal(won32, won64)
    np.testing.assert_array_equal(bits32, bits64)
    assert 5 <= won32.sum() <= 40  # MegaHaul wins with probability 0.05: 20 expected of 400
    assert bits32.dtype == bits64.dtype == np.int32 and 0.4 < bits32.mean() < 0.6


def test_check_env_runs_compiled_under_disable_jit():
    # without jit every call would trace again: the retrace rule would fail falsely
    with jax.disable_jit():
        report = check_env(jaxenvs.make("GridWorld-v0"), num_envs=1, num_steps=3)
    from jaxenvs.checker import RULEBOOK

    traits = jaxenvs.make("GridWorld-v0").traits
    applicable = tuple(r for r in RULES if RULEBOOK[r].applies_to(traits))
    assert "key-sensitivity" not in applicable and "mask-step" not in applicable
    assert report.rules == applicable and report.skipped == ()


def test_verify_port_default_policy_traces_under_strict_dtype_promotion():
    # its sticky-action draw multiplied a float by a bool, which strict promotion refuses
    from jaxenvs.testing.runs import default_policy

    for env_id in ("GridWorld-v0", "HurdleRace-v0", "TicTacToe-v0"):
        env = jaxenvs.make(env_id)
        policy = default_policy(env.action_space(), env.num_agents, env.multi_agent)
        obs = jax.eval_shape(env.reset, KEY)[0]
        with jax.numpy_dtype_promotion("strict"):
            action = jax.eval_shape(policy, KEY, KEY, obs)
        assert action.shape == env.batched_action_shape()
