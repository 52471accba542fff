"""Optional dependencies: one helper that imports them or says which extra to install.

The core of jaxenvs needs only jax and numpy. Everything else (the trainer's flax and optax,
Gymnasium, PettingZoo, SB3, pygame, imageio, scipy, ...) is an optional extra, and a missing one must
fail with a message that names the extra, never with a bare ``ModuleNotFoundError``::

    gymnasium = require("gymnasium", extra="gymnasium", purpose="the Gymnasium adapter")
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["MissingExtraError", "require", "install_hint"]


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message names the extra that brings it."""


# extras that pull torch: a bare `pip install` of them takes torch's default wheel, several GB of CUDA
# libraries; a CPU build first keeps a CPU-only machine's install small (the README's two steps)
_TORCH_EXTRAS = ("sb3", "all")
_CPU_TORCH = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def install_hint(extra: str) -> str:
    """The command that installs ``extra``: ``pip install "jaxenvs[extra]"``, preceded by a CPU build of
    torch for the extras that need torch (without it pip takes the default CUDA wheels, several GB)."""
    if extra in _TORCH_EXTRAS:
        return f'{_CPU_TORCH} && pip install "jaxenvs[{extra}]" (on a machine with a GPU, drop the first step)'
    return f'pip install "jaxenvs[{extra}]"'


def require(module: str, *, extra: str, purpose: str) -> ModuleType:
    """Import ``module`` and return it; raise `MissingExtraError` naming ``extra`` if it is
    missing.

    ``purpose`` says what needs it, e.g. ``"training"`` or ``"the PettingZoo adapter"``. Only a
    missing ``module`` (or one of its parents) becomes ``MissingExtraError``; an ImportError raised
    inside an installed package (a broken install, an incompatible version) propagates with the
    original message appended, so it is not mistaken for a missing extra.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        missing = e.name or module
        if module == missing or module.startswith(missing + "."):
            raise MissingExtraError(
                f"{purpose} needs {missing!r}, which is not installed: {install_hint(extra)}"
            ) from None
        raise
