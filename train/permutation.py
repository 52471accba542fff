"""A faster ``jax.random.permutation`` for the trainers' minibatch shuffles on CPU.

`minibatch_permutation` returns exactly ``jax.random.permutation(key, n)``'s indices
(``tests/test_ppo.py`` checks it), with each of JAX's stable sorts done as two sorts of single
uint32 arrays (a radix sort of two 16-bit digits), which XLA:CPU runs several times faster than
its key-value sort. ``python benchmarks/permutation_speed.py`` (2-core x86_64 CPU, load 1.1,
each against ``jax.random.permutation`` in the same process): 3.0x at 1024 indices (GridWorld's
tuned batch), 2.7x at 2048 (PointEnv's), 3.6x at 16384 and 32768. The gain is CPU-specific; on other
backends the result is the same, and there `jax.random.permutation` itself runs: its one key-value
sort per round beat the two sorts and the ``searchsorted`` this used before its radix sort, whose
loop of ``log2(n)`` steps a GPU runs as a while loop with its condition read back on the host (an
NVIDIA H200 ran a GridWorld PPO update's optimisation at 0.47-0.75x of rejax's with them;
benchmarks/results/gpu_h200/).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import _backend, prng

__all__ = ["minibatch_permutation"]


def _stable_argsort_uint32(keys: jax.Array) -> jax.Array:
    """int32 indices that sort the uint32 ``keys`` (1-D, at most ``2**16``) stably: equal keys stay
    in index order, as ``lax.sort_key_val(keys, iota)[1]`` gives them.

    XLA:CPU sorts a single uint32 array several times faster than key-value pairs, so two such
    sorts do it, a radix sort of two 16-bit digits (least significant first): sorting
    ``low16(key) << 16 | index`` orders the indices by (low half, index); sorting, in that order,
    ``high16(key) << 16 | position`` orders them stably by the high half, so by (key, index). An
    index and a position fit in 16 bits. (A rank found by ``searchsorted`` in the sorted keys did
    the same with a binary search of ``log2(n)`` gathers: about 16% slower at 32,768 keys.)
    """
    n = keys.shape[0]
    low = jnp.uint32(0xFFFF)
    index = jnp.arange(n, dtype=jnp.uint32)
    by_low = jax.lax.sort(((keys & low) << 16) | index) & low
    by_key = jax.lax.sort(((keys[by_low] >> 16) << 16) | index) & low
    return by_low[by_key].astype(jnp.int32)


def minibatch_permutation(key: jax.Array, n: int) -> jax.Array:
    """``jax.random.permutation(key, n)``, the same indices, faster on CPU (module docstring).

    JAX shuffles with ``ceil(3 ln n / ln(2**32 - 1))`` rounds of stable sorts by fresh random
    uint32 keys (``jax._src.random._shuffle``); this repeats those rounds with the same keys and
    does each sort with `_stable_argsort_uint32`. Sizes above ``2**16``, and any backend but the
    CPU (`jaxenvs._backend.platform`), use ``jax.random.permutation`` itself.
    """
    if n > 2**16 or not _backend.on_cpu():
        return jax.random.permutation(key, n)
    num_rounds = int(np.ceil(3 * np.log(max(1, n)) / np.log(np.iinfo(np.uint32).max)))
    perm = jnp.arange(n)
    for _ in range(num_rounds):
        key, subkey = prng.split(key)
        perm = perm[_stable_argsort_uint32(prng.bits(subkey, (n,)))]
    return perm
