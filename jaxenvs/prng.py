"""``jax.random.bits`` and ``jax.random.split``, bit for bit, in a form that XLA's CPU backend fuses.

JAX lowers its default PRNG, Threefry-2x32, on the CPU as a rolled loop (five rounds of four, a
``while`` loop XLA does not fuse), which keeps the compile small but makes every draw a loop of
unfused passes over memory: at 4,096 values one draw takes several times what GridWorld's whole
step takes. The same hash written out round by round (as JAX itself lowers it on GPUs) fuses
into one pass, 4-5x faster on the CPU. `bits`, `split`, `uniform` and `normal` return exactly what
``jax.random.bits(key, shape, jnp.uint32)``, ``jax.random.split(key, num)``,
``jax.random.uniform(key, shape, jnp.float32, minval, maxval)`` and ``jax.random.normal(key, shape,
jnp.float32)`` return (tested value for value), so a key stream stays the same; they only compute it
faster (and a program holding them compiles with fewer loops).

They take the fast form for Threefry keys (typed ``jax.random.key`` keys of the ``threefry2x32``
implementation, or raw ``jax.random.PRNGKey`` arrays when that is JAX's default implementation)
under JAX's default ``jax_threefry_partitionable=True``, when the programs are built for the CPU
(`jaxenvs._backend.platform`); any other key, setting or backend goes to ``jax.random`` itself,
with the same results (on a GPU JAX already lowers Threefry round by round).

Use them where a batch of keys or values is drawn every step (auto-reset draws, a policy's
actions, per-env keys); ``jax.random`` is as good anywhere else.
"""

from __future__ import annotations

import math

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from jaxenvs import _backend

__all__ = ["bits", "split", "uniform", "normal", "categorical", "key_on_host", "split_on_host"]

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)


def _rounds(k1, k2, x1, x2, add, xor, rotl):
    ks = (k1, k2, xor(xor(k1, k2), _PARITY))
    x1 = add(x1, ks[0])
    x2 = add(x2, ks[1])
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x1 = add(x1, x2)
            x2 = xor(rotl(x2, r), x1)
        x1 = add(x1, ks[(i + 1) % 3])
        x2 = add(add(x2, ks[(i + 2) % 3]), np.uint32(i + 1))
    return x1, x2


def _rotl_lax(x, d):
    return lax.bitwise_or(lax.shift_left(x, np.uint32(d)), lax.shift_right_logical(x, np.uint32(32 - d)))


def _rotl_np(x, d):
    return (x << np.uint32(d)) | (x >> np.uint32(32 - d))


def threefry2x32(k1, k2, x1, x2):
    """The Threefry-2x32 hash (20 rounds, Salmon et al. 2011) of the counters ``(x1, x2)`` under the
    key ``(k1, k2)``, all uint32 arrays that broadcast; written out round by round (what
    ``jax.random``'s ``threefry2x32`` primitive computes). NumPy operands are hashed with NumPy (on
    the host, nothing compiled); others are broadcast once and hashed with `jax.lax`'s operations,
    the same program as ``jax.numpy``'s operators make, traced in half the time (a trainer's
    programs hash in a dozen places)."""
    if all(isinstance(v, (np.ndarray, np.generic)) for v in (k1, k2, x1, x2)):
        with np.errstate(over="ignore"):
            return _rounds(k1, k2, x1, x2, np.add, np.bitwise_xor, _rotl_np)
    shape = jnp.broadcast_shapes(jnp.shape(k1), jnp.shape(k2), jnp.shape(x1), jnp.shape(x2))
    k1, k2, x1, x2 = (jnp.broadcast_to(jnp.asarray(v, jnp.uint32), shape) for v in (k1, k2, x1, x2))
    return _rounds(k1, k2, x1, x2, lax.add, lax.bitwise_xor, _rotl_lax)


def _threefry_data(key):
    """``uint32[..., 2]`` key data when ``key`` is a Threefry key this module reproduces on a CPU
    (`jaxenvs._backend.platform`), else None."""
    if not jax.config.jax_threefry_partitionable or not _backend.on_cpu():
        return None
    dtype = getattr(key, "dtype", None)
    if dtype is None:
        return None
    if jnp.issubdtype(dtype, jax.dtypes.prng_key):
        if str(jax.random.key_impl(key)) != "threefry2x32":
            return None
        return jax.random.key_data(key)
    if dtype == jnp.uint32 and jnp.shape(key)[-1:] == (2,) and jax.config.jax_default_prng_impl == "threefry2x32":
        return key
    return None


def _counters(shape):
    """The 64-bit counters ``0 .. prod(shape) - 1`` in ``shape``, as (high, low) uint32 words."""
    size = math.prod(shape)
    if size > 2**32:
        return None
    lo = jnp.arange(size, dtype=jnp.uint32).reshape(shape)
    return jnp.zeros(shape, jnp.uint32), lo


def _hash_inputs(key, shape):
    """``(k1, k2, x1, x2)`` for `threefry2x32` when ONE key of the fused form draws ``shape``
    values, else None (the caller goes to ``jax.random``)."""
    data = _threefry_data(key)
    counters = None if data is None or jnp.ndim(data) != 1 else _counters(shape)
    return None if counters is None else (data[0], data[1], *counters)


def bits(key: jax.Array, shape: tuple[int, ...] = ()) -> jax.Array:
    """``jax.random.bits(key, shape, jnp.uint32)``: uint32 random bits of ``shape`` from ONE key
    (vmap it over a batch of keys), the same values, computed in a form XLA fuses."""
    shape = tuple(shape)
    inputs = _hash_inputs(key, shape)
    if inputs is None:
        return jax.random.bits(key, shape, jnp.uint32)
    b1, b2 = threefry2x32(*inputs)
    # computed once, then read: without the barrier XLA may fuse the hash into each consumer and
    # recompute it per element read (a key split feeding a draw ran 10x slower that way)
    return jax.lax.optimization_barrier(b1 ^ b2)


def split(key: jax.Array, num: int | tuple[int, ...] = 2) -> jax.Array:
    """``jax.random.split(key, num)``: ``num`` (an int or a shape) new keys from ONE key, the same
    keys, computed in a form XLA fuses. A raw ``PRNGKey`` gives raw keys, a typed key typed ones."""
    shape = (num,) if isinstance(num, (int, np.integer)) else tuple(num)
    inputs = _hash_inputs(key, shape)
    if inputs is None:
        return jax.random.split(key, num)
    k1, k2 = threefry2x32(*inputs)
    new = jax.lax.optimization_barrier(jnp.stack([k1, k2], axis=-1))
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(new, impl=jax.random.key_impl(key))
    return new


def uniform(key: jax.Array, shape: tuple[int, ...] = (), minval=0.0, maxval=1.0) -> jax.Array:
    """``jax.random.uniform(key, shape, jnp.float32, minval, maxval)``: float32 values in ``[minval,
    maxval)`` from ONE key, the same values (JAX's mapping of 23 random mantissa bits onto ``[1, 2)``,
    shifted and scaled), computed from `bits`."""
    shape = tuple(shape)
    if _threefry_data(key) is None:
        return jax.random.uniform(key, shape, jnp.float32, minval, maxval)
    minval = jax.lax.broadcast_to_rank(jnp.asarray(minval, jnp.float32), len(shape))
    maxval = jax.lax.broadcast_to_rank(jnp.asarray(maxval, jnp.float32), len(shape))
    one = np.uint32(np.array(1.0, np.float32).view(np.uint32))
    mantissa = (bits(key, shape) >> np.uint32(32 - 23)) | one
    floats = jax.lax.bitcast_convert_type(mantissa, jnp.float32) - jnp.float32(1.0)
    return jax.lax.max(minval, floats * (maxval - minval) + minval)


def normal(key: jax.Array, shape: tuple[int, ...] = ()) -> jax.Array:
    """``jax.random.normal(key, shape, jnp.float32)``: standard normal float32 values from ONE key,
    the same values (JAX's ``sqrt(2) * erf_inv(u)``, ``u`` uniform on ``(-1, 1)``), computed from
    `uniform`, so the draw fuses instead of running Threefry's rolled loop."""
    shape = tuple(shape)
    if _threefry_data(key) is None:
        return jax.random.normal(key, shape, jnp.float32)
    lo = np.nextafter(np.float32(-1.0), np.float32(0.0), dtype=np.float32)
    u = uniform(key, shape, minval=lo, maxval=np.float32(1.0))
    return jax.lax.mul(np.float32(np.sqrt(2)), jax.lax.erf_inv(u))


def categorical(key: jax.Array, logits: jax.Array) -> jax.Array:
    """``jax.random.categorical(key, logits)`` (one draw per row of ``logits``, over its last axis):
    the same indices, from the Gumbel noise JAX draws (``-log(-log(u))``, ``u`` uniform on
    ``[tiny, 1)``, JAX's default "low" mode) with `uniform`, so the draw fuses instead of running
    Threefry's rolled loop. float32 logits; anything else, or JAX's high-dynamic-range Gumbel mode,
    goes to ``jax.random.categorical``."""
    logits = jnp.asarray(logits)
    if (_threefry_data(key) is None or jnp.ndim(key) != 0 or logits.dtype != jnp.float32
            or jax.config.jax_high_dynamic_range_gumbel):
        return jax.random.categorical(key, logits)
    tiny = np.finfo(np.float32).tiny
    noise = -jnp.log(-jnp.log(uniform(key, logits.shape, minval=tiny, maxval=1.0)))
    return jnp.argmax(noise + logits, axis=-1)


# ---- keys made on the host -------------------------------------------------------------------
# ``jax.random.key(seed)`` and ``jax.random.split(key, n)`` outside a jitted function each compile a
# small program the first time they run in a process (on a 2-core CPU 0.05-0.3 s each, more than
# the work): a command that makes a few keys before its real programs pays that for nothing. These
# compute the same keys with NumPy and hand JAX their key data (``jax.random.wrap_key_data`` of a
# host array compiles nothing).


def _host_threefry() -> bool:
    """Whether the keys made here are JAX's own: the default Threefry implementation, 32-bit mode
    and ``jax_threefry_partitionable`` (JAX's default), under which `split` is the hash of the
    counters ``0 .. n - 1``."""
    return (jax.config.jax_default_prng_impl == "threefry2x32" and not jax.config.jax_enable_x64
            and bool(jax.config.jax_threefry_partitionable))


def key_on_host(seed: int) -> jax.Array:
    """``jax.random.key(seed)``, the same typed key, made on the host (nothing compiled): key data
    ``[0, seed]`` for ``0 <= seed < 2**32`` under the defaults `_host_threefry` checks; any other
    seed or setting goes to ``jax.random.key`` itself."""
    seed = int(seed)
    if not (_host_threefry() and 0 <= seed < 2**32):
        return jax.random.key(seed)
    return jax.random.wrap_key_data(np.array([0, seed], np.uint32), impl="threefry2x32")


def split_on_host(key: jax.Array, num: int) -> list[jax.Array]:
    """``list(jax.random.split(key, num))`` for ONE typed Threefry key, the same keys, hashed with
    NumPy on the host (nothing compiled); any other key or setting goes to ``jax.random.split``."""
    num = int(num)
    typed = jnp.issubdtype(getattr(key, "dtype", np.float32), jax.dtypes.prng_key)
    if not (typed and _host_threefry() and jnp.shape(key) == () and 0 < num < 2**32
            and str(jax.random.key_impl(key)) == "threefry2x32"):
        return list(jax.random.split(key, num))
    k1, k2 = np.asarray(jax.random.key_data(key), np.uint32)
    b1, b2 = threefry2x32(k1, k2, np.zeros(num, np.uint32), np.arange(num, dtype=np.uint32))
    data = np.stack([b1, b2], axis=-1)
    return [jax.random.wrap_key_data(d, impl="threefry2x32") for d in data]
