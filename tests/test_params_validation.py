"""Params validation: params that bypass ``make`` are validated wherever they
enter, the wrong class is named, and checked mode validates traced params."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import jaxenvs
from jaxenvs.adapters import resolve_env
from jaxenvs.core import ParamsError, check_params
from jaxenvs.wrappers import WithParams

KEY = jax.random.key(0)
GRID = jaxenvs.make("GridWorld-v0", autoreset=False)
POINT = jaxenvs.make("PointEnv-v0", autoreset=False)
RACE = jaxenvs.make("HurdleRace-v0", autoreset=False)
LOTTERY = jaxenvs.make("Lottery-v0", autoreset=False)

# (env, field, bad value, message) — the examples first
BAD_VALUES = [
    (GRID, "size", 1, r"GridWorld size must be an integer in \[2, 46340\], got 1"),
    (GRID, "size", 0, r"GridWorld size must be an integer in \[2, 46340\], got 0"),
    (GRID, "size", 5.0, r"GridWorld size must be an integer in \[2, 46340\], got 5.0"),
    (RACE, "jump_success_rate", float("nan"), r"HurdleRace jump_success_rate must be a probability in \[0, 1\], got nan"),
    (RACE, "jump_success_rate", 1.5, r"HurdleRace jump_success_rate must be a probability in \[0, 1\]"),
    (LOTTERY, "power_rich_prob", 2.0, r"Lottery power_rich_prob must be a probability in \[0, 1\], got 2.0"),
    (LOTTERY, "mega_haul_prob", -0.1, r"Lottery mega_haul_prob must be a probability in \[0, 1\]"),
    (LOTTERY, "losing_reward", float("inf"), r"Lottery losing_reward must be a finite number in \[-3.40282e\+38, 3.40282e\+38\], got inf"),
    (GRID, "size", 46341, r"GridWorld size must be an integer in \[2, 46340\], got 46341"),  # size**2 wraps int32
    (GRID, "size", 60000, r"GridWorld size must be an integer in \[2, 46340\], got 60000"),
    (GRID, "size", 65536, r"GridWorld size must be an integer in \[2, 46340\], got 65536"),
    (LOTTERY, "power_rich_prize", 1e39, r"Lottery power_rich_prize must be a finite number in \[-3.40282e\+38, 3.40282e\+38\]"),
    (POINT, "reset_bound", 1e30, r"PointEnv reset_bound must be a finite number in \(0, 1e\+18\], got 1e\+30"),
    (POINT, "action_bound", float("inf"), r"PointEnv action_bound must be a finite number in \(0, 1e\+18\], got inf"),
    (POINT, "goal_tolerance", 0.0, r"PointEnv goal_tolerance must be a finite number > 0, got 0.0"),
]
IDS = [f"{env.name}-{field}={value}" for env, field, value, _ in BAD_VALUES]


@pytest.mark.parametrize("env, field, value, match", BAD_VALUES, ids=IDS)
def test_eager_reset_and_step_validate_concrete_params(env, field, value, match):
    params = env.default_params.replace(**{field: value})
    with pytest.raises(ValueError, match=match):
        env.reset(KEY, params)
    state = jax.eval_shape(env.reset, KEY)[1]  # never computed with: the params fail first
    action = jnp.zeros(env.batched_action_shape(), env.action_space().dtype)
    with pytest.raises(ValueError, match=match):
        env.step(KEY, state, action, params)


@pytest.mark.parametrize("env, field, value, match", BAD_VALUES[:1] + BAD_VALUES[3:4], ids=IDS[:1] + IDS[3:4])
def test_every_entry_point_validates(env, field, value, match):
    params = env.default_params.replace(**{field: value})
    with pytest.raises(ValueError, match=match):
        WithParams(env, params)
    with pytest.raises(ValueError, match=match):
        jaxenvs.VectorEnv(env, 2).reset(KEY, params)
    with pytest.raises(ValueError, match=match):
        jaxenvs.rollout.rollout(env, KEY, jaxenvs.rollout.random_policy(env), 2, params=params)
    with pytest.raises(ValueError, match=match):
        resolve_env(env, params)
    # constants closed over by jit are concrete, hence validated when traced
    with pytest.raises(ValueError, match=match):
        jax.jit(lambda k: env.reset(k, params))(KEY)


def test_another_envs_params_name_the_expected_class():
    with pytest.raises(ParamsError, match=r"GridWorld expects params of class jaxenvs\.envs\.grid_world\.EnvParams .*got jaxenvs\.envs\.point_env\.EnvParams"):
        GRID.reset(KEY, POINT.default_params)
    with pytest.raises(ParamsError, match=r"expects params of class .*got builtins\.dict"):
        check_params(GRID, {"size": 5})
    assert isinstance(ParamsError("x"), TypeError)


def test_good_and_stacked_params_pass_and_none_means_default():
    assert check_params(GRID, None) == GRID.default_params
    stacked = jax.tree.map(lambda *x: np.stack(x), GRID.default_params.replace(size=3), GRID.default_params)
    assert check_params(GRID, stacked) is stacked
    with pytest.raises(ValueError, match=r"size must be an integer in \[2, 46340\], got array\(\[1, 5\]\)"):
        check_params(GRID, stacked.replace(size=np.array([1, 5])))


def test_traced_params_pass_unchecked_but_checked_mode_rejects_them():
    bad = LOTTERY.default_params.replace(power_rich_prob=jnp.float32(2.0))
    # traced: nothing can be read on the host, so plain jit runs (and the documented rule applies)
    jax.jit(LOTTERY.reset)(KEY, bad)
    env = jaxenvs.make("Lottery-v0", checked=True, autoreset=False)
    reset = jaxenvs.checked(env.reset)
    reset(KEY, env.default_params)
    with pytest.raises(checkify.JaxRuntimeError, match=r"Lottery: params rejected by validate_params"):
        reset(KEY, bad)
    # under vmap over params, one bad entry is enough
    batch = jax.tree.map(lambda *x: jnp.stack([jnp.asarray(v, jnp.float32) for v in x]), env.default_params, bad)
    with pytest.raises(checkify.JaxRuntimeError, match="params rejected"):
        jaxenvs.checked(jax.vmap(env.reset, in_axes=(None, 0)))(KEY, batch)


def test_grid_world_largest_size_draws_cells_inside_the_grid():
    # MAX_SIZE is the largest size whose size**2 cell index fits int32: every reset lies on the grid
    from jaxenvs.envs.grid_world import MAX_SIZE

    assert MAX_SIZE**2 <= np.iinfo(np.int32).max < (MAX_SIZE + 1) ** 2
    env = jaxenvs.make("GridWorld-v0", autoreset=False, size=MAX_SIZE)
    obs, _ = jax.vmap(env.reset)(jax.random.split(KEY, 2000))
    space = env.observation_space()
    assert bool(jax.vmap(space.contains)(obs).all())
    # both halves of the index range are reached (a wrap would put about half outside)
    assert int(obs["agent"][:, 1].max()) > MAX_SIZE // 2 > int(obs["agent"][:, 1].min())


def test_batched_params_without_a_batch_axis_name_params_axis():
    batched = jax.tree.map(lambda x: jnp.full((8,), x), GRID.default_params)
    with pytest.raises(ParamsError, match=r"params.size has shape \(8,\) where default_params has \(\).*jax.vmap\(env.reset"):
        GRID.reset(KEY, batched)
    state = GRID.reset(KEY)[1]
    with pytest.raises(ParamsError, match=r"GridWorld.step: params.size has shape \(8,\).*params_axis=0"):
        GRID.step(KEY, state, jnp.int32(0), batched)
    with pytest.raises(ParamsError, match=r"VectorEnv\(GridWorld, num_envs=8\): .*per-env params need params_axis=0"):
        jaxenvs.VectorEnv(GRID, 8).reset(KEY, batched)
    with pytest.raises(ParamsError, match=r"no axis 0 of size 4; with params_axis=0"):
        jaxenvs.VectorEnv(GRID, 4, params_axis=0).reset(KEY, batched)  # the batch of another size
    with pytest.raises(ParamsError, match=r"no axis 1 of size 8; with params_axis=1"):
        jaxenvs.VectorEnv(GRID, 8, params_axis=1).reset(KEY, batched)  # the batch on another axis
    with pytest.raises(ParamsError, match="params_axis=0"):  # caught when traced too
        jax.jit(jaxenvs.VectorEnv(GRID, 8).reset)(KEY, batched)
    # the right ways work: one params per env, through vmap or params_axis
    obs, _ = jaxenvs.VectorEnv(GRID, 8, params_axis=0).reset(KEY, batched)
    assert obs["agent"].shape == (8, 2)
    obs, _ = jax.vmap(GRID.reset)(jax.random.split(KEY, 8), batched)
    assert obs["agent"].shape == (8, 2)
