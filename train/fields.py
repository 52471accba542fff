"""Config fields that describe themselves: each field's rule (what values are allowed) and help
text live in its ``dataclasses.field(metadata=...)``, so validation, ``--help`` and the docs read
one declaration.

    lr: float = field(3e-4, Float(0, lo_open=True), "Adam step size (before annealing)")

Rules are checked on the host when a config is built (never inside the compiled program); a
field without a rule is an error, so a new field cannot go unchecked.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any

import numpy as np

__all__ = [
    "field", "retuned", "rule_of", "help_of", "validate_fields", "Int", "Float", "Bool", "Choice", "Str", "Mapping",
    "Sizes", "INT32_MAX",
]

INT32_MAX = 2**31 - 1


def field(default: Any, rule: Any, help: str = "", traced: bool = False) -> Any:  # noqa: A002  (argparse's word)
    """A dataclass field with its validation ``rule`` and ``help`` text in its metadata (a mutable
    default such as a dict or list becomes a ``default_factory``). A ``traced`` field is a
    hyperparameter that enters the compiled program as a float32 value (``train.configs.hparams_class``)."""
    metadata = {"rule": rule, "help": help, "traced": traced}
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def retuned(base: type, name: str, default: Any) -> Any:
    """Field ``name`` of dataclass ``base`` with another default (same rule and help): how an
    algorithm's config changes a shared field's default."""
    meta = base.__dataclass_fields__[name].metadata
    return field(default, meta["rule"], meta["help"], meta["traced"])


def rule_of(f: dataclasses.Field) -> Any:
    return f.metadata.get("rule")


def help_of(f: dataclasses.Field) -> str:
    return f.metadata.get("help", "")


@dataclasses.dataclass(frozen=True)
class Int:
    """An int (not a bool) in ``[lo, hi]``."""

    lo: int | None = None
    hi: int | None = INT32_MAX

    def check(self, v) -> str | None:
        bad = isinstance(v, bool) or not isinstance(v, numbers.Integral)
        if bad or (self.lo is not None and v < self.lo) or (self.hi is not None and v > self.hi):
            bounds = ([f">= {self.lo}"] if self.lo is not None else []) + ([f"<= {self.hi}"] if self.hi is not None else [])
            return "an int " + " and ".join(bounds)
        return None


@dataclasses.dataclass(frozen=True)
class Float:
    """A finite real number (not a bool, not a string) with optional bounds; ``lo_open``/``hi_open``
    exclude the bound itself."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False

    def allowed(self) -> str:
        parts = []
        if self.lo is not None:
            parts.append(f"{'>' if self.lo_open else '>='} {self.lo:g}")
        if self.hi is not None:
            parts.append(f"{'<' if self.hi_open else '<='} {self.hi:g}")
        return "a finite number" + (" " + " and ".join(parts) if parts else "")

    def check(self, v) -> str | None:
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            return self.allowed()
        if self.lo is not None and (v <= self.lo if self.lo_open else v < self.lo):
            return self.allowed()
        if self.hi is not None and (v >= self.hi if self.hi_open else v > self.hi):
            return self.allowed()
        return None


@dataclasses.dataclass(frozen=True)
class Bool:
    def check(self, v) -> str | None:
        return None if isinstance(v, (bool, np.bool_)) else "true or false"


@dataclasses.dataclass(frozen=True)
class Choice:
    options: tuple

    def check(self, v) -> str | None:
        return None if isinstance(v, str) and v in self.options else "one of " + ", ".join(map(repr, self.options))


@dataclasses.dataclass(frozen=True)
class Str:
    def check(self, v) -> str | None:
        return None if isinstance(v, str) and v else "a non-empty string"


@dataclasses.dataclass(frozen=True)
class Mapping:
    def check(self, v) -> str | None:
        return None if isinstance(v, dict) and all(isinstance(k, str) for k in v) else "a dict with string keys"


@dataclasses.dataclass(frozen=True)
class Sizes:
    """A non-empty list/tuple of ints in ``[1, hi]`` (layer widths)."""

    hi: int = 1 << 16

    def check(self, v) -> str | None:
        ok = isinstance(v, (list, tuple)) and len(v) > 0 and all(Int(1, self.hi).check(h) is None for h in v)
        return None if ok else f"a non-empty list of integers in [1, {self.hi}]"


def validate_fields(config) -> None:
    """Check each field of the dataclass ``config`` against its rule (``field(..., rule)``: an
    object whose ``check(value)`` returns None or a description of what is allowed). Raises
    TypeError for a field without a rule, and ValueError (TypeError for a value of the wrong
    type) naming the class, the field, the value and what is allowed."""
    cls = type(config).__name__
    missing = sorted(f.name for f in dataclasses.fields(config) if rule_of(f) is None)
    if missing:
        raise TypeError(f"{cls} has no rule for field(s) {missing}; declare them with train.fields.field")
    for f in dataclasses.fields(config):
        v, rule = getattr(config, f.name), rule_of(f)
        allowed = rule.check(v)
        if allowed is not None:
            wrong_type = isinstance(v, (str, bytes, list, tuple, dict, type(None))) and not isinstance(
                rule, (Str, Choice, Sizes, Mapping)
            )
            err = TypeError if wrong_type else ValueError
            raise err(f"{cls}.{f.name} must be {allowed}; got {v!r} ({type(v).__name__})")
