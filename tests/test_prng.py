"""jaxenvs.prng: the fused Threefry draws give exactly jax.random's values (so no key stream
changes), take the fused form for Threefry keys, and defer to jax.random for every other key."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenvs import prng

KEYS = {
    "typed threefry": jax.random.key(3),
    "raw PRNGKey": jax.random.PRNGKey(7),
    "rbg (deferred to jax.random)": jax.random.key(5, impl="rbg"),
    "unsafe_rbg (deferred)": jax.random.key(5, impl="unsafe_rbg"),
}


def _data(keys):
    return np.asarray(jax.random.key_data(keys) if jnp.issubdtype(keys.dtype, jax.dtypes.prng_key) else keys)


JAX_RNG = {"random_bits", "random_split", "threefry2x32"}  # jax.random's own primitives


def _rng_primitives(fn, *args):
    return JAX_RNG & {str(e.primitive) for e in jax.make_jaxpr(fn)(*args).jaxpr.eqns}


@pytest.mark.parametrize("key", KEYS.values(), ids=KEYS.keys())
@pytest.mark.parametrize("shape", [(), (1,), (2,), (5,), (3, 4)])
def test_bits_equal_jax_random_bits(key, shape):
    np.testing.assert_array_equal(prng.bits(key, shape), jax.random.bits(key, shape, jnp.uint32))


@pytest.mark.parametrize("key", KEYS.values(), ids=KEYS.keys())
@pytest.mark.parametrize("num", [1, 2, 7, (2, 3)])
def test_split_equals_jax_random_split(key, num):
    got, want = prng.split(key, num), jax.random.split(key, num)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(_data(got), _data(want))


def test_equal_under_jit_and_vmap_over_a_batch_of_keys():
    keys = jax.random.split(jax.random.key(1), 9)
    np.testing.assert_array_equal(
        jax.jit(jax.vmap(lambda k: prng.bits(k, (2,))))(keys),
        jax.vmap(lambda k: jax.random.bits(k, (2,), jnp.uint32))(keys),
    )
    np.testing.assert_array_equal(
        _data(jax.jit(jax.vmap(lambda k: prng.split(k, 3)))(keys)), _data(jax.vmap(lambda k: jax.random.split(k, 3))(keys))
    )


def test_threefry_keys_take_the_fused_form_and_other_keys_do_not():
    """The fused form calls none of jax.random's primitives (their CPU lowering is the rolled loop);
    rbg keys go to jax.random; so the equalities above do not compare a call with itself."""
    typed, raw, rbg = jax.random.key(0), jax.random.PRNGKey(0), jax.random.key(0, impl="rbg")
    for key in (typed, raw):
        assert _rng_primitives(lambda k: prng.bits(k, (4,)), key) == set()
        assert _rng_primitives(lambda k: prng.split(k, 4), key) == set()
        assert _rng_primitives(lambda k: jax.random.bits(k, (4,), jnp.uint32), key)
    assert _rng_primitives(lambda k: prng.bits(k, (4,)), rbg)
    assert _rng_primitives(lambda k: prng.split(k, 4), rbg)


def test_the_original_threefry_layout_defers_to_jax_random():
    """Under jax_threefry_partitionable=False JAX lays its counters out otherwise: prng follows it
    by calling jax.random (same values as JAX under that setting)."""
    key = jax.random.key(11)
    with jax.threefry_partitionable(False):
        np.testing.assert_array_equal(prng.bits(key, (5,)), jax.random.bits(key, (5,), jnp.uint32))
        np.testing.assert_array_equal(_data(prng.split(key, 3)), _data(jax.random.split(key, 3)))
        assert _rng_primitives(lambda k: prng.bits(k, (4,)), key)


@pytest.mark.parametrize("key", KEYS.values(), ids=KEYS.keys())
@pytest.mark.parametrize(
    "shape, low, high",
    [((), 0.0, 1.0), ((2,), -0.5, 0.5), ((3, 4), np.arange(4, dtype=np.float32), 5.0), ((5,), np.finfo(np.float32).tiny, 1.0)],
)
def test_uniform_equals_jax_random_uniform(key, shape, low, high):
    got, want = prng.uniform(key, shape, low, high), jax.random.uniform(key, shape, jnp.float32, low, high)
    assert got.dtype == want.dtype == jnp.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("key", KEYS.values(), ids=KEYS.keys())
@pytest.mark.parametrize("shape", [(), (3,), (64, 64), (50, 64)])
def test_normal_equals_jax_random_normal_in_and_out_of_jit(key, shape):
    """The orthogonal initialiser's draw (`train.networks`): the same values as jax.random.normal,
    eagerly and inside one compiled program (where only the fused form has no Threefry loop)."""
    want = jax.random.normal(key, shape, jnp.float32)
    for got in (prng.normal(key, shape), jax.jit(lambda k: prng.normal(k, shape))(key)):
        assert got.dtype == want.dtype == jnp.float32 and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    fused = not jnp.issubdtype(key.dtype, jax.dtypes.prng_key) or str(jax.random.key_impl(key)) == "threefry2x32"
    # the fused form has no jax.random primitive at any depth (jax.random.normal nests its own in a jit)
    assert bool(_rng_primitives_nested(jax.make_jaxpr(lambda k: prng.normal(k, shape))(key).jaxpr)) != fused


def _rng_primitives_nested(jaxpr) -> set:
    found = JAX_RNG & {str(e.primitive) for e in jaxpr.eqns}
    for e in jaxpr.eqns:
        for p in e.params.values():
            inner = getattr(p, "jaxpr", None)
            if inner is not None:
                found |= _rng_primitives_nested(getattr(inner, "jaxpr", inner))
    return found


SEEDS = (0, 1, 7, 12345, 2**31 - 1, 2**31, 2**32 - 1)


def _compiled_during(fn):
    """The names of the programs JAX compiled while ``fn()`` ran, and its result."""
    import jax._src.compiler as compiler

    names, original = [], compiler.compile_or_get_cached

    def spy(backend, computation, *args, **kwargs):
        names.append(str(computation.operation.attributes["sym_name"]))
        return original(backend, computation, *args, **kwargs)

    compiler.compile_or_get_cached = spy
    try:
        return names, fn()
    finally:
        compiler.compile_or_get_cached = original


@pytest.mark.parametrize("seed", SEEDS)
def test_keys_made_on_the_host_are_jax_random_key_and_split(seed):
    made, keys = _compiled_during(lambda: (prng.key_on_host(seed), [prng.split_on_host(prng.key_on_host(seed), n) for n in (1, 2, 5, 200)]))
    key, splits = keys
    assert made == []  # nothing compiled: what they are for
    np.testing.assert_array_equal(_data(key), _data(jax.random.key(seed)))
    assert str(jax.random.key_impl(key)) == "threefry2x32" and key.shape == ()
    for n, got in zip((1, 2, 5, 200), splits):
        np.testing.assert_array_equal(np.stack([_data(k) for k in got]), _data(jax.random.split(jax.random.key(seed), n)))


def test_keys_on_the_host_defer_to_jax_random_outside_their_cases():
    big = 2**32 + 5  # JAX's own key of a seed beyond 32 bits (in 32-bit mode) is jax.random.key's business
    np.testing.assert_array_equal(_data(prng.key_on_host(big)), _data(jax.random.key(big)))
    for key in (jax.random.key(5, impl="rbg"), jax.random.PRNGKey(7)):
        np.testing.assert_array_equal(np.stack([_data(k) for k in prng.split_on_host(key, 3)]), _data(jax.random.split(key, 3)))


@pytest.mark.parametrize("name", ["typed threefry", "raw PRNGKey", "rbg (deferred to jax.random)"])
@pytest.mark.parametrize("shape", [(5,), (32, 4), (3, 2, 7)])
def test_categorical_equals_jax_random_categorical(name, shape):
    """The same action per row, with masked (-inf) logits among them, plain, under jit, and vmapped
    over a batch of keys (as the trainer's rollout draws them)."""
    key = KEYS[name]
    logits = jax.random.normal(jax.random.key(11), shape) * 3.0
    logits = jnp.where(jax.random.bernoulli(jax.random.key(12), 0.3, shape), -jnp.inf, logits).at[..., 0].set(0.5)
    np.testing.assert_array_equal(prng.categorical(key, logits), jax.random.categorical(key, logits))
    np.testing.assert_array_equal(jax.jit(prng.categorical)(key, logits), jax.jit(jax.random.categorical)(key, logits))
    keys = jax.random.split(key, 6)
    batch = jnp.broadcast_to(logits, (6, *shape)) + jnp.arange(6.0).reshape((6,) + (1,) * len(shape))
    np.testing.assert_array_equal(jax.jit(jax.vmap(prng.categorical))(keys, batch), jax.vmap(jax.random.categorical)(keys, batch))
