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
