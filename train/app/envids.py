"""Environment ids on the command line: ``GridWorld-v0``, ``ns/Name-v0``, or ``module:ns/Name-v0``
for an environment that ``module`` registers when imported (as ``jaxenvs.make`` accepts them).

``jaxenvs-train`` and ``jaxenvs evaluate`` put the current directory first on the
import path (as ``python -m`` does), so ``--env my_module:MyEnv-v0`` finds ``./my_module.py``.

A run directory's ``config.json`` names its env id, so loading a run of a ``module:id`` env
(``--resume``, ``load_policy``, ``jaxenvs play``, the evaluation) imports that module and runs its
code, as ``gymnasium.make("module:id")`` does; `train.checkpoint.announce_env_module` names the
files first.
"""

from __future__ import annotations

import os
import shlex
import sys

__all__ = ["cwd_on_import_path", "run_dir_stem", "from_here", "ENV_ID_FORMS"]

ENV_ID_FORMS = "an id such as GridWorld-v0 or ns/Name-v0, or module:ns/Name-v0 to import module (e.g. ./module.py) first"


def cwd_on_import_path() -> None:
    """Put the current directory first on ``sys.path`` unless it is there already."""
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:
        sys.path.insert(0, cwd)


def run_dir_stem(env_id: str) -> str:
    """The start of a run directory's name for ``env_id``: without a ``module:`` prefix, ``/`` as
    ``_`` (``my_module:ns/Id-v0`` -> ``ns_Id-v0``)."""
    return env_id.rpartition(":")[2].replace("/", "_")


def from_here(env_id: str, command: str) -> str:
    """``command`` as a hint that works from any directory: for a ``module:`` env id, prefixed with
    ``cd`` to the current directory (where ``module`` was imported from)."""
    return f"cd {shlex.quote(os.getcwd())} && {command}" if ":" in env_id else command
