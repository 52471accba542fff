"""Environment ids on the command line: ``GridWorld-v0``, ``ns/Name-v0``, or ``module:ns/Name-v0``
for an environment that ``module`` registers when imported (as ``jaxenvs.make`` accepts them).

``jaxenvs-train`` and ``python -m jaxenvs.train.evaluate`` put the current directory first on the
import path (as ``python -m`` does), so ``--env my_module:MyEnv-v0`` finds ``./my_module.py``.

A run directory's ``config.json`` names its env id, so loading a run of a ``module:id`` env
(``--resume``, ``load_policy``, ``jaxenvs play``, the evaluation) imports that module and runs its
code, as ``gymnasium.make("module:id")`` does; `announce_env_module` names the files first.
"""

from __future__ import annotations

import importlib.machinery
import os
import shlex
import sys
from pathlib import Path

__all__ = ["cwd_on_import_path", "run_dir_stem", "from_here", "ENV_ID_FORMS", "module_files", "announce_env_module"]

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


def module_files(module: str) -> list[Path]:
    """The files that ``import module`` would run, found on the current ``sys.path`` without
    importing anything: the ``__init__.py`` of each package on its dotted path not imported yet,
    then the module's own file (``[]`` when it is imported already; up to where it is not found,
    whose import then fails as usual)."""
    files, path, name = [], None, ""
    for part in module.split("."):
        name = f"{name}.{part}" if name else part
        loaded = sys.modules.get(name)
        if loaded is not None:
            path = getattr(loaded, "__path__", None)
            continue
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None:
            break
        if spec.origin and spec.has_location:
            files.append(Path(spec.origin).resolve())
        path = spec.submodule_search_locations
        if path is None:
            break
    return files


def announce_env_module(env_id: str, source: str) -> list[Path]:
    """Before ``env_id`` (of ``source``, e.g. a run directory's config.json) is resolved: when it
    names a module (``module:id``) that is not imported yet, print one line to stderr naming the
    files whose code the import will run, as whoever runs this command; returns those files."""
    if not isinstance(env_id, str) or ":" not in env_id:
        return []
    module = env_id.partition(":")[0]
    files = module_files(module)
    if files:
        print(f"warning: importing {', '.join(map(str, files))} (module {module!r} of the env id {env_id!r} in "
              f"{source}): its code runs as you, as gymnasium.make('module:id') runs it", file=sys.stderr, flush=True)
    return files
