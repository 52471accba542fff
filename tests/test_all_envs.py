"""Every registered environment keeps the contract: jaxenvs.check_env, plus a large batched rollout.

The ids are read from ``jaxenvs.registry`` when the tests are collected, so every environment
registered by ``import jaxenvs`` is covered; an id that cannot be made fails.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs.checker import check_env

ENV_IDS = sorted(jaxenvs.registry)

NUM_ENVS = 4096
NUM_STEPS = 1000
SMALL_ENVS = 256  # a second, smaller program reruns the first 256 envs


@pytest.mark.parametrize("autoreset", [True, False], ids=["autoreset", "no-autoreset"])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_check_env(env_id, autoreset):
    env = jaxenvs.make(env_id, autoreset=autoreset)
    report = check_env(env, key=jax.random.key(0))
    assert report.env == env.unwrapped.name
    if env.traits.chance == "stochastic":
        assert "key-sensitivity" in report.rules


def _uint32_hash(x: jax.Array) -> jax.Array:
    """uint32[B]: a position-weighted hash of each row of ``x`` (leading axis B)."""
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    if x.dtype == jnp.bool_ or x.dtype.itemsize != 4:
        x = x.astype(jnp.uint32)
    else:
        x = jax.lax.bitcast_convert_type(x, jnp.uint32)
    x = x.reshape(x.shape[0], -1)
    weights = jnp.arange(x.shape[1], dtype=jnp.uint32) * jnp.uint32(2654435761) + jnp.uint32(1)
    return jnp.sum(x * weights, axis=1, dtype=jnp.uint32)


def make_rollout(env, num_envs: int, num_steps: int):
    """Jitted ``key -> (state, stats)``: ``num_envs`` envs (vmap) take uniformly random (legal, where
    the env has a mask) actions for ``num_steps`` steps in a lax.scan. Env ``b`` at step ``t`` uses keys
    ``fold_in(fold_in(key, t), b)``, so runs with other batch sizes reproduce it.
    ``stats`` holds per-env fingerprints of everything step returns (a hash of the non-float leaves
    and a weighted sum of the float ones), episode counts, and whether every observation was in the
    observation space and every reward finite."""
    params = env.default_params
    obs_space, act_space = env.observation_space(params), env.action_space(params)
    agent_lead = (env.num_agents,) if env.multi_agent else ()
    contains = jax.vmap(obs_space.contains)
    if env.multi_agent:
        contains = jax.vmap(lambda o: jnp.all(jax.vmap(obs_space.contains)(o)))
    envs = jnp.arange(num_envs)
    masked = env.traits.action_style == "full_action_set"
    fold_each = jax.vmap(jax.random.fold_in, (None, 0))

    def rollout(key):
        k_reset, k_step = jax.random.split(key)
        obs, state = jax.vmap(env.reset, (0, None))(fold_each(k_reset, envs), params)
        zeros = jnp.zeros((num_envs,), jnp.int32)
        stats = {
            "fingerprint": jnp.zeros((num_envs,), jnp.uint32),
            "float_sum": jnp.zeros((num_envs,), jnp.float32),
            "episodes": zeros,
            "terminated": zeros,
            "in_space": contains(obs),
            "finite": jnp.ones((num_envs,), bool),
        }

        def body(carry, t):
            state, stats, obs = carry
            keys = fold_each(jax.random.fold_in(k_step, t), envs)
            k_env, k_act = jax.vmap(jax.random.split, out_axes=1)(keys)
            if masked:  # random legal actions
                actions = jax.vmap(lambda k, m: act_space.sample(k, agent_lead, mask=m))(k_act, obs["action_mask"])
            else:
                actions = jax.vmap(lambda k: act_space.sample(k, agent_lead))(k_act)
            obs, state, reward, terminated, truncated, info = jax.vmap(env.step, (0, 0, 0, None))(
                k_env, state, actions, params
            )
            leaves = jax.tree.leaves((obs, reward, terminated, truncated, info))
            h = jnp.zeros((num_envs,), jnp.uint32)
            float_sum = stats["float_sum"]
            for i, leaf in enumerate(leaves):
                if jnp.issubdtype(leaf.dtype, jnp.floating):
                    # floats may round differently in another program: a weighted sum, compared with a tolerance
                    flat = leaf.reshape(num_envs, -1)
                    float_sum = float_sum + flat @ jnp.arange(1, flat.shape[1] + 1, dtype=leaf.dtype) * (i + 1)
                else:
                    h = h + _uint32_hash(leaf) * jnp.uint32(2 * i + 1)
            finite = jnp.all(jnp.isfinite(reward).reshape(num_envs, -1), axis=1)
            stats = {
                "fingerprint": (stats["fingerprint"] ^ h) * jnp.uint32(16777619),
                "float_sum": float_sum,
                "episodes": stats["episodes"] + (terminated | truncated),
                "terminated": stats["terminated"] + terminated,
                "in_space": stats["in_space"] & contains(obs),
                "finite": stats["finite"] & finite,
            }
            return (state, stats, obs), None

        carry, _ = jax.lax.scan(body, (state, stats, obs), jnp.arange(num_steps))
        return carry[:2]

    return jax.jit(rollout)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_large_batched_rollout(env_id):
    env = jaxenvs.make(env_id)
    key = jax.random.key(42)
    rollout = make_rollout(env, NUM_ENVS, NUM_STEPS)
    _, stats = rollout(key)
    stats = jax.tree.map(np.asarray, stats)

    assert stats["in_space"].all(), f"{(~stats['in_space']).sum()} envs left the observation space"
    assert stats["finite"].all(), f"{(~stats['finite']).sum()} envs saw non-finite rewards"
    limit = env.spec.max_episode_steps
    if limit is not None:
        # TimeLimit truncates at the latest every `limit` steps
        assert stats["episodes"].min() >= NUM_STEPS // limit
    else:
        assert stats["terminated"].min() >= 1, "an env without a time limit never terminated"

    # same key, another program (fewer envs): the same trajectories for the envs both ran
    small = make_rollout(env, SMALL_ENVS, NUM_STEPS)
    _, stats_small = small(key)
    for name in ("fingerprint", "episodes", "terminated"):
        np.testing.assert_array_equal(np.asarray(stats_small[name]), stats[name][:SMALL_ENVS], err_msg=name)
    # float32 sums of 1000 steps: separately compiled programs agree to a few ulps per step
    np.testing.assert_allclose(np.asarray(stats_small["float_sum"]), stats["float_sum"][:SMALL_ENVS], rtol=1e-5, atol=1e-3)

    # another key: other random actions, so every env's trajectory differs
    _, other = small(jax.random.key(43))
    differs = (np.asarray(other["fingerprint"]) != stats_small["fingerprint"]) | (
        np.abs(np.asarray(other["float_sum"]) - stats_small["float_sum"]) > 1e-3 + 1e-5 * np.abs(stats_small["float_sum"])
    )
    assert differs.all(), f"{(~differs).sum()} of {SMALL_ENVS} envs repeated their trajectory under another key"
