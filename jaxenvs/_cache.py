"""JAX's persistent compilation cache for the command lines (``jaxenvs`` and ``python -m jaxenvs.train``).

Compiled programs are kept on disk, so a second run of the same command skips most of its
compile time. The cache lives in a per-user folder: ``$JAXENVS_CACHE_DIR`` when set, else
``$XDG_CACHE_HOME/jaxenvs/jax`` (``~/.cache/jaxenvs/jax``). ``JAXENVS_CACHE_DIR=off`` (or an
empty value) turns it off. Library imports never enable it: only the command lines call
`enable_compilation_cache`, before their first computation.

JAX keys this cache by the lowered program itself, so a change to anything a program closes over
(an env's kwargs, a user module's code, a JAX setting) is a new key, never a stale program. A
second run still traces and lowers its programs: keeping compiled executables keyed by a
description of the program instead would skip that (about 2 s of a warm ``jaxenvs-train``), but
such a key can never name everything a program closes over, and its files would be native code
run from a folder others might write; ``benchmarks/results/startup_store.md`` has the measurement.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENV_VAR", "cache_dir", "enable_compilation_cache"]

ENV_VAR = "JAXENVS_CACHE_DIR"
_OFF = ("", "0", "off", "none", "false")
MIN_COMPILE_S = 0.2


def cache_dir() -> Path | None:
    """The folder the cache uses (from `ENV_VAR` or the per-user default), None when off."""
    value = os.environ.get(ENV_VAR)
    if value is not None:
        return None if value.strip().lower() in _OFF else Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "jaxenvs" / "jax"


def enable_compilation_cache(min_compile_s: float = MIN_COMPILE_S) -> Path | None:
    """Point JAX's persistent compilation cache at `cache_dir`; returns the folder in use.

    Programs that took at least ``min_compile_s`` to compile are kept (unless
    ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` says otherwise). An explicitly configured
    cache (``JAX_COMPILATION_CACHE_DIR`` or ``jax.config.update("jax_compilation_cache_dir",
    ...)``) is left alone and its folder returned. A folder that cannot be created turns the
    cache off rather than failing the command (the cache only saves time); None is returned
    then, and when the cache is off.
    """
    import jax

    current = jax.config.jax_compilation_cache_dir
    if current:
        return Path(current)
    folder = cache_dir()
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(folder, os.W_OK):
        return None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        # a command compiles many small programs: keep those that took MIN_COMPILE_S or more
        # (JAX's default keeps only those over 1 s)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", min_compile_s)
        if min_compile_s == 0:
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder

