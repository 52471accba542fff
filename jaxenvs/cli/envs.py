"""Environment ids of the command line to environments, every failure a command-line error
(`jaxenvs.cli.args.UsageError` or `Failure`), and a batch too big for the device's memory."""

from __future__ import annotations

import os
import sys

import jaxenvs
from jaxenvs.registration import env_id_of
from .args import Failure, UsageError

__all__ = ["make_env", "spec_id", "import_path_for", "message", "out_of_memory"]


def message(e: BaseException) -> str:
    text = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
    return " ".join(str(text).split())


def import_path_for(env_id: str) -> None:
    """For a ``module:id`` environment id, put the current directory first on ``sys.path`` (as
    ``python -m`` does), so that a module of one's own beside the shell is found."""
    if isinstance(env_id, str) and ":" in env_id and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())


def spec_id(env_id: str) -> str:
    import_path_for(env_id)
    try:
        return env_id_of(env_id)
    except (KeyError, ValueError, TypeError, ImportError) as e:
        raise UsageError(message(e)) from e


def make_env(env_id: str, kwargs=(), autoreset: bool = True):
    spec_id(env_id)  # an unknown or malformed id, or a 'module:' prefix that cannot be imported
    try:
        return jaxenvs.make(env_id, autoreset=autoreset, **dict(kwargs))
    except ImportError as e:
        raise Failure(message(e)) from e
    except (TypeError, ValueError, OverflowError) as e:
        raise UsageError(message(e)) from e



def out_of_memory(e: BaseException, num_envs) -> UsageError | None:
    """A clear command-line error for a batch that does not fit in the device's memory (XLA's
    RESOURCE_EXHAUSTED, or the host's MemoryError); None for any other error."""
    if isinstance(e, MemoryError) or "RESOURCE_EXHAUSTED" in str(e) or "Out of memory" in str(e):
        sizes = " ".join(map(str, num_envs)) if isinstance(num_envs, (list, tuple)) else str(num_envs)
        return UsageError(
            f"--num-envs {sizes}: the batch does not fit in the memory of {device_words()}; "
            "give a smaller --num-envs (or --steps)"
        )
    return None


def device_words() -> str:
    import jax

    d = jax.devices()[0]
    return f"the {d.platform} device ({getattr(d, 'device_kind', d.platform)})"
