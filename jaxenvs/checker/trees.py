"""The checker's pytree helpers: named leaves, host copies, where two trees differ, the callbacks
in a jaxpr, and an observation's leaves against its space."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import DictKey, SequenceKey, keystr, tree_flatten_with_path

from jaxenvs import spaces
from jaxenvs.core import is_prng_key
from .results import EnvCheckError

CALLBACK_PRIMITIVES = ("pure_callback", "io_callback", "callback", "debug_callback", "debug_print")


def leaves(tree, root: str) -> list[tuple[str, Any]]:
    return [(root + keystr(p), x) for p, x in tree_flatten_with_path(tree)[0]]


def host(x) -> np.ndarray:
    return np.asarray(jax.random.key_data(x) if is_prng_key(x) else x)


# jax.typeof is jax >= 0.4.37's name for the abstract value; jax.core.get_aval before
_typeof = getattr(jax, "typeof", None) or jax.core.get_aval


def aval(x) -> tuple[tuple[int, ...], str, bool]:
    t = _typeof(x)
    return tuple(t.shape), str(t.dtype), bool(getattr(t, "weak_type", False))


def structure_difference(a, b, root: str) -> str:
    """Where pytrees ``a`` and ``b`` (with different treedefs) differ, as a path."""
    pa = dict(leaves(a, root))
    pb = dict(leaves(b, root))
    missing, extra = [p for p in pa if p not in pb], [p for p in pb if p not in pa]
    if missing:
        return missing[0]
    if extra:
        return extra[0]
    return static_difference(a, b, root) or root


def static_difference(a, b, path: str) -> str | None:
    """Path of the first differing node type or static (non-pytree) dataclass field."""
    if type(a) is not type(b):
        return path
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            va, vb = getattr(a, f.name), getattr(b, f.name)
            if f.metadata.get("static", False) or not f.metadata.get("pytree_node", True):
                try:
                    same = bool(va == vb)
                except Exception:
                    same = va is vb
                if not same:
                    return f"{path}.{f.name}"
            else:
                found = static_difference(va, vb, f"{path}.{f.name}")
                if found:
                    return found
    elif isinstance(a, Mapping):
        for k in a:
            if k in b:
                found = static_difference(a[k], b[k], path + keystr((DictKey(k),)))
                if found:
                    return found
    elif isinstance(a, (tuple, list)):
        for i, (x, y) in enumerate(zip(a, b)):
            found = static_difference(x, y, path + keystr((SequenceKey(i),)))
            if found:
                return found
    return None


def index_label(flat_index: int, lead_shape: tuple[int, ...], names: tuple[str, ...]) -> str:
    idx = np.unravel_index(flat_index, lead_shape) if lead_shape else ()
    return ", ".join(f"{n} {int(i)}" for n, i in zip(names, idx))


def first_difference(a: dict, b: dict, exact: bool) -> tuple[str, int] | None:
    """(path, flat index) of the first leaf element where the named trees ``a`` and ``b`` differ.

    Floats compare with ``rtol=1e-5, atol=1e-6`` unless ``exact`` (separately compiled programs
    may round differently); everything else exactly.
    """
    for root in a:
        for (path, x), (_, y) in zip(leaves(a[root], root), leaves(b[root], root)):
            x, y = host(x), host(y)
            if x.dtype.kind == "f" and not exact:
                same = np.isclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True)
            elif x.dtype.kind == "f":
                same = (x == y) | (np.isnan(x) & np.isnan(y))
            else:
                same = x == y
            same = np.broadcast_to(same, x.shape)
            if not same.all():
                return path, int(np.argmin(same.reshape(-1)))
    return None


def callback_primitives(jaxpr) -> list[str]:
    found = []
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in CALLBACK_PRIMITIVES or name.endswith("_callback"):
            found.append(name)
        for v in eqn.params.values():
            for sub in v if isinstance(v, (tuple, list)) else (v,):
                if hasattr(sub, "eqns") or hasattr(getattr(sub, "jaxpr", None), "eqns"):
                    found += callback_primitives(sub)
    return found


def space_leaves(space, obs, path: tuple = ()):
    """Yield ``(path, leaf_space, obs_subtree)``, descending into Dict and Tuple spaces."""
    if isinstance(space, spaces.Dict):
        if not isinstance(obs, Mapping) or set(obs) != set(space.spaces):
            got = sorted(obs) if isinstance(obs, Mapping) else type(obs).__name__
            raise EnvCheckError(
                "obs-structure", f"observation has {got}, the space has keys {sorted(space.spaces)}", "obs" + keystr(path)
            )
        for k, s in space.spaces.items():
            yield from space_leaves(s, obs[k], path + (DictKey(k),))
    elif isinstance(space, spaces.Tuple):
        if not isinstance(obs, (tuple, list)) or len(obs) != len(space.spaces):
            raise EnvCheckError(
                "obs-structure",
                f"observation is {type(obs).__name__} of length {len(obs) if isinstance(obs, (tuple, list)) else '-'}, "
                f"the space is a Tuple of {len(space.spaces)}",
                "obs" + keystr(path),
            )
        for i, s in enumerate(space.spaces):
            yield from space_leaves(s, obs[i], path + (SequenceKey(i),))
    else:
        yield path, space, obs


def contains_each(space, x, n_lead: int) -> np.ndarray:
    """bool[prod(lead)]: ``space.contains`` of every element of ``x`` (``n_lead`` leading axes)."""
    flat = jax.tree.map(lambda a: jnp.reshape(a, (-1,) + tuple(a.shape[n_lead:])), x)
    return np.asarray(jax.vmap(space.contains)(flat)).reshape(-1)


def first_leaf(x):
    return jax.tree.leaves(x)[0]
