"""XLA settings of the trainer's commands: the safe XLA:CPU scheduler and the compilation cache.

**The XLA:CPU hang.** With jax/jaxlib 0.10.x on CPU, seed-vmapped programs could hang forever
inside the XLA runtime (every thread idle, the caller waiting for a result) while XLA:CPU's
concurrency-optimized scheduler is on, its default. The smallest case found (deterministic on the
project's 2-core machine): ``jax.jit(jax.vmap(trainer.init, in_axes=(0, None)))`` over 2 seeds of
GridWorld with 8 environments. Bisected: the environments' reset alone finishes; the network's
initialisation hangs, and finishes when its orthogonal kernels are drawn without QR. So it is
LAPACK's QR custom call (``jax.nn.initializers.orthogonal``), batched over seeds, beside the first
forward pass. A single vmapped QR, or six of them alone, finished.

What does not help: the per-program option (``jax.jit(f).lower(...).compile(compiler_options=
{"xla_cpu_enable_concurrency_optimized_scheduler": False})``) -- XLA:CPU takes this flag from the
process's flags, parsed once when JAX starts -- nor ``xla_cpu_multi_thread_eigen=False``,
``xla_cpu_parallel_codegen_split_count=1`` or ``xla_backend_optimization_level=0``, each tried on
the smallest case. ``--xla_cpu_enable_concurrency_optimized_scheduler=false`` in ``XLA_FLAGS``
before JAX starts does help, but a notebook that imported jax first cannot get it any more.

So the trainer's programs hold no LAPACK call: `jaxenvs.train.networks.orthogonal` draws the same
kernels (equal to JAX's initialiser within 1e-5) with Gram-Schmidt, and a test checks that the
lowered init has no LAPACK custom call and that seed-vmapped PPO on GridWorld (2 seeds) and
HurdleRace (3 seeds) finishes with JAX started first. Importing ``jaxenvs.train`` no longer touches
``XLA_FLAGS``. Your own seed-vmapped programs can still hit the hang if they run a QR (or, untested,
other LAPACK calls such as ``lstsq``, which TRPO's linear baseline uses); for them,
`use_safe_cpu_scheduler` sets the flag in ``XLA_FLAGS`` -- call it before JAX starts.
"""

from __future__ import annotations

import os
import warnings

from jaxenvs import _cache
from jaxenvs._fast_compile import compiler_options

__all__ = ["CPU_SCHEDULER_FLAG", "use_safe_cpu_scheduler", "jax_started", "enable_compilation_cache", "CompileLog", "AheadOfTime"]

CPU_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"


def jax_started() -> bool:
    """Whether JAX has started a backend in this process (after which ``XLA_FLAGS`` is fixed)."""
    try:
        from jax._src import xla_bridge

        return bool(getattr(xla_bridge, "_backends", None))
    except Exception:  # a JAX without that internal: assume not
        return False


def use_safe_cpu_scheduler() -> bool:
    """Turn XLA:CPU's concurrency-optimized scheduler off for this process through ``XLA_FLAGS``
    (unless the flag is set there already, e.g. by you to override), for programs of your own
    that vmap LAPACK calls (see the module docstring; the trainer's programs do not need it).
    Returns whether ``XLA_FLAGS`` was changed; warns when JAX had already started, so the change
    cannot apply."""
    flags = os.environ.get("XLA_FLAGS", "")
    if CPU_SCHEDULER_FLAG in flags:
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {CPU_SCHEDULER_FLAG}=false".strip()
    if jax_started():
        warnings.warn(
            f"JAX has already started, so {CPU_SCHEDULER_FLAG}=false (set in XLA_FLAGS) does not apply to this "
            "process: call use_safe_cpu_scheduler() before the first JAX computation, or start Python with "
            f"XLA_FLAGS={CPU_SCHEDULER_FLAG}=false (jaxenvs.train's own programs do not need it).",
            RuntimeWarning,
            stacklevel=3,
        )
    return True


def enable_compilation_cache():
    """JAX's persistent compilation cache for the trainer's commands (`jaxenvs._cache`), keeping
    every program however quick to compile: a warm start then compiles nothing (it still traces
    and lowers, which is how JAX's cache finds a program)."""
    return _cache.enable_compilation_cache(min_compile_s=0.0)


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


class AheadOfTime:
    """``jax.jit(fn)`` that can be compiled for given argument shapes before it is first called
    (`compile`, e.g. in a background thread while the training runs): the compiled program is kept
    per argument signature and called as such. ``fast=True``: XLA's cheapest compile (no LLVM
    optimisation, `jaxenvs._fast_compile`), for programs that run once for milliseconds (a GIF's
    rollouts and frames), where the optimised compile costs more than it saves."""

    def __init__(self, fn, fast: bool = False):
        import jax

        options = None
        if fast:
            options = compiler_options(jax.default_backend())
        self.jitted = jax.jit(fn, compiler_options=options) if options else jax.jit(fn)
        self._compiled: dict = {}

    def compile(self, *args):
        """The compiled program for ``args`` (arrays or ``jax.ShapeDtypeStruct`` of their shapes),
        compiled now (JAX's persistent cache answers a warm start) and kept for the calls that follow."""
        sig = _signature(args)
        if sig not in self._compiled:
            self._compiled[sig] = self.jitted.lower(*args).compile()
        return self._compiled[sig]

    def __call__(self, *args):
        if not self._compiled:
            return self.jitted(*args)
        return self.compile(*args)(*args)


class CompileLog:
    """What JAX traced, lowered and compiled in this process from `start` on (its
    ``jax.monitoring`` events, from every thread): seconds and counts per kind (``trace``,
    ``lower``, ``compile``: XLA's compile, or the load from the persistent cache on a hit), the
    compile seconds of each program by name, and the persistent cache's hits and misses.
    ``jaxenvs-train`` writes `summary` into the run directory's ``timings.json``."""

    _KINDS = {
        "/jax/core/compile/jaxpr_trace_duration": "trace",
        "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
        "/jax/core/compile/backend_compile_duration": "compile",
    }
    _COUNTS = {"/jax/compilation_cache/cache_hits": "cache_hits", "/jax/compilation_cache/cache_misses": "cache_misses"}

    def __init__(self):
        import threading

        self._lock = threading.Lock()
        self.seconds = dict.fromkeys(self._KINDS.values(), 0.0)
        self.counts = dict.fromkeys(list(self._KINDS.values()) + list(self._COUNTS.values()), 0)
        self.programs: dict[str, float] = {}
        self._installed = False

    def start(self) -> "CompileLog":
        """Listen from now on (once; `stop` ends it)."""
        import jax

        if not self._installed:
            jax.monitoring.register_event_duration_secs_listener(self._on_duration)
            jax.monitoring.register_event_listener(self._on_event)
            self._installed = True
        return self

    def stop(self) -> None:
        import jax

        if self._installed:
            jax.monitoring.unregister_event_duration_listener(self._on_duration)
            jax.monitoring.unregister_event_listener(self._on_event)
            self._installed = False

    def _on_duration(self, event: str, duration: float, **kwargs) -> None:
        kind = self._KINDS.get(event)
        if kind is None:
            return
        with self._lock:
            self.seconds[kind] += duration
            self.counts[kind] += 1
            if kind == "compile":
                name = str(kwargs.get("fun_name", "?"))
                self.programs[name] = self.programs.get(name, 0.0) + duration

    def _on_event(self, event: str, **kwargs) -> None:
        name = self._COUNTS.get(event)
        if name is not None:
            with self._lock:
                self.counts[name] += 1

    def summary(self) -> dict:
        """``{"seconds": {kind: s}, "counts": {...}, "programs_s": {name: s}}`` (programs by
        compile seconds, largest first). Seconds from several threads add up: their sum can
        exceed the wall time of a command that compiles in the background."""
        with self._lock:
            programs = dict(sorted(self.programs.items(), key=lambda kv: -kv[1]))
            return {"seconds": {f"{k}_s": v for k, v in self.seconds.items()}, "counts": dict(self.counts),
                    "programs_s": programs}
