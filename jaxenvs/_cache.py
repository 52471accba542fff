"""JAX's persistent compilation cache for the command lines (``jaxenvs`` and ``python -m jaxenvs.train``).

Compiled programs are kept on disk, so a second run of the same command skips most of its
compile time. The cache lives in a per-user folder: ``$JAXENVS_CACHE_DIR`` when set, else
``$XDG_CACHE_HOME/jaxenvs/jax`` (``~/.cache/jaxenvs/jax``). ``JAXENVS_CACHE_DIR=off`` (or an
empty value) turns it off. Library imports never enable it: only the command lines call
`enable_compilation_cache`, before their first computation.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

__all__ = ["ENV_VAR", "cache_dir", "enable_compilation_cache", "ExecutableStore", "StoredJit", "activate_executable_store", "active_store"]

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


# ---- whole compiled programs ------------------------------------------------------------------
# JAX's persistent cache is keyed by the lowered program, so a command that runs again still
# traces and lowers every program before the cache can answer (on a 2-core CPU about as long as the
# main job's own work). The store below keeps the compiled executables themselves
# (``jax.experimental.serialize_executable``), keyed by what the caller says the program is made of
# and by everything around it that could change the program: the versions of JAX, jaxlib, NumPy,
# Flax and Optax, the backend and its devices, XLA_FLAGS, the JAX settings that change programs, and
# the source of the jaxenvs package (and of its ``train`` package) itself.

_STORE_VERSION = 1
_SOURCE_DIGEST: str | None = None


def _source_digest() -> str:
    """sha256 of every ``.py`` file of the installed ``jaxenvs`` and ``jaxenvs.train`` packages
    (paths and contents): any change to the library's code is a new key."""
    global _SOURCE_DIGEST
    if _SOURCE_DIGEST is None:
        import hashlib
        import importlib.util

        h = hashlib.sha256()
        roots = []
        for name in ("jaxenvs", "jaxenvs.train"):
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                spec = None
            for loc in (spec.submodule_search_locations or []) if spec is not None else []:
                roots.append(Path(loc))
        for root in sorted(set(roots)):
            for path in sorted(root.rglob("*.py")):
                h.update(str(path.relative_to(root)).encode() + b"\0")
                h.update(path.read_bytes())
        _SOURCE_DIGEST = h.hexdigest()
    return _SOURCE_DIGEST


def _environment_key() -> str:
    """What, besides the caller's description and the arguments' shapes, decides a program."""
    import importlib.metadata as md

    import jax

    versions = []
    for dist in ("jax", "jaxlib", "numpy", "flax", "optax", "gymnax"):
        try:
            versions.append(f"{dist}={md.version(dist)}")
        except md.PackageNotFoundError:
            versions.append(f"{dist}=none")
    devices = jax.devices()
    settings = [f"{name}={getattr(jax.config, name)}" for name in (
        "jax_enable_x64", "jax_default_prng_impl", "jax_threefry_partitionable", "jax_default_matmul_precision",
        "jax_numpy_rank_promotion", "jax_debug_nans", "jax_disable_jit",
    )]
    return "\n".join([
        f"store {_STORE_VERSION}", *versions, f"backend {jax.default_backend()}",
        f"devices {len(devices)} x {getattr(devices[0], 'device_kind', devices[0].platform)}",
        f"XLA_FLAGS {os.environ.get('XLA_FLAGS', '')}", *settings, f"source {_source_digest()}",
    ])


def _signature(args) -> str:
    """The arguments' tree structure, shapes, dtypes and weak types (what a compiled program takes);
    arrays and ``jax.ShapeDtypeStruct`` leaves of the same shapes give the same signature."""
    import jax

    leaves, treedef = jax.tree.flatten(args)
    parts = []
    for x in leaves:
        if not isinstance(x, jax.ShapeDtypeStruct):
            x = jax.typeof(x)
        parts.append(f"{x.dtype}{list(x.shape)}{'w' if getattr(x, 'weak_type', False) else ''}")
    return f"{treedef} {parts}"


_THREAD = threading.local()  # jax_cache_hit: the last compile of this thread came from JAX's cache
_LISTENING = False


def _on_jax_event(event: str, **_) -> None:
    if event == "/jax/compilation_cache/cache_hits":  # recorded in the thread that compiles
        _THREAD.jax_cache_hit = True


def _ensure_hit_listener() -> None:
    global _LISTENING
    if not _LISTENING:
        import jax

        jax.monitoring.register_event_listener(_on_jax_event)
        _LISTENING = True


class ExecutableStore:
    """Compiled programs kept whole on disk, so that a command run again skips tracing, lowering
    and compiling them (a hit loads the executable: about 0.1 s for the trainer's programs).

    ``store.compile(name, jitted, args, description)`` returns ``jitted.lower(*args).compile()``,
    from the store when the same ``name`` and ``description`` (a string saying everything the
    program's Python closes over: the config, the run's static sizes), the same argument shapes and
    the same environment (`_environment_key`) were compiled before. A program that cannot be
    stored or loaded is compiled as usual: the store only saves time. ``folder=None`` turns it off.
    Not for sharded programs (their layouts are not part of the key).
    """

    def __init__(self, folder: Path | None):
        self.folder = None if folder is None else Path(folder)
        self.hits: list[str] = []  # names of the programs loaded
        self.misses: list[str] = []  # names of the programs compiled (not found, or unreadable)

    def _path(self, name: str, description: str, args) -> Path:
        import hashlib

        key = hashlib.sha256("\n".join([name, description, _signature(args), _environment_key()]).encode()).hexdigest()
        return self.folder / f"{name.replace('/', '_')}-{key[:32]}.exe"

    def load(self, name: str, description: str, args):
        """The stored executable, or None (the store off, nothing stored, or unreadable)."""
        if self.folder is None:
            return None
        path = self._path(name, description, args)
        try:
            blob = path.read_bytes()
        except OSError:
            self.misses.append(name)
            return None
        try:
            import pickle

            from jax.experimental import serialize_executable

            payload, in_tree, out_tree = pickle.loads(blob)
            compiled = serialize_executable.deserialize_and_load(payload, in_tree, out_tree)
        except Exception:  # another jaxlib's bytes, a torn file: compile instead
            self.misses.append(name)
            return None
        self.hits.append(name)
        return compiled

    def save(self, name: str, description: str, args, compiled) -> bool:
        """Store ``compiled`` (atomically); False when the store is off or it cannot be stored."""
        if self.folder is None:
            return False
        try:
            import pickle
            import tempfile

            from jax.experimental import serialize_executable

            blob = pickle.dumps(serialize_executable.serialize(compiled))
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self._path(name, description, args)
            fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)
        except Exception:  # nothing is lost but the next run's time
            return False
        return True

    def compile(self, name: str, jitted, args, description: str):
        """``jitted.lower(*args).compile()``, loaded from the store when it holds it (see the class)."""
        compiled = self.load(name, description, args)
        if compiled is not None:
            return compiled
        if self.folder is None:
            self.misses.append(name)
        return self.compile_lowered(name, description, args, jitted.lower(*args))

    def compile_lowered(self, name: str, description: str, args, lowered, options: dict | None = None):
        """``lowered.compile(options)`` (``lowered`` is ``jitted.lower(*args)``; ``options``, XLA's
        compile options, must be named in ``description``), stored when freshly compiled.

        An executable JAX loaded from its persistent cache cannot be serialized again (XLA:CPU,
        jaxlib 0.10: the bytes load but fail when run, a function "not found"), so only fresh
        compiles are stored. On a CPU the program is compiled with a GPU-only option
        (``xla_gpu_autotune_level``, which XLA:CPU ignores) set from the stored file's path: JAX's cache key
        then differs from every other compile's, so a program the store lacks is compiled afresh
        (and stored) instead of coming from JAX's cache under the plain key."""
        import jax

        options = dict(options or {})
        if self.folder is not None and jax.default_backend() == "cpu":
            import hashlib

            own = hashlib.sha256(str(self._path(name, description, args)).encode()).hexdigest()  # folder and key
            options["xla_gpu_autotune_level"] = 1000 + int(own[:6], 16)
        _ensure_hit_listener()
        _THREAD.jax_cache_hit = False
        with _no_jax_cache_write() if self.folder is not None else contextlib.nullcontext():
            compiled = lowered.compile(options) if options else lowered.compile()
        if not _THREAD.jax_cache_hit:
            self.save(name, description, args, compiled)
        return compiled


def _no_jax_cache_write():
    """A context in which this thread's compiles are not written to JAX's persistent cache (JAX's
    thread-local ``jax_persistent_cache_min_compile_time_secs``): a program the store keeps would
    otherwise be serialized and written twice, its copy in JAX's cache under a key no other compile
    has (`ExecutableStore.compile_lowered`). A JAX without that setting writes as before."""
    try:
        from jax._src import config as jax_config

        return jax_config.persistent_cache_min_compile_time_secs(float("inf"))
    except Exception:  # noqa: BLE001  (another JAX: the write only costs time)
        return contextlib.nullcontext()


_ACTIVE: ExecutableStore | None = None


def activate_executable_store(folder: Path | None) -> ExecutableStore | None:
    """Make ``folder / "executables"`` the store `StoredJit` programs use in this process (the
    command lines call it with the compilation cache's folder; None turns the store off)."""
    global _ACTIVE
    _ACTIVE = None if folder is None else ExecutableStore(Path(folder) / "executables")
    return _ACTIVE


def active_store() -> ExecutableStore | None:
    """The store of this process (`activate_executable_store`), or None."""
    return _ACTIVE


def store_covers(env) -> bool:
    """Whether the store's key covers the code of ``env``: environments defined in this package
    (its source is part of the key) and gymnax's (its version is) are covered; one defined
    anywhere else (``--env module:id``, another package's registration) is not."""
    inner = getattr(env, "unwrapped", env)
    return type(inner).__module__.split(".")[0] == "jaxenvs"


def keep_store_for(env) -> ExecutableStore | None:
    """Turn this process's store off unless it covers ``env`` (`store_covers`): programs that close
    over code the key does not see are never stored or loaded, so editing that code recompiles
    instead of running a stale program. Returns the store left active."""
    if _ACTIVE is not None and not store_covers(env):
        activate_executable_store(None)
    return _ACTIVE


class StoredJit:
    """``jax.jit(fn)`` whose compiled programs come from the active `ExecutableStore` when a
    command line activated one (in a single process): a miss compiles and stores, a hit loads.
    ``description`` must name everything ``fn`` closes over that shapes its program (the config,
    static sizes); the arguments' shapes are added per call. Without an active store it is
    ``jax.jit(fn)``. ``fast=True``: XLA's cheapest compile (no LLVM optimisation,
    `jaxenvs._fast_compile`), for programs that run once for milliseconds (a GIF's rollouts and
    frames), where the optimised compile costs more than it saves. `compile` compiles (or loads)
    the program for given argument shapes without running it."""

    def __init__(self, fn, name: str, description: str, fast: bool = False):
        import jax

        options = None
        if fast:
            from ._fast_compile import compiler_options

            options = compiler_options(jax.default_backend())
        self.jitted = jax.jit(fn, compiler_options=options) if options else jax.jit(fn)
        self.name = name
        self.description = description + (f" compiled with {sorted(options.items())}" if options else "")
        self._compiled: dict = {}

    @staticmethod
    def _store():
        import jax

        store = _ACTIVE
        return None if store is None or store.folder is None or jax.process_count() > 1 else store

    def compile(self, *args):
        """The compiled program for ``args`` (arrays or ``jax.ShapeDtypeStruct`` of their shapes):
        loaded from the store or compiled (and stored) now, and kept for the calls that follow."""
        sig = _signature(args)
        compiled = self._compiled.get(sig)
        if compiled is None:
            store = self._store()
            compiled = store.compile(self.name, self.jitted, args, self.description) if store \
                else self.jitted.lower(*args).compile()
            self._compiled[sig] = compiled
        return compiled

    def __call__(self, *args):
        if self._store() is None and not self._compiled:
            return self.jitted(*args)
        return self.compile(*args)(*args)
