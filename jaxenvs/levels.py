"""Levels: distributions over an environment's params, and levels as data (hash, JSON).

A *level* is one value of an environment's ``params`` (its walls, start and goal; its physics);
a batch of levels is the same params pytree with a leading axis on every leaf, which
``jax.vmap`` and `jaxenvs.VectorEnv` take as is. A `ParamSpace` declares how levels are drawn::

    from jaxenvs.levels import ParamSpace, Uniform, Choice

    space = ParamSpace(env.default_params, size=Uniform(3, 9))   # GridWorld's side, 3..9
    level = space.sample(key)                                     # one level (params)
    batch = space.sample(key, batch_shape=(1024,))                # 1024 levels, leading axis
    space.contains(level)                                         # bool[], jittable

Each keyword names a params field and gives its distribution: `Uniform` (integers in
``[low, high]`` for an integer field, floats in ``[low, high)`` for a float field), `Choice`
(one of a few values, optionally weighted) or a plain value (fixed). A field left out keeps the
base params' value. ``generator(key, params) -> params`` builds structured levels (a maze's
walls) after the fields are drawn; ``mutate(key, level) -> level`` makes a small edit to a level
(ACCEL's mutation; by default one declared field is redrawn). Both run inside ``jit``/``vmap`` and
must return params of the base's tree, shapes and dtypes: checked once when the space is built
(``jax.eval_shape``, no computation) and again when `ParamSpace.sample` is traced.

Levels as data: `level_hash` is a SHA-256 of each leaf's canonical bytes (little-endian, in the
dtype JAX holds it in) with its field path, dtype and shape, so the same level has the same hash in
every process and on every platform (never Python's ``hash``); `level_to_json` /
`level_from_json` write and read one level exactly (ints as ints, floats through their shortest
round-tripping decimal, bools as true/false), refusing unknown fields and wrong shapes by name;
`save_levels` / `load_levels` do the same for a file of levels, and `overlap` lists the levels two
batches share (a held-out set checked against a training batch).

An environment declares its default space as a method ``param_space(self) -> ParamSpace``;
`param_space` reads it through any wrapper stack.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import prng

__all__ = [
    "ParamSpace",
    "Uniform",
    "Choice",
    "ParamSpaceError",
    "param_space",
    "level_hash",
    "level_hashes",
    "level_to_json",
    "level_from_json",
    "save_levels",
    "load_levels",
    "stack_levels",
    "concat_levels",
    "unstack_levels",
    "num_levels",
    "overlap",
    "level_fields",
]

FORMAT = "jaxenvs.levels/1"


class ParamSpaceError(ValueError):
    """A param space or a level that does not fit the params it is declared over (an unknown field,
    an empty range, a generator returning another tree, shape or dtype, a JSON level with an unknown
    field)."""


@dataclasses.dataclass(frozen=True)
class Uniform:
    """Uniform over ``[low, high]`` (integers, both ends included) for an integer field, over
    ``[low, high)`` for a float field; elementwise for an array field (scalar or field-shaped
    bounds)."""

    low: Any
    high: Any


@dataclasses.dataclass(frozen=True)
class Choice:
    """One of ``values`` (each of the field's shape), with probabilities ``weights`` (normalised;
    uniform when None)."""

    values: Sequence[Any]
    weights: Sequence[float] | None = None


def _fields(base) -> list[str]:
    """The params fields of ``base`` that are pytree leaves (static fields are not levels)."""
    if not dataclasses.is_dataclass(base):
        raise ParamSpaceError(f"a ParamSpace is declared over params dataclasses, got {type(base).__name__}")
    return [f.name for f in dataclasses.fields(base) if not f.metadata.get("static", False) and f.metadata.get("pytree_node", True)]


def _leaf_kind(x) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) of a params leaf as a jitted program holds it (Python 5 -> int32[])."""
    a = jnp.asarray(x) if not isinstance(x, jax.ShapeDtypeStruct) else x
    return tuple(a.shape), np.dtype(a.dtype)


def _tree_kinds(tree):
    leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
    return treedef, [(jax.tree_util.keystr(p), *_leaf_kind(x)) for p, x in leaves]


class ParamSpace:
    """A distribution over levels (params values) of one environment; see the module docstring.

    ``base``: the params every field not declared keeps (usually ``env.default_params``);
    ``generator(key, params) -> params``: structured levels, applied after the declared fields
    are drawn; ``mutate(key, level) -> level``: a small edit (default: one declared field, chosen
    uniformly, redrawn; a space with no declared fields draws a fresh level); ``valid(level) ->
    bool[]``: what `contains` checks beyond the declared fields (e.g. a maze's start on a free
    cell). All four are pure and jittable. Raises `ParamSpaceError` on a field that is not in the
    params (naming the valid ones), an empty or non-finite range, a choice of the wrong shape,
    or a generator or mutation whose output tree, shapes or dtypes differ from ``base``'s.
    """

    def __init__(
        self,
        base: Any,
        *,
        generator: Callable[[jax.Array, Any], Any] | None = None,
        mutate: Callable[[jax.Array, Any], Any] | None = None,
        valid: Callable[[Any], Any] | None = None,
        **fields: Any,
    ):
        names = _fields(base)
        for name in fields:
            if name not in names:
                raise ParamSpaceError(
                    f"ParamSpace over {type(base).__name__}: {name!r} is not a params field; valid fields: {', '.join(names)}"
                )
        for fn, what in ((generator, "generator"), (mutate, "mutate"), (valid, "valid")):
            if fn is not None and not callable(fn):
                raise ParamSpaceError(f"ParamSpace {what} must be a function, got {fn!r}")
        self.base = base
        self.generator, self._mutate, self.valid = generator, mutate, valid
        self.fields = {name: self._declare(name, spec) for name, spec in fields.items()}
        self._kinds = _tree_kinds(self._typed(base))
        key = jax.random.key(0)
        if generator is not None:
            self._check_output("generator", jax.eval_shape(generator, key, self._typed(base)))
        if mutate is not None:
            self._check_output("mutate", jax.eval_shape(mutate, key, self._typed(base)))

    # ---- declaration --------------------------------------------------------------------------
    def _declare(self, name, spec):
        shape, dtype = _leaf_kind(getattr(self.base, name))
        where = f"ParamSpace over {type(self.base).__name__}: field {name!r} ({dtype}{list(shape)})"
        if isinstance(spec, Uniform):
            if dtype == np.bool_:
                raise ParamSpaceError(f"{where} is a bool; use Choice([False, True]) instead of Uniform")
            try:
                low = np.broadcast_to(np.asarray(spec.low, np.float64), shape)
                high = np.broadcast_to(np.asarray(spec.high, np.float64), shape)
            except (TypeError, ValueError) as e:
                raise ParamSpaceError(f"{where}: Uniform bounds {spec.low!r}, {spec.high!r} are not numbers of shape {shape} ({e})") from None
            if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
                raise ParamSpaceError(f"{where}: Uniform bounds must be finite, got [{spec.low!r}, {spec.high!r}]")
            if dtype.kind in "iu":
                if not (np.all(low == np.round(low)) and np.all(high == np.round(high))):
                    raise ParamSpaceError(f"{where} is an integer field: Uniform bounds must be integers, got [{spec.low!r}, {spec.high!r}]")
                info = np.iinfo(dtype)
                if np.any(low < info.min) or np.any(high > info.max):
                    raise ParamSpaceError(f"{where}: Uniform bounds [{spec.low!r}, {spec.high!r}] exceed {dtype}'s range")
                if np.any(low > high):
                    raise ParamSpaceError(f"{where}: Uniform({spec.low!r}, {spec.high!r}) is empty (integers need low <= high)")
            elif np.any(low >= high):
                raise ParamSpaceError(f"{where}: Uniform({spec.low!r}, {spec.high!r}) is empty (floats are drawn in [low, high): need low < high)")
            return spec, low, high
        if isinstance(spec, Choice):
            values = list(spec.values)
            if not values:
                raise ParamSpaceError(f"{where}: Choice needs at least one value")
            arrs = []
            for v in values:
                a = np.asarray(v)
                if a.shape != shape:
                    raise ParamSpaceError(f"{where}: Choice value {v!r} has shape {a.shape}, the field has {shape}")
                arrs.append(_cast_exact(a, dtype, where))
            weights = None
            if spec.weights is not None:
                w = np.asarray(spec.weights, np.float64)
                if w.shape != (len(values),) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
                    raise ParamSpaceError(f"{where}: Choice weights must be {len(values)} finite numbers >= 0 with a positive sum, got {spec.weights!r}")
                weights = w / w.sum()
            return spec, np.stack(arrs), weights
        a = np.asarray(spec)
        if a.shape != shape:
            raise ParamSpaceError(f"{where}: fixed value {spec!r} has shape {a.shape}, the field has {shape}")
        return None, _cast_exact(a, dtype, where), None

    def _typed(self, params):
        """``params`` with every leaf as a JAX array of its canonical dtype (Python scalars too)."""
        return jax.tree.map(jnp.asarray, params)

    def _check_output(self, what, out):
        treedef, kinds = _tree_kinds(out)
        want_def, want = self._kinds
        fn = {"generator": self.generator, "mutate": self._mutate}[what]
        name = getattr(fn, "__name__", repr(fn))
        if treedef != want_def:
            raise ParamSpaceError(
                f"ParamSpace {what} {name} returned a {type(out).__name__} tree {treedef}, expected the params' tree {want_def} "
                f"(return params.replace(...))"
            )
        for (path, shape, dtype), (_, wshape, wdtype) in zip(kinds, want):
            if (shape, dtype) != (wshape, wdtype):
                raise ParamSpaceError(
                    f"ParamSpace {what} {name} returned params{path} of shape {shape} and dtype {dtype}, expected shape "
                    f"{wshape} and dtype {wdtype} (the base params' leaf{'; a batch axis? sample one level per call' if shape[1:] == wshape else ''})"
                )

    def __repr__(self):
        parts = [f"{k}={spec if spec is not None else 'fixed'}" for k, (spec, *_) in self.fields.items()]
        if self.generator is not None:
            parts.append(f"generator={getattr(self.generator, '__name__', self.generator)}")
        return f"ParamSpace({type(self.base).__name__}: {', '.join(parts)})"

    # ---- drawing ------------------------------------------------------------------------------
    def _draw_field(self, key, name):
        spec, a, b = self.fields[name]
        shape, dtype = _leaf_kind(getattr(self.base, name))
        if spec is None:
            return jnp.asarray(a, dtype)
        if isinstance(spec, Uniform):
            if dtype.kind in "iu":
                return jax.random.randint(key, shape, jnp.asarray(a, dtype), jnp.asarray(b, dtype) + 1, dtype)
            return jax.random.uniform(key, shape, dtype, jnp.asarray(a, dtype), jnp.asarray(b, dtype))
        values = jnp.asarray(a)
        p = None if b is None else jnp.asarray(b, jnp.float32)
        index = jax.random.choice(key, values.shape[0], p=p)
        return values[index]

    def _draw_fields(self, key, level, names):
        if not names:
            return level
        keys = prng.split(key, len(names))
        return level.replace(**{n: self._draw_field(k, n) for n, k in zip(names, keys)})

    def sample(self, key: jax.Array, batch_shape: tuple[int, ...] = ()) -> Any:
        """A level (params), or levels with ``batch_shape`` leading every leaf; jittable and
        vmappable (one key gives one level: ``jax.vmap(space.sample)(keys)`` equals
        ``space.sample(key, (n,))`` for ``keys = jaxenvs.prng.split(key, n)``, which gives
        ``jax.random.split``'s keys)."""
        batch_shape = tuple(batch_shape)
        if batch_shape:
            n = math.prod(batch_shape)
            out = jax.vmap(self.sample)(prng.split(key, n))
            return jax.tree.map(lambda x: x.reshape(batch_shape + x.shape[1:]), out)
        k_fields, k_gen = prng.split(key)
        level = self._draw_fields(k_fields, self._typed(self.base), list(self.fields))
        if self.generator is not None:
            level = self.generator(k_gen, level)
            self._check_output("generator", level)
        return level

    def mutate(self, key: jax.Array, level: Any) -> Any:
        """``level`` after one small edit (ACCEL's mutation): the space's ``mutate`` function, or
        by default one declared (non-fixed) field chosen uniformly and redrawn; a space without
        such a field returns a fresh `sample`. Jittable and vmappable."""
        level = self._typed(level)
        if self._mutate is not None:
            out = self._mutate(key, level)
            self._check_output("mutate", out)
            return out
        names = [n for n, (spec, *_) in self.fields.items() if spec is not None]
        if not names:
            return self.sample(key)
        k_which, k_draw = prng.split(key)
        which = jax.random.randint(k_which, (), 0, len(names))
        fresh = self._draw_fields(k_draw, level, names)
        return level.replace(**{n: jnp.where(which == i, getattr(fresh, n), getattr(level, n)) for i, n in enumerate(names)})

    def contains(self, level: Any) -> jax.Array:
        """bool[]: ``level`` has the base's tree, shapes and dtypes (else False, decided when traced),
        every declared field lies in its range, choice or fixed value, the fields nobody declared
        equal the base's (unless a generator writes them) and ``valid(level)`` holds. Jittable."""
        try:
            typed = self._typed(level)
            treedef, kinds = _tree_kinds(typed)
        except (TypeError, ValueError):
            return jnp.zeros((), bool)
        if treedef != self._kinds[0] or [k[1:] for k in kinds] != [k[1:] for k in self._kinds[1]]:
            return jnp.zeros((), bool)
        ok = jnp.ones((), bool)
        for name in _fields(self.base):
            x = getattr(typed, name)
            if name in self.fields:
                spec, a, b = self.fields[name]
                if isinstance(spec, Uniform):
                    xf = x.astype(jnp.float32) if x.dtype.kind == "f" else x
                    lo, hi = jnp.asarray(a, x.dtype), jnp.asarray(b, x.dtype)
                    inside = (xf >= lo) & ((xf <= hi) if x.dtype.kind in "iu" else (xf < hi))
                    ok &= jnp.all(inside)
                elif isinstance(spec, Choice):
                    values = jnp.asarray(a)
                    ok &= jnp.any(jnp.all((values == x[None]).reshape(values.shape[0], -1), axis=1))
                else:
                    ok &= jnp.all(x == jnp.asarray(a))
            elif self.generator is None:
                ok &= jnp.all(x == jnp.asarray(getattr(self.base, name)))
        if self.valid is not None:
            ok &= jnp.asarray(self.valid(typed), bool)
        return ok


def _cast_exact(a: np.ndarray, dtype: np.dtype, where: str) -> np.ndarray:
    """``a`` in ``dtype``, refusing a value the cast would change (0.5 into an int, 2 into a bool)."""
    try:
        out = a.astype(dtype)
        same = np.array_equal(out.astype(np.float64), a.astype(np.float64), equal_nan=True) if a.dtype != np.bool_ or dtype == np.bool_ else True
    except (TypeError, ValueError):
        same = False
    if not same or (dtype == np.bool_ and a.dtype != np.bool_ and not np.all((a == 0) | (a == 1))):
        raise ParamSpaceError(f"{where}: value {a.tolist()!r} is not exactly representable as {dtype}")
    if dtype.kind == "f" and not np.all(np.isfinite(a.astype(np.float64))):
        raise ParamSpaceError(f"{where}: value {a.tolist()!r} is not finite")
    return out


def param_space(env) -> ParamSpace:
    """The default `ParamSpace` of ``env`` (through any wrappers): what its ``param_space()``
    method declares. Raises `ParamSpaceError` naming the env when it declares none."""
    inner = env.unwrapped if hasattr(env, "unwrapped") else env
    fn = getattr(inner, "param_space", None)
    space = fn() if callable(fn) else None
    if not isinstance(space, ParamSpace):
        raise ParamSpaceError(
            f"{getattr(inner, 'name', type(inner).__name__)} declares no param space: define "
            "param_space(self) -> jaxenvs.levels.ParamSpace on the env, or build one with ParamSpace(env.default_params, field=...)"
        )
    return space


# ---- levels as data -------------------------------------------------------------------------
def _host_leaves(level):
    """[(path, numpy array in its canonical JAX dtype)] of one level or a batch."""
    return [(jax.tree_util.keystr(p), np.asarray(jnp.asarray(x))) for p, x in jax.tree_util.tree_leaves_with_path(level)]


def _digest(leaves) -> str:
    h = hashlib.sha256()
    for path, a in leaves:
        a = np.asarray(a, order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        h.update(f"{path}|{a.dtype.str.lstrip('<>=|')}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def level_hash(level: Any) -> str:
    """SHA-256 (64 hex digits) of one level: each leaf's field path, dtype, shape and little-endian
    bytes, in the dtype JAX holds it in (a Python ``5`` hashes as int32 ``5``; ``-0.0`` and ``0.0``
    differ). The same level hashes the same in every process and on every platform."""
    return _digest(_host_leaves(level))


def num_levels(levels: Any) -> int:
    """The leading-axis size of a batch of levels (every leaf must have the same one)."""
    sizes = {np.shape(x)[0] if np.ndim(x) else None for x in jax.tree.leaves(levels)}
    if len(sizes) != 1 or None in sizes:
        raise ParamSpaceError(f"a batch of levels has one leading axis on every leaf; got leading sizes {sorted(map(str, sizes))}")
    return sizes.pop()


def level_hashes(levels: Any) -> list[str]:
    """`level_hash` of each level of a batch (leading axis on every leaf)."""
    leaves = _host_leaves(levels)
    return [_digest([(p, a[i]) for p, a in leaves]) for i in range(num_levels(levels))]


def unstack_levels(levels: Any) -> list[Any]:
    """A batch of levels as a list of single levels (host arrays)."""
    return [jax.tree.map(lambda x, i=i: np.asarray(x)[i], levels) for i in range(num_levels(levels))]


def stack_levels(levels: Sequence[Any]) -> Any:
    """Single levels joined into one batch with a leading axis
    on every leaf (host arrays, in each leaf's canonical JAX dtype)."""
    if not levels:
        raise ParamSpaceError("stack_levels needs at least one level")
    return jax.tree.map(lambda *xs: np.stack([np.asarray(jnp.asarray(x)) for x in xs]), *levels)


def concat_levels(batches: Sequence[Any]) -> Any:
    """Batches of levels joined along their leading axis (host arrays)."""
    if not batches:
        raise ParamSpaceError("concat_levels needs at least one batch")
    return jax.tree.map(lambda *xs: np.concatenate([np.asarray(x) for x in xs]), *batches)


def _to_python(a: np.ndarray):
    if a.dtype == np.bool_:
        return a.tolist()
    if a.dtype.kind in "iu":
        return a.tolist()
    if not np.all(np.isfinite(a)):
        raise ParamSpaceError(f"a level's float values must be finite to be written as JSON, got {a.tolist()!r}")
    return a.astype(np.float64).tolist()  # float32 -> float64 is exact; JSON's repr round-trips the float64


def level_to_json(level: Any) -> dict:
    """One level as a JSON-ready dict ``{field: value}`` (nested dataclasses as nested dicts;
    arrays as nested lists). ``json.dumps`` of it, read back by `level_from_json`, gives the
    same values bit for bit (floats go through float64, which holds a float32 exactly)."""
    out = {}
    for name in _fields(level):
        v = getattr(level, name)
        out[name] = level_to_json(v) if dataclasses.is_dataclass(v) else _to_python(np.asarray(jnp.asarray(v)))
    return out


def level_from_json(data: Any, like: Any) -> Any:
    """The level ``data`` (a dict from `level_to_json`, or a JSON string) as params of ``like``'s
    class, shapes and dtypes (``like`` is usually ``env.default_params``). A field left out takes
    ``like``'s value; an unknown field, a value of the wrong shape, or one its dtype cannot hold
    exactly (0.5 for an int, 2 for a bool) raises `ParamSpaceError` naming the field."""
    if isinstance(data, (str, bytes)):
        data = json.loads(data)
    names = _fields(like)
    if not isinstance(data, dict):
        raise ParamSpaceError(f"a level is a JSON object of {type(like).__name__} fields ({', '.join(names)}), got {type(data).__name__}")
    unknown = [k for k in data if k not in names]
    if unknown:
        raise ParamSpaceError(
            f"level JSON has unknown field(s) {', '.join(map(repr, unknown))} for {type(like).__name__}; valid fields: {', '.join(names)}"
        )
    changes = {}
    for name, value in data.items():
        current = getattr(like, name)
        if dataclasses.is_dataclass(current):
            changes[name] = level_from_json(value, current)
            continue
        shape, dtype = _leaf_kind(current)
        where = f"level JSON field {name!r} ({dtype}{list(shape)})"
        try:
            a = np.asarray(value)
        except (TypeError, ValueError):
            raise ParamSpaceError(f"{where}: {value!r} is not a number or a nested list of numbers") from None
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise ParamSpaceError(f"{where}: {value!r} is not a number or a (rectangular) nested list of numbers")
        if a.shape != shape:
            raise ParamSpaceError(f"{where}: got shape {a.shape}, expected {shape}")
        if dtype.kind in "iu" and a.dtype.kind == "b" or dtype.kind == "f" and a.dtype.kind == "b":
            raise ParamSpaceError(f"{where}: got a bool, expected a number")
        changes[name] = jnp.asarray(_cast_exact(a, dtype, where))
    typed = {n: jnp.asarray(getattr(like, n)) for n in names if not dataclasses.is_dataclass(getattr(like, n))}
    return like.replace(**{**typed, **changes})


def save_levels(path: str | os.PathLike, levels: Any, env_id: str | None = None) -> None:
    """Write a batch of levels to ``path`` as ``{"format": "jaxenvs.levels/1", "env": env_id,
    "levels": [level, ...]}`` (each as `level_to_json`), strict JSON (no NaN)."""
    body = {"format": FORMAT, "env": env_id, "levels": [level_to_json(lv) for lv in unstack_levels(levels)]}
    with open(path, "w") as f:
        json.dump(body, f, allow_nan=False, separators=(",", ":"))
        f.write("\n")


def load_levels(source: Any, like: Any) -> Any:
    """A batch of levels (leading axis on every leaf) from ``source``: a path to a file `save_levels`
    wrote, or its parsed content, or a list of level objects, or one level object (a batch of 1).
    ``like`` gives the class, shapes and dtypes (see `level_from_json`)."""
    data = source
    if isinstance(source, (str, os.PathLike)) and not str(source).lstrip().startswith(("{", "[")):
        with open(source) as f:
            data = json.load(f)
    elif isinstance(source, (str, bytes)):
        data = json.loads(source)
    if isinstance(data, dict) and "levels" in data:
        if data.get("format", FORMAT) != FORMAT:
            raise ParamSpaceError(f"levels file format {data.get('format')!r} is not {FORMAT!r}")
        data = data["levels"]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise ParamSpaceError("levels JSON holds a non-empty list of levels (or {'levels': [...]}, or one level object)")
    out = []
    for i, d in enumerate(data):
        try:
            out.append(level_from_json(d, like))
        except ParamSpaceError as e:
            raise ParamSpaceError(f"level {i}: {e}") from None
    return stack_levels(out)


def overlap(levels: Any, others: Any) -> list[str]:
    """The hashes (sorted) of the levels that both batches hold: ``[]`` when a held-out set is
    disjoint from a training batch."""
    return sorted(set(level_hashes(levels)) & set(level_hashes(others)))


def level_fields(level: Any, like: Any) -> dict:
    """``{field: value}`` of ONE level given as a path to a JSON file (one level, or a levels file
    of `save_levels` holding exactly one), a JSON string, its parsed dict, or params
    of ``like``'s class; checked against ``like`` (`level_from_json`)."""
    if dataclasses.is_dataclass(level):
        level = level_to_json(level)
    if isinstance(level, (str, os.PathLike)) and not str(level).lstrip().startswith(("{", "[")) and not os.path.isfile(level):
        raise ParamSpaceError(f"level file {str(level)!r} does not exist")
    batch = load_levels(level, like)
    if num_levels(batch) != 1:
        raise ParamSpaceError(f"a level to play is one level; {str(level)[:80]!r} holds {num_levels(batch)}")
    one = unstack_levels(batch)[0]
    return {name: getattr(one, name) for name in _fields(one)}
