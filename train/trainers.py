"""The one entry point for every algorithm: `make_trainer` builds the trainer a config asks for,
from the table of algorithms (`train.configs.ALGORITHMS`)."""

from __future__ import annotations

from typing import Any

from .configs import ALGORITHMS

__all__ = ["make_trainer"]


def make_trainer(config, mesh: Any = None):
    """The trainer of ``config``'s algorithm (its class's ``ALGO``, a key of `ALGORITHMS`);
    ``mesh`` (`jaxenvs.sharding.env_mesh`) trains data-parallel over its devices."""
    algo = ALGORITHMS.get(getattr(type(config), "ALGO", None))
    if algo is None or type(config) is not algo.config:
        raise TypeError(
            f"make_trainer: expected a config of one of {sorted(ALGORITHMS)} "
            f"({', '.join(a.config.__name__ for a in ALGORITHMS.values())}), got {type(config).__name__}"
        )
    return algo.trainer.build(config, mesh=mesh)
