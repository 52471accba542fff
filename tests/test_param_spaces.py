"""jaxenvs.levels: param spaces (sampling statistics, vmap, contains, mutation, declaration errors),
level hashes and JSON, default spaces of the built-in envs, and VectorEnv's per-env levels."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs import struct
from jaxenvs.core import ParamsError, StateError
from jaxenvs.levels import (
    Choice,
    ParamSpace,
    ParamSpaceError,
    Uniform,
    level_from_json,
    level_hash,
    level_hashes,
    level_to_json,
    load_levels,
    overlap,
    param_space,
    save_levels,
    stack_levels,
)
from jaxenvs.vector import LevelState, VectorEnv


@struct.dataclass
class Params:
    size: int = 5
    rate: float = 0.5
    flag: bool = False
    vec: jax.Array = struct.field(default_factory=lambda: jnp.zeros((3,), jnp.float32))


N = 4000


def draw(space, key, shape=()):
    """``space.sample(key, shape)``, compiled (one dispatch instead of one per operation)."""
    return jax.jit(lambda k: space.sample(k, shape))(key)


def test_uniform_int_is_inclusive_and_uniform():
    space = ParamSpace(Params(), size=Uniform(3, 9))
    levels = draw(space, jax.random.key(0), (N,))
    assert levels.size.dtype == jnp.int32 and levels.size.shape == (N,)
    counts = np.bincount(np.asarray(levels.size), minlength=10)[3:]
    assert counts.sum() == N and np.all(counts > 0)
    # each count is Binomial(N, 1/7): within 5 standard deviations of N/7
    p = 1 / 7
    assert np.all(np.abs(counts - N * p) < 5 * math.sqrt(N * p * (1 - p))), counts
    # the undeclared fields keep the base's values
    assert np.all(np.asarray(levels.rate) == np.float32(0.5)) and not np.any(levels.flag)


def test_uniform_float_half_open_mean_and_choice_weights():
    space = ParamSpace(Params(), rate=Uniform(0.25, 0.75), flag=Choice([False, True], weights=[1, 3]))
    levels = draw(space, jax.random.key(1), (N,))
    rate = np.asarray(levels.rate)
    assert rate.dtype == np.float32 and rate.min() >= 0.25 and rate.max() < 0.75
    sd = 0.5 / math.sqrt(12 * N)  # standard deviation of the mean of N uniforms on a width of 0.5
    assert abs(rate.mean() - 0.5) < 5 * sd
    frac = np.asarray(levels.flag).mean()
    assert abs(frac - 0.75) < 5 * math.sqrt(0.75 * 0.25 / N)


def test_batched_sample_equals_vmap_and_batch_shape():
    space = ParamSpace(Params(), size=Uniform(0, 100), vec=Uniform([0, 1, 2], [1, 2, 3]))
    key = jax.random.key(2)
    a = space.sample(key, (6,))
    b = jax.vmap(space.sample)(jax.random.split(key, 6))
    assert level_hashes(a) == level_hashes(b)
    c = space.sample(key, (2, 3))
    assert c.vec.shape == (2, 3, 3) and c.size.shape == (2, 3)
    vec = np.asarray(a.vec)
    assert np.all((vec >= [0, 1, 2]) & (vec < [1, 2, 3]))  # elementwise bounds


def test_contains_ranges_fixed_and_structure():
    space = ParamSpace(Params(), size=Uniform(3, 9), rate=0.25)
    assert bool(space.contains(Params(size=3, rate=0.25))) and bool(space.contains(Params(size=9, rate=0.25)))
    assert not bool(space.contains(Params(size=10, rate=0.25)))
    assert not bool(space.contains(Params(size=5, rate=0.5)))  # the fixed value
    assert not bool(space.contains(Params(size=5, rate=0.25, flag=True)))  # an undeclared field moved
    assert not bool(space.contains({"size": 5}))  # another tree
    assert not bool(space.contains(Params(size=5, rate=0.25, vec=jnp.zeros((4,)))))  # another shape
    batch = draw(space, jax.random.key(3), (64,))
    assert bool(jnp.all(jax.jit(jax.vmap(space.contains))(batch)))


def test_default_mutation_redraws_one_field():
    space = ParamSpace(Params(), size=Uniform(0, 1000), rate=Uniform(0.0, 1.0))
    level = draw(space, jax.random.key(4))
    mutated = jax.jit(jax.vmap(space.mutate, in_axes=(0, None)))(jax.random.split(jax.random.key(5), 200), level)
    size_moved = np.asarray(mutated.size) != int(level.size)
    rate_moved = np.asarray(mutated.rate) != float(level.rate)
    assert not np.any(size_moved & rate_moved)  # never both
    assert size_moved.sum() > 50 and rate_moved.sum() > 50  # each one about half the time
    assert bool(jnp.all(jax.jit(jax.vmap(space.contains))(mutated)))


def test_declaration_errors_name_the_field():
    with pytest.raises(ParamSpaceError, match=r"'sizes' is not a params field; valid fields: size, rate, flag, vec"):
        ParamSpace(Params(), sizes=Uniform(1, 2))
    with pytest.raises(ParamSpaceError, match=r"field 'size'.*Uniform\(5, 4\) is empty"):
        ParamSpace(Params(), size=Uniform(5, 4))
    with pytest.raises(ParamSpaceError, match=r"field 'rate'.*empty .*low < high"):
        ParamSpace(Params(), rate=Uniform(0.5, 0.5))
    with pytest.raises(ParamSpaceError, match="bounds must be integers"):
        ParamSpace(Params(), size=Uniform(1.5, 4))
    with pytest.raises(ParamSpaceError, match="finite"):
        ParamSpace(Params(), rate=Uniform(0.0, float("inf")))
    with pytest.raises(ParamSpaceError, match=r"bool; use Choice"):
        ParamSpace(Params(), flag=Uniform(0, 1))
    with pytest.raises(ParamSpaceError, match=r"Choice value \[1, 2\] has shape \(2,\), the field has \(\)"):
        ParamSpace(Params(), size=Choice([1, [1, 2]]))
    with pytest.raises(ParamSpaceError, match="at least one value"):
        ParamSpace(Params(), size=Choice([]))
    with pytest.raises(ParamSpaceError, match="not exactly representable as int32"):
        ParamSpace(Params(), size=Choice([1, 2.5]))


def test_generator_errors_at_construction():
    def batched(key, p):
        return p.replace(vec=jnp.zeros((2, 3), jnp.float32))

    def wrong_dtype(key, p):
        return p.replace(size=jnp.float32(1.0))

    def wrong_tree(key, p):
        return {"size": p.size}

    with pytest.raises(ParamSpaceError, match=r"generator batched returned params.vec of shape \(2, 3\).*expected shape \(3,\)"):
        ParamSpace(Params(), generator=batched)
    with pytest.raises(ParamSpaceError, match=r"params.size of shape \(\) and dtype float32, expected shape \(\) and dtype int32"):
        ParamSpace(Params(), generator=wrong_dtype)
    with pytest.raises(ParamSpaceError, match="returned a dict tree"):
        ParamSpace(Params(), mutate=wrong_tree)


def test_generator_builds_structured_levels():
    def ramp(key, p):  # vec = size * (0, 1, 2)
        return p.replace(vec=p.size * jnp.arange(3, dtype=jnp.float32))

    space = ParamSpace(Params(), size=Uniform(1, 4), generator=ramp, valid=lambda p: p.vec[1] == p.size)
    levels = draw(space, jax.random.key(6), (16,))
    np.testing.assert_array_equal(np.asarray(levels.vec), np.asarray(levels.size)[:, None] * np.arange(3))
    assert bool(jnp.all(jax.jit(jax.vmap(space.contains))(levels)))
    assert not bool(space.contains(Params(size=2, vec=jnp.zeros((3,), jnp.float32))))  # valid() is False


def test_level_hash_is_stable_and_canonical():
    level = Params(size=7, rate=0.1, flag=True, vec=jnp.asarray([1.0, -0.0, 2.5], jnp.float32))
    # the documented rule, written out: per leaf "path|dtype|shape|" then its little-endian bytes
    import hashlib

    h = hashlib.sha256()
    for path, a in ((".size", np.int32(7)), (".rate", np.float32(0.1)), (".flag", np.bool_(True)),
                    (".vec", np.array([1.0, -0.0, 2.5], "<f4"))):
        h.update(f"{path}|{a.dtype.str.lstrip('<>=|')}|{a.shape}|".encode() + a.tobytes())
    assert level_hash(level) == h.hexdigest()
    # and its value, so that a change of the rule (which would orphan every stored hash) fails here
    assert level_hash(level) == "d18306dea24e4a727844c792b29d34a387151c4bf53dfd98893b4705a32af8f0"
    same = Params(size=jnp.int32(7), rate=np.float32(0.1), flag=np.bool_(True), vec=np.array([1.0, -0.0, 2.5], np.float32))
    assert level_hash(same) == level_hash(level)  # Python scalars hash as the arrays JAX makes of them
    assert level_hash(level.replace(size=8)) != level_hash(level)
    assert level_hash(level.replace(vec=jnp.asarray([1.0, 0.0, 2.5], jnp.float32))) != level_hash(level)  # -0.0 vs 0.0
    assert level_hash(level.replace(rate=jnp.float16(0.1))) != level_hash(level)  # the dtype is hashed


def test_level_hash_is_the_same_in_another_process():
    import subprocess
    import sys

    code = (
        "import jax.numpy as jnp; from jaxenvs.levels import level_hash; from jaxenvs.envs.maze import Maze;"
        "print(level_hash(Maze().default_params))"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    from jaxenvs.envs.maze import Maze

    assert other == level_hash(Maze().default_params)


def test_json_round_trip_is_exact(tmp_path):
    bits = np.random.default_rng(0).integers(0, 2**32, size=(3,), dtype=np.uint64).astype(np.uint32)
    vec = bits.view(np.float32)
    vec = np.where(np.isfinite(vec), vec, np.float32(1e-38))  # any finite float32, subnormals included
    level = Params(size=-123456789, rate=np.float32(0.1), flag=True, vec=jnp.asarray(vec))
    text = json.dumps(level_to_json(level))
    back = level_from_json(text, Params())
    assert level_hash(back) == level_hash(level)
    np.testing.assert_array_equal(np.asarray(back.vec).view(np.uint32), vec.view(np.uint32))
    batch = ParamSpace(Params(), size=Uniform(0, 9), rate=Uniform(0.0, 1.0)).sample(jax.random.key(7), (5,))
    save_levels(tmp_path / "levels.json", batch, env_id="test")
    assert level_hashes(load_levels(tmp_path / "levels.json", Params())) == level_hashes(batch)
    # a field left out takes the like's value
    assert int(level_from_json({"size": 3}, Params()).size) == 3


def test_json_errors():
    with pytest.raises(ParamSpaceError, match=r"unknown field\(s\) 'speed' for Params; valid fields: size, rate, flag, vec"):
        level_from_json({"speed": 1}, Params())
    with pytest.raises(ParamSpaceError, match=r"field 'vec' .*got shape \(2,\), expected \(3,\)"):
        level_from_json({"vec": [1.0, 2.0]}, Params())
    with pytest.raises(ParamSpaceError, match="not exactly representable as int32"):
        level_from_json({"size": 2.5}, Params())
    with pytest.raises(ParamSpaceError, match="finite"):
        level_to_json(Params(rate=float("nan")))
    with pytest.raises(ParamSpaceError, match=r"level 1: .*unknown field"):
        load_levels([{"size": 1}, {"bad": 2}], Params())


def test_overlap_finds_shared_levels():
    space = ParamSpace(Params(), size=Uniform(0, 10**6))
    a, b = draw(space, jax.random.key(8), (50,)), draw(space, jax.random.key(9), (50,))
    assert overlap(a, b) == []
    both = stack_levels([jax.tree.map(lambda x: x[3], a), jax.tree.map(lambda x: x[0], b)])
    assert overlap(a, both) == [level_hashes(a)[3]]


@pytest.mark.parametrize("env_id", ["GridWorld-v0", "PointEnv-v0", "HurdleRace-v0", "Maze-v0"])
def test_builtin_default_spaces_play(env_id):
    env = jaxenvs.make(env_id)
    space = param_space(env)  # through TimeLimit and AutoReset
    levels = draw(space, jax.random.key(10), (8,))
    assert bool(jnp.all(jax.jit(jax.vmap(space.contains))(levels)))
    env.unwrapped.validate_params(levels)  # every drawn level is valid params
    obs, _ = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(11), 8), levels)
    assert jax.tree.leaves(obs)[0].shape[0] == 8


def test_env_without_space_is_named():
    with pytest.raises(ParamSpaceError, match="Lottery declares no param space"):
        param_space(jaxenvs.make("Lottery-v0"))


# ---- VectorEnv: per-env params and levels drawn at auto-reset -------------------------------
@pytest.fixture(scope="module")
def maze_vector():
    env = jaxenvs.make("Maze-v0")
    space = param_space(env)
    vec = VectorEnv(env, 16, levels=space, reset_capacity=4)
    return env, space, vec, jax.jit(vec.reset), jax.jit(vec.step)


def test_vector_levels_redrawn_only_for_finished_envs(maze_vector):
    env, space, vec, reset, step = maze_vector
    obs, state = reset(jax.random.key(0))
    assert isinstance(state, LevelState) and state.params.walls.shape == (16, 13, 13)
    assert len(set(level_hashes(state.params))) == 16  # each env its own level
    np.testing.assert_array_equal(np.asarray(vec.env.unwrapped_state(state.state).pos), np.asarray(state.params.start))

    @jax.jit
    def run(key, state):
        def body(state, k):
            k_act, k_step = jax.random.split(k)
            _, new, _, terminated, truncated, _ = vec.step(k_step, state, jax.random.randint(k_act, (16,), 0, 4))
            moved = jnp.any((new.params.walls != state.params.walls).reshape(16, -1), axis=1)
            moved |= jnp.any(new.params.start != state.params.start, axis=1) | jnp.any(new.params.goal != state.params.goal, axis=1)
            at_start = jnp.all(vec.env.unwrapped_state(new.state).pos == new.params.start, axis=1)
            return new, (terminated | truncated, moved, at_start, jax.vmap(space.contains)(new.params))

        return jax.lax.scan(body, state, jax.random.split(key, 260))

    _, (done, moved, at_start, inside) = jax.tree.map(np.asarray, run(jax.random.key(1), state))
    # a level changes exactly when its env finishes (a fresh draw equal to the old level has
    # probability ~0); the restarted env stands on its new level's start; every level is in the space
    np.testing.assert_array_equal(moved, done)
    assert np.all(at_start[done]) and np.all(inside)
    assert done.sum() >= 16 and done.any(axis=0).all()  # the time limit ended every env's episode


def test_vector_levels_errors(maze_vector):
    env, space, vec, reset, step = maze_vector
    obs, state = reset(jax.random.key(0))
    with pytest.raises(ParamsError, match="takes no params"):
        vec.step(jax.random.key(1), state, jnp.zeros((16,), jnp.int32), env.default_params)
    with pytest.raises(StateError, match="takes the LevelState"):
        vec.step(jax.random.key(1), state.state, jnp.zeros((16,), jnp.int32))
    with pytest.raises(ParamsError, match=r"levels .* returned params.walls of shape \(4, 13, 13\)"):
        VectorEnv(env, 16, levels=lambda k: space.sample(k, (4,)))


def test_vector_per_env_params_wrong_leading_axis():
    env = jaxenvs.make("GridWorld-v0")
    levels = draw(param_space(env), jax.random.key(0), (8,))
    vec = VectorEnv(env, 8, params_axis=0)
    obs, _ = vec.reset(jax.random.key(1), levels)
    assert np.all(np.asarray(obs["agent"]) < np.asarray(levels.size)[:, None])  # each env on its own grid
    with pytest.raises(ParamsError, match=r"params.size has shape \(8,\), which has no axis 0 of size 4"):
        VectorEnv(env, 4, params_axis=0).reset(jax.random.key(1), levels)


def test_gymnax_cartpole_space_keeps_derived_fields():
    pytest.importorskip("gymnax")
    env = jaxenvs.make("gymnax/CartPole-v1")
    levels = draw(param_space(env), jax.random.key(12), (64,))
    np.testing.assert_allclose(np.asarray(levels.total_mass), np.asarray(levels.masscart + levels.masspole), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(levels.polemass_length), np.asarray(levels.masspole * levels.length), rtol=1e-6)
    assert np.all((np.asarray(levels.length) >= 0.25) & (np.asarray(levels.length) < 1.0))
    assert np.all(np.asarray(levels.gravity) == np.float32(9.8))  # not declared: gymnax's value
