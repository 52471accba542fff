"""Frozen dataclasses that are JAX pytrees: the one container for params and state.

    from jaxenvs import struct

    @struct.dataclass
    class EnvParams:
        size: int = 5                                    # a pytree leaf: traced, vmappable
        layout: str = struct.field(pytree_node=False, default="open")   # static metadata

    params = EnvParams().replace(size=8)

The same spelling as ``flax.struct`` (``dataclass``, ``field(pytree_node=...)``, ``.replace``),
built on JAX's public `jax.tree_util.register_dataclass`, so the library needs no flax.
Classes made with ``flax.struct.dataclass`` (or any other pytree) work as params and state too.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import jax

__all__ = ["dataclass", "field"]

T = TypeVar("T")


def field(pytree_node: bool = True, **kwargs: Any) -> Any:
    """A dataclass field; ``pytree_node=False`` makes it static metadata (hashable, not traced)."""
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata["static"] = not pytree_node
    return dataclasses.field(metadata=metadata, **kwargs)


def _replace(self, **changes: Any):
    """A copy with ``changes`` applied (``dataclasses.replace``)."""
    return dataclasses.replace(self, **changes)


def dataclass(cls: type[T] | None = None, /, **kwargs: Any) -> Any:
    """Decorate ``cls`` as a frozen dataclass registered as a pytree node, with ``.replace``."""

    def wrap(c: type[T]) -> type[T]:
        if "replace" not in c.__dict__:
            c.replace = _replace
        dc = dataclasses.dataclass(frozen=True, **kwargs)(c)
        return jax.tree_util.register_dataclass(dc)

    return wrap if cls is None else wrap(cls)
