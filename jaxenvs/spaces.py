"""Observation and action spaces for pure-JAX environments.

Every space is an immutable host-side description. ``sample(key)`` and ``contains(x)`` are pure
JAX functions (jittable, vmappable); ``contains`` returns a scalar bool array. Spaces convert to
and from Gymnasium spaces with `to_gymnasium` / `from_gymnasium`.

``Dict`` keeps its keys sorted, as Gymnasium's ``Dict`` and JAX's pytree flattening both do, so
``flatten`` orders the leaves the way Gymnasium's ``flatten`` does.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import prng
from jaxenvs._optional import require

__all__ = [
    "PRNGKeyError",
    "check_key",
    "Space",
    "Discrete",
    "Box",
    "MultiDiscrete",
    "MultiBinary",
    "Dict",
    "Tuple",
    "flatdim",
    "flatten",
    "unflatten",
    "flatten_space",
    "to_gymnasium",
    "from_gymnasium",
]

_ALLOWED_DTYPES = ("int32", "float32", "uint8", "bool")
_INT32_MAX = int(np.iinfo(np.int32).max)
_INT32_MIN = int(np.iinfo(np.int32).min)


class PRNGKeyError(TypeError):
    """Something other than a JAX PRNG key where one belongs."""


def is_prng_key(x) -> bool:
    """Whether ``x`` is an array of typed PRNG keys (``jax.random.key``; any shape). Raw
    ``PRNGKey`` uint32 arrays are not: use `check_key` to accept both. The one such predicate of
    jaxenvs (also as ``jaxenvs.core.is_prng_key``)."""
    dtype = getattr(x, "dtype", None)
    try:
        return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    except TypeError:
        return False


def check_key(key, where: str) -> None:
    """Raise `PRNGKeyError` unless ``key`` is one PRNG key: a typed key
    (``jax.random.key(seed)``, shape ``()``) or a raw one (``jax.random.PRNGKey(seed)``, uint32[2];
    uint32[4] for the ``rbg`` implementations). Reads only shape and dtype, so it costs nothing
    inside ``jit`` (it runs when the function is traced); a batch of keys gets a ``jax.vmap`` hint."""
    dtype = getattr(key, "dtype", None)
    shape = tuple(np.shape(key)) if dtype is not None else None
    typed = is_prng_key(key)
    if typed and shape == ():
        return
    raw = dtype is not None and not typed and np.dtype(dtype) == np.uint32
    if raw and shape in ((2,), (4,)):
        return
    if typed or (raw and len(shape) >= 2 and shape[-1] in (2, 4)):
        hint = "; a batch of keys needs jax.vmap (or split one key inside)"
    else:
        hint = ""
    got = f"an array of dtype {dtype} and shape {shape}" if dtype is not None else f"{key!r} ({type(key).__name__})"
    raise PRNGKeyError(
        f"{where}: expected a jax.random.key(seed) (or jax.random.PRNGKey(seed)), got {got}{hint}"
    )


def _batch_shape(space, key, batch_shape) -> tuple[int, ...]:
    check_key(key, f"{space!r}.sample")
    if isinstance(batch_shape, (int, np.integer)) or not all(
        isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in _iter(batch_shape)
    ):
        raise TypeError(
            f"{space!r}.sample(key, batch_shape): batch_shape must be a tuple of ints >= 0, e.g. (5,), "
            f"got {batch_shape!r}"
        )
    return tuple(int(n) for n in batch_shape)


def _iter(x):
    try:
        return list(x)
    except TypeError:
        return [None]


def _shape_arg(owner: str, shape) -> tuple[int, ...]:
    """``shape`` as a tuple of ints >= 0 (an int ``n`` means ``(n,)``), or a ValueError."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    items = _iter(shape)
    if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in items):
        raise ValueError(f"{owner} shape must be an int or a tuple of ints >= 0, got {shape!r}")
    return tuple(int(n) for n in items)


def _check_dtype(dtype, allowed=_ALLOWED_DTYPES) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.name not in allowed:
        raise TypeError(f"space dtype {dt.name!r} is not supported; allowed: {', '.join(allowed)}")
    return dt


class Space:
    """Base class. Subclasses define ``shape``, ``dtype``, ``sample`` and ``contains``."""

    shape: tuple[int, ...] = ()
    dtype: Any = None

    def sample(self, key: jax.Array, batch_shape: Sequence[int] = ()) -> Any:
        """Draw a uniformly random element (or an array of ``batch_shape`` elements)."""
        raise NotImplementedError

    def contains(self, x: Any) -> jax.Array:
        """Scalar bool array: whether ``x`` (shape and values) lies in the space."""
        raise NotImplementedError

    def __contains__(self, x: Any) -> bool:
        try:
            return bool(self.contains(x))
        except (TypeError, ValueError):
            return False


def _shape_ok(x, shape) -> bool:
    return tuple(jnp.shape(x)) == tuple(shape)


def _as_array(x):
    """``x`` as a JAX array, or None where it is not a numeric array (a string, None, an object):
    ``contains`` answers False for those, as Gymnasium's spaces do."""
    if x is None or isinstance(x, (str, bytes)):
        return None
    try:
        return jnp.asarray(x)
    except (TypeError, ValueError):
        return None


def _uniform_below(key, shape, n) -> jax.Array:
    """int32 array of ``shape`` uniform on ``{0, ..., n - 1}`` (``n``: an int, or an int array
    that broadcasts against ``shape``'s trailing axes), exactly. When every ``n`` is a power of two the low bits of ONE
    ``jax.random.bits`` word per value are taken (a quarter of ``jax.random.randint``'s work,
    which draws two words and folds them); otherwise ``jax.random.randint``."""
    n = np.asarray(n, np.int64)
    if np.all(n & (n - 1) == 0):
        bits = prng.bits(key, shape)
        return (bits & jnp.asarray(n - 1, jnp.uint32)).astype(jnp.int32)
    return jax.random.randint(key, shape, 0, jnp.asarray(n, jnp.int32), dtype=jnp.int32)


_UNROLLED_MASK = 64  # masks of at most this many actions take `_masked_uniform_unrolled`


def _masked_uniform(key, shape, mask) -> jax.Array:
    """int32 array of ``shape``: uniform among the true entries of ``mask[..., :]`` (bool, shape
    ``shape + (n,)``), uniform on ``{0, ..., n - 1}`` where a row has none.

    For ``n <= 2**16`` the index ``k`` of the legal action comes from ONE random 32-bit word per
    value, ``k = floor(bits * count / 2**32)`` (Lemire's multiply-shift, in 32-bit arithmetic as
    two 16-bit halves): each of the ``count`` legal actions has probability ``m / 2**32`` with
    ``m`` either ``floor(2**32 / count)`` or one more, a relative bias below ``count / 2**32``
    (2e-9 for 9 actions). ``jax.random.randint`` (larger ``n``) hashes two words per value and
    costs about twice as much in a random-policy rollout of a board game."""
    n = mask.shape[-1]
    if n <= _UNROLLED_MASK:
        return _masked_uniform_unrolled(key, shape, mask)
    count = jnp.sum(mask, axis=-1, dtype=jnp.int32)
    mask = jnp.where((count > 0)[..., None], mask, True)
    count = jnp.where(count > 0, count, n)
    if n <= 1 << 16:
        k = _lemire_index(prng.bits(key, shape), count)
    else:
        k = jax.random.randint(key, shape, 0, count, dtype=jnp.int32)
    # the index of the (k + 1)-th legal entry: the first position where the running count passes k
    return jnp.argmax(jnp.cumsum(mask, axis=-1, dtype=jnp.int32) > k[..., None], axis=-1).astype(jnp.int32)


def _lemire_index(bits, count) -> jax.Array:
    """int32 ``floor(bits * count / 2**32)`` in 32-bit arithmetic (two 16-bit halves), for ``count``
    at most ``2**16``: `_masked_uniform`'s index of the legal action among ``count``."""
    c = count.astype(jnp.uint32)
    return (((bits >> 16) * c + (((bits & 0xFFFF) * c) >> 16)) >> 16).astype(jnp.int32)


def _masked_uniform_unrolled(key, shape, mask) -> jax.Array:
    """`_masked_uniform`'s draw, the same values, for a short last axis (at most `_UNROLLED_MASK`):
    the legal count and the running count are sums written out column by column, and the action
    is the number of positions whose running count has not passed ``k`` (the first that passes it:
    the running count never falls). Elementwise operations that fuse into one loop over the batch,
    where the general form's ``cumsum``, ``sum`` and ``argmax`` are reductions XLA:CPU runs one by
    one: 3-10x faster for 4-64 actions at 4,096 rows, and Tic-Tac-Toe's random-policy steps/s 1.8x."""
    n = mask.shape[-1]
    columns = [mask[..., j].astype(jnp.int32) for j in range(n)]
    count = functools.reduce(jnp.add, columns)
    empty = count == 0  # no legal entry: uniform over all n, as if every entry were legal
    k = _lemire_index(prng.bits(key, shape), jnp.where(empty, n, count))
    running, index = jnp.zeros_like(k), jnp.zeros_like(k)
    for column in columns:
        running = running + jnp.where(empty, 1, column)
        index = index + (running <= k).astype(jnp.int32)
    return index


class Discrete(Space):
    """Integers ``{start, ..., start + n - 1}``; int32 scalars. ``sample`` is exactly uniform (one
    random word per value when ``n`` is a power of two, ``jax.random.randint`` otherwise)."""

    def __init__(self, n: int, start: int = 0):
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
            raise ValueError(f"Discrete(n) needs an integer n >= 1, got {n!r}")
        if not isinstance(start, (int, np.integer)) or isinstance(start, bool):
            raise ValueError(f"Discrete start must be an integer, got {start!r}")
        if int(start) < _INT32_MIN or int(start) + int(n) > _INT32_MAX:
            raise ValueError(
                f"Discrete(n={n}, start={start}): its values are int32, so start >= {_INT32_MIN} and "
                f"start + n <= {_INT32_MAX} (2**31 - 1) are required"
            )
        self.n = int(n)
        self.start = int(start)
        self.shape = ()
        self.dtype = np.dtype("int32")

    def sample(self, key, batch_shape=(), mask=None):
        """Uniform values of shape ``batch_shape``; with ``mask`` (bool or integer, shape
        ``(..., n)`` broadcasting to ``batch_shape + (n,)``; nonzero = legal, e.g. a legal-action
        mask or ``obs["action_mask"]``), uniform among the legal actions of each row (one random
        word per value, mapped to the k-th legal action; relative bias below ``n / 2**32``, see
        ``_masked_uniform``). A row with no legal
        action (a non-mover's row in a turn-based game, a chance node) gives a uniform value of
        the whole space."""
        batch_shape = _batch_shape(self, key, batch_shape)
        if mask is None:
            values = _uniform_below(key, tuple(batch_shape), self.n)
        else:
            values = _masked_uniform(key, tuple(batch_shape), self._mask(mask, batch_shape))
        return values if self.start == 0 else values + jnp.int32(self.start)

    def _mask(self, mask, batch_shape):
        if isinstance(mask, (list, tuple)):  # a host list, e.g. [1, 0, 1]: as NumPy reads it
            try:
                mask = np.asarray(mask)
            except ValueError as e:
                raise TypeError(f"{self!r}.sample: mask must be an array of shape (..., {self.n}), got a ragged {type(mask).__name__}") from e
        if not hasattr(mask, "shape") or not hasattr(mask, "dtype"):
            raise TypeError(f"{self!r}.sample: mask must be a bool or integer array of shape (..., {self.n}) (nonzero = legal), got {mask!r}")
        shape = tuple(jnp.shape(mask))
        want = tuple(batch_shape) + (self.n,)
        try:
            ok = bool(shape) and shape[-1] == self.n and np.broadcast_shapes(shape, want) == want
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"{self!r}.sample: mask of shape {shape} does not broadcast to batch_shape + (n,) = {want}"
            )
        dtype = np.dtype(mask.dtype)
        if not (dtype == np.bool_ or np.issubdtype(dtype, np.integer)):
            raise TypeError(f"{self!r}.sample: mask must be bool or integer (nonzero = legal), got {dtype}")
        return jnp.broadcast_to(jnp.asarray(mask) != 0, want)

    def contains(self, x):
        x = _as_array(x)
        if x is None or not _shape_ok(x, self.shape) or not jnp.issubdtype(x.dtype, jnp.integer):
            return jnp.asarray(False)
        return (x >= self.start) & (x < self.start + self.n)

    def __repr__(self):
        return f"Discrete({self.n})" if self.start == 0 else f"Discrete({self.n}, start={self.start})"

    def __eq__(self, other):
        return isinstance(other, Discrete) and (self.n, self.start) == (other.n, other.start)

    __hash__ = None


class Box(Space):
    """A (possibly unbounded) box in R^n or Z^n: ``low <= x <= high`` elementwise.

    ``low``/``high`` are scalars or arrays broadcast to ``shape`` (a tuple, or an int ``n`` for
    ``(n,)``); ``dtype`` is float32 (default), int32 or uint8; integer boxes need integral bounds. Sampling an unbounded float dimension draws from a standard normal, a
    half-bounded one from a shifted exponential, as Gymnasium does.
    """

    def __init__(self, low, high, shape: Sequence[int] | None = None, dtype=np.float32):
        self.dtype = _check_dtype(dtype, ("float32", "int32", "uint8"))
        if shape is None:
            try:
                shape = np.broadcast_shapes(np.shape(low), np.shape(high))
            except ValueError:
                raise ValueError(
                    f"Box low of shape {np.shape(low)} and high of shape {np.shape(high)} do not broadcast "
                    "to one shape; give bounds of the same shape, or scalars with shape="
                ) from None
        self.shape = _shape_arg("Box", shape)
        if isinstance(low, jax.core.Tracer) or isinstance(high, jax.core.Tracer):
            # bounds computed from traced params (inside jit/vmap): kept as arrays, checked by the
            # caller's params validation instead of here; they must be finite
            self._traced = True
            self.low = jnp.broadcast_to(jnp.asarray(low, self.dtype), self.shape)
            self.high = jnp.broadcast_to(jnp.asarray(high, self.dtype), self.shape)
            return
        try:
            low_a = np.broadcast_to(np.asarray(low, dtype=np.float64), self.shape)
            high_a = np.broadcast_to(np.asarray(high, dtype=np.float64), self.shape)
        except (TypeError, ValueError) as e:
            raise ValueError(
                f"Box low {np.shape(low)} and high {np.shape(high)} do not broadcast to shape {self.shape}"
            ) from e
        if np.any(np.isnan(low_a)) or np.any(np.isnan(high_a)):
            raise ValueError("Box bounds must not be NaN")
        if np.any(low_a > high_a):
            raise ValueError(f"Box needs low <= high elementwise, got low={low_a}, high={high_a}")
        if self.dtype.kind == "f":
            self.low, self.high = low_a.astype(self.dtype), high_a.astype(self.dtype)
        else:
            info = np.iinfo(self.dtype)
            if not (np.all(np.isfinite(low_a)) and np.all(np.isfinite(high_a))):
                raise ValueError(f"an integer Box needs finite bounds, got low={low_a}, high={high_a}")
            if np.any(low_a < info.min) or np.any(high_a > info.max):
                raise ValueError(f"Box bounds fall outside the range of {self.dtype.name}")
            if np.any(low_a != np.round(low_a)) or np.any(high_a != np.round(high_a)):
                raise ValueError(
                    f"a {self.dtype.name} Box needs integral bounds, got low={low_a}, high={high_a} "
                    "(round them, or use a float32 Box)"
                )
            self.low, self.high = low_a.astype(self.dtype), high_a.astype(self.dtype)

    _traced = False

    @property
    def bounded(self) -> bool:
        if self._traced:
            return True
        return bool(np.all(np.isfinite(self.low)) and np.all(np.isfinite(self.high)))

    def sample(self, key, batch_shape=()):
        shape = _batch_shape(self, key, batch_shape) + self.shape
        if self.dtype.kind in "iu":
            # uniform on [low, high] from 32 random bits, in uint32 arithmetic so spans up to the
            # full int32 range do not overflow (span 0 stands for 2**32); modulo bias < span / 2**32
            span = (np.asarray(self.high, np.int64) - np.asarray(self.low, np.int64) + 1).astype(np.uint32)
            bits = jax.random.bits(key, shape, jnp.uint32)
            offset = jnp.where(span == 0, bits, bits % jnp.asarray(np.maximum(span, 1)))
            return (jnp.asarray(self.low).astype(jnp.uint32) + offset).astype(self.dtype)
        lo, hi = jnp.asarray(self.low), jnp.asarray(self.high)
        if self.bounded:
            return jax.random.uniform(key, shape, jnp.float32, lo, hi)
        k1, k2 = jax.random.split(key)
        u = jax.random.uniform(k1, shape, jnp.float32, jnp.where(jnp.isfinite(lo), lo, 0.0), jnp.where(jnp.isfinite(hi), hi, 1.0))
        n = jax.random.normal(k2, shape, jnp.float32)
        e = jnp.abs(n)
        lo_f, hi_f = jnp.isfinite(lo), jnp.isfinite(hi)
        return jnp.where(
            lo_f & hi_f, u, jnp.where(lo_f, lo + e, jnp.where(hi_f, hi - e, n))
        ).astype(jnp.float32)

    def contains(self, x):
        x = _as_array(x)
        if x is None or not _shape_ok(x, self.shape):
            return jnp.asarray(False)
        if self.dtype.kind == "f" and not jnp.issubdtype(x.dtype, jnp.floating):
            return jnp.asarray(False)
        if self.dtype.kind in "iu" and not jnp.issubdtype(x.dtype, jnp.integer):
            return jnp.asarray(False)
        return jnp.all((x >= self.low) & (x <= self.high))

    def clip(self, x):
        """Clip ``x`` into the box (elementwise); NaN stays NaN."""
        return jnp.clip(x, self.low, self.high)

    def __repr__(self):
        if self._traced:
            return f"Box(<traced bounds>, {self.shape}, {self.dtype.name})"
        def text(bound):  # the shortest text that reads back as the same value of the box's dtype
            if np.all(bound == bound.flat[0]):
                x = bound.flat[0]
                if np.issubdtype(self.dtype, np.floating) and np.isfinite(x):
                    return np.format_float_positional(np.asarray(x, self.dtype)[()], unique=True, trim="0")
                return str(x)
            return str(bound)

        return f"Box({text(self.low)}, {text(self.high)}, {self.shape}, {self.dtype.name})"

    def __eq__(self, other):
        return (
            isinstance(other, Box)
            and self.shape == other.shape
            and self.dtype == other.dtype
            and np.array_equal(self.low, other.low)
            and np.array_equal(self.high, other.high)
        )

    __hash__ = None


class MultiDiscrete(Space):
    """A vector of Discrete values: ``0 <= x[i] < nvec[i]``; int32."""

    def __init__(self, nvec: Sequence[int]):
        nv = np.asarray(nvec)
        if nv.ndim == 0 or nv.size == 0 or not np.issubdtype(nv.dtype, np.integer) or np.any(nv < 1):
            raise ValueError(f"MultiDiscrete needs a non-empty array of integers >= 1, got {nvec!r}")
        if np.any(nv > _INT32_MAX):
            raise ValueError(f"MultiDiscrete values are int32: every nvec entry must be <= {_INT32_MAX}, got {nvec!r}")
        self.nvec = nv.astype(np.int32)
        self.shape = tuple(nv.shape)
        self.dtype = np.dtype("int32")

    def sample(self, key, batch_shape=()):
        shape = _batch_shape(self, key, batch_shape) + self.shape
        return _uniform_below(key, shape, self.nvec)  # nvec broadcasts over the batch axes

    def contains(self, x):
        x = _as_array(x)
        if x is None or not _shape_ok(x, self.shape) or not jnp.issubdtype(x.dtype, jnp.integer):
            return jnp.asarray(False)
        return jnp.all((x >= 0) & (x < self.nvec))

    def __repr__(self):
        return f"MultiDiscrete({self.nvec.tolist()})"

    def __eq__(self, other):
        return isinstance(other, MultiDiscrete) and np.array_equal(self.nvec, other.nvec)

    __hash__ = None


class MultiBinary(Space):
    """Binary vectors of length ``n`` (or an array shape); int32 values in {0, 1}."""

    def __init__(self, n: int | Sequence[int]):
        items = [n] if np.isscalar(n) else _iter(n)
        if not items or not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 1 for s in items):
            raise ValueError(f"MultiBinary needs positive sizes (an int >= 1 or a tuple of them), got {n!r}")
        shape = tuple(int(s) for s in items)
        self.n = n
        self.shape = shape
        self.dtype = np.dtype("int32")

    def sample(self, key, batch_shape=()):
        # float32 draws whatever jax_enable_x64 says (a Python 0.5 would draw float64 under x64)
        return jax.random.bernoulli(key, jnp.float32(0.5), _batch_shape(self, key, batch_shape) + self.shape).astype(jnp.int32)

    def contains(self, x):
        x = _as_array(x)
        if x is None or not _shape_ok(x, self.shape) or not jnp.issubdtype(x.dtype, jnp.integer):
            return jnp.asarray(False)
        return jnp.all((x == 0) | (x == 1))

    def __repr__(self):
        return f"MultiBinary({self.n})"

    def __eq__(self, other):
        return isinstance(other, MultiBinary) and self.shape == other.shape

    __hash__ = None


class Dict(Space):
    """A dict of named sub-spaces; keys are kept sorted (as Gymnasium and JAX pytrees do)."""

    def __init__(self, spaces: Mapping[str, Space]):
        if not isinstance(spaces, Mapping) or not spaces:
            raise ValueError("Dict needs a non-empty mapping of names to spaces")
        names = [k for k in spaces if not isinstance(k, str)]
        if names:
            raise TypeError(
                f"Dict keys must be strings (the sub-spaces' names, sorted as JAX sorts a dict), got "
                f"{names[0]!r} ({type(names[0]).__name__}) among {list(spaces)!r}"
            )
        for k, s in spaces.items():
            if not isinstance(s, Space):
                raise TypeError(f"Dict entry {k!r} is {type(s).__name__}, not a jaxenvs Space")
        self.spaces = dict(sorted(spaces.items()))
        self.shape = None
        self.dtype = None

    def __getitem__(self, k):
        return self.spaces[k]

    def keys(self):
        return self.spaces.keys()

    def sample(self, key, batch_shape=()):
        _batch_shape(self, key, batch_shape)
        keys = jax.random.split(key, len(self.spaces))
        return {k: s.sample(kk, batch_shape) for kk, (k, s) in zip(keys, self.spaces.items())}

    def contains(self, x):
        if not isinstance(x, Mapping) or set(x.keys()) != set(self.spaces):
            return jnp.asarray(False)
        out = jnp.asarray(True)
        for k, s in self.spaces.items():
            out = out & s.contains(x[k])
        return out

    def __repr__(self):
        return "Dict(" + ", ".join(f"{k!r}: {s}" for k, s in self.spaces.items()) + ")"

    def __eq__(self, other):
        return isinstance(other, Dict) and self.spaces == other.spaces

    __hash__ = None


class Tuple(Space):
    """A tuple of sub-spaces."""

    def __init__(self, spaces: Sequence[Space]):
        spaces = tuple(spaces)
        if not spaces:
            raise ValueError("Tuple needs at least one space")
        for i, s in enumerate(spaces):
            if not isinstance(s, Space):
                raise TypeError(f"Tuple entry {i} is {type(s).__name__}, not a jaxenvs Space")
        self.spaces = spaces
        self.shape = None
        self.dtype = None

    def __getitem__(self, i):
        return self.spaces[i]

    def __len__(self):
        return len(self.spaces)

    def sample(self, key, batch_shape=()):
        _batch_shape(self, key, batch_shape)
        keys = jax.random.split(key, len(self.spaces))
        return tuple(s.sample(k, batch_shape) for k, s in zip(keys, self.spaces))

    def contains(self, x):
        if not isinstance(x, (tuple, list)) or len(x) != len(self.spaces):
            return jnp.asarray(False)
        out = jnp.asarray(True)
        for s, xi in zip(self.spaces, x):
            out = out & s.contains(xi)
        return out

    def __repr__(self):
        return "Tuple(" + ", ".join(map(repr, self.spaces)) + ")"

    def __eq__(self, other):
        return isinstance(other, Tuple) and self.spaces == other.spaces

    __hash__ = None


# ---------------------------------------------------------------------------------------------
# Flattening (Gymnasium semantics: Discrete -> one-hot, MultiDiscrete -> concatenated one-hots)
# ---------------------------------------------------------------------------------------------


def flatdim(space: Space) -> int:
    """Length of the float32 vector `flatten` produces for an element of ``space``."""
    if isinstance(space, Discrete):
        return space.n
    if isinstance(space, MultiDiscrete):
        return int(space.nvec.sum())
    if isinstance(space, (Box, MultiBinary)):
        return int(np.prod(space.shape))
    if isinstance(space, Dict):
        return sum(flatdim(s) for s in space.spaces.values())
    if isinstance(space, Tuple):
        return sum(flatdim(s) for s in space.spaces)
    raise TypeError(f"cannot flatten space {space!r}")


def flatten(space: Space, x) -> jax.Array:
    """Flatten an element of ``space`` to float32[flatdim(space)] (jittable)."""
    if isinstance(space, Discrete):
        return jax.nn.one_hot(jnp.asarray(x) - space.start, space.n, dtype=jnp.float32)
    if isinstance(space, MultiDiscrete):
        x = jnp.asarray(x).reshape(-1)
        return jnp.concatenate(
            [jax.nn.one_hot(x[i], int(n), dtype=jnp.float32) for i, n in enumerate(space.nvec.reshape(-1))]
        )
    if isinstance(space, (Box, MultiBinary)):
        return jnp.asarray(x, jnp.float32).reshape(-1)
    if isinstance(space, Dict):
        if not isinstance(x, Mapping) or set(x.keys()) != set(space.spaces):
            got = sorted(x.keys()) if isinstance(x, Mapping) else type(x).__name__
            raise ValueError(f"flatten: the element must be a dict with keys {sorted(space.spaces)}, got {got}")
        return jnp.concatenate([flatten(s, x[k]) for k, s in space.spaces.items()])
    if isinstance(space, Tuple):
        if not isinstance(x, (tuple, list)) or len(x) != len(space.spaces):
            got = f"{len(x)} entries" if isinstance(x, (tuple, list)) else type(x).__name__
            raise ValueError(f"flatten: the element must be a tuple of {len(space.spaces)} entries, got {got}")
        return jnp.concatenate([flatten(s, xi) for s, xi in zip(space.spaces, x)])
    raise TypeError(f"cannot flatten space {space!r}")


def unflatten(space: Space, v) -> Any:
    """Inverse of `flatten` (one-hots are decoded with argmax)."""
    v = jnp.asarray(v)
    if isinstance(space, Discrete):
        return (jnp.argmax(v) + space.start).astype(jnp.int32)
    if isinstance(space, MultiDiscrete):
        parts, i = [], 0
        for n in space.nvec.reshape(-1):
            parts.append(jnp.argmax(v[i : i + int(n)]))
            i += int(n)
        return jnp.stack(parts).reshape(space.shape).astype(jnp.int32)
    if isinstance(space, (Box, MultiBinary)):
        return v.reshape(space.shape).astype(space.dtype)
    if isinstance(space, (Dict, Tuple)):
        subs = list(space.spaces.values()) if isinstance(space, Dict) else list(space.spaces)
        out, i = [], 0
        for s in subs:
            d = flatdim(s)
            out.append(unflatten(s, v[i : i + d]))
            i += d
        return dict(zip(space.spaces.keys(), out)) if isinstance(space, Dict) else tuple(out)
    raise TypeError(f"cannot unflatten space {space!r}")


def flatten_space(space: Space) -> Box:
    """The Box that `flatten` maps ``space`` into."""
    if isinstance(space, Box):
        return Box(space.low.reshape(-1), space.high.reshape(-1), (flatdim(space),), np.float32)
    if isinstance(space, (Discrete, MultiDiscrete, MultiBinary)):
        return Box(0.0, 1.0, (flatdim(space),), np.float32)
    if isinstance(space, (Dict, Tuple)):
        subs = list(space.spaces.values()) if isinstance(space, Dict) else list(space.spaces)
        boxes = [flatten_space(s) for s in subs]
        return Box(
            np.concatenate([b.low for b in boxes]), np.concatenate([b.high for b in boxes]), None, np.float32
        )
    raise TypeError(f"cannot flatten space {space!r}")


# ---------------------------------------------------------------------------------------------
# Gymnasium conversion (gymnasium is an optional dependency, imported lazily)
# ---------------------------------------------------------------------------------------------


def to_gymnasium(space: Space):
    """The equivalent ``gymnasium.spaces`` object."""
    gs = require("gymnasium.spaces", extra="gymnasium", purpose="converting spaces to and from Gymnasium")

    if isinstance(space, Discrete):
        return gs.Discrete(space.n, start=space.start)
    if isinstance(space, Box):
        return gs.Box(space.low, space.high, space.shape, space.dtype)
    if isinstance(space, MultiDiscrete):
        return gs.MultiDiscrete(space.nvec)
    if isinstance(space, MultiBinary):
        return gs.MultiBinary(space.n)
    if isinstance(space, Dict):
        return gs.Dict({k: to_gymnasium(s) for k, s in space.spaces.items()})
    if isinstance(space, Tuple):
        return gs.Tuple([to_gymnasium(s) for s in space.spaces])
    raise TypeError(f"no Gymnasium equivalent for {space!r}")


def from_gymnasium(space) -> Space:
    """The jaxenvs space equivalent to a ``gymnasium.spaces`` object (int64 becomes int32, float64
    float32). A finite Box bound that the narrower dtype cannot hold (e.g. 1e40 in float32, where
    it would become inf, or 2**40 in int32, where it would wrap) raises ValueError."""
    gs = require("gymnasium.spaces", extra="gymnasium", purpose="converting spaces to and from Gymnasium")

    if isinstance(space, gs.Discrete):
        return Discrete(int(space.n), start=int(space.start))
    if isinstance(space, gs.Box):
        dt = np.dtype(space.dtype)
        dt = np.float32 if dt.kind == "f" else (np.uint8 if dt == np.uint8 else np.int32)
        for name, bound in (("low", space.low), ("high", space.high)):
            b = np.asarray(bound, np.float64) if np.asarray(bound).dtype.kind == "f" else np.asarray(bound)
            finite = b[np.isfinite(b)] if b.dtype.kind == "f" else b.ravel()
            info = np.finfo(dt) if np.dtype(dt).kind == "f" else np.iinfo(dt)
            if finite.size and (finite.min() < info.min or finite.max() > info.max):
                raise ValueError(
                    f"from_gymnasium: {space} has {name} bound(s) outside {np.dtype(dt).name}'s range "
                    f"[{info.min}, {info.max}] (min {finite.min()}, max {finite.max()}); jaxenvs Box spaces are "
                    f"{np.dtype(dt).name}: give the Gymnasium space bounds within that range"
                    + (" (-inf/inf for unbounded)" if np.dtype(dt).kind == "f" else "")
                )
        return Box(space.low, space.high, space.shape, dt)
    if isinstance(space, gs.MultiDiscrete):
        return MultiDiscrete(space.nvec)
    if isinstance(space, gs.MultiBinary):
        return MultiBinary(space.n)
    if isinstance(space, gs.Dict):
        return Dict({k: from_gymnasium(s) for k, s in space.spaces.items()})
    if isinstance(space, gs.Tuple):
        return Tuple([from_gymnasium(s) for s in space.spaces])
    raise TypeError(f"no jaxenvs equivalent for Gymnasium space {space!r}")
