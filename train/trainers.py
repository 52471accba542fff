"""One entry point for every algorithm: :func:`make_trainer` builds the trainer a config asks for."""

from __future__ import annotations

from typing import Any

from .configs import ALGOS, PPOConfig, TRPOConfig

__all__ = ["make_trainer"]


def make_trainer(config, mesh: Any = None):
    """The trainer of ``config``'s algorithm (``config.ALGO``, one of :data:`~train.configs.ALGOS`)."""
    if isinstance(config, PPOConfig):
        from .ppo import make_trainer as make_ppo

        return make_ppo(config, mesh=mesh)
    if isinstance(config, TRPOConfig):
        from .trpo import make_trainer as make_trpo

        return make_trpo(config, mesh=mesh)
    raise TypeError(f"make_trainer: expected a config of one of {sorted(ALGOS)}, got {type(config).__name__}")
