"""Where an environment's compile time, step time and memory go: ``jaxenvs profile ID``.

    from jaxenvs.profile import profile
    report = profile("GridWorld-v0", num_envs=(1, 64, 4096))
    print(report.summary())     # GridWorld-v0: compile 0.41 s, peak 2.9e7 steps/s at 4,096 envs (vmap), 20 B/env
    report.save_json("profile_GridWorld-v0.json"); report.plot("profile_GridWorld-v0.png")

What is measured, all in this process, on JAX's default device:

* **stages**: ``jax.jit(f).trace(...)``, ``.lower()`` and ``.compile()`` timed apart for
  ``reset``, ``step`` (one environment each) and ``rollout`` (the random-policy ``jit(vmap)`` +
  ``lax.scan`` program of `jaxenvs.rollout.benchmark_program` at the sweep's largest
  ``num_envs``). Tracing runs the Python code of the env (and of its wrappers); lowering turns
  the traced program into StableHLO; compiling is XLA's work. JAX's persistent compilation cache
  is switched off while the profile runs, so compile times are those of a first (cold) run;
* **sweep**: environment steps per second against ``num_envs`` for the plain path
  (``jax.vmap(env.step)``, one key per env per step) and `jaxenvs.VectorEnv` (one key per
  batch step, batch-level auto-reset), the median of ``repeats`` timed runs after one untimed run
  (compile time excluded; each program's stages are recorded too);
* **memory**: bytes of one environment's state (the sum over the state pytree's leaves of
  ``size * itemsize``) and of its observation; and, per sweep point, XLA's compiled memory
  analysis (``compiled.memory_analysis()``): the bytes of the program's arguments, outputs and
  temporary buffers as XLA's buffer assignment plans them before running (``peak_bytes``: the
  backend's own peak figure where it gives one, else arguments + outputs + temporaries − aliased;
  generated code is not counted). It is what the program needs on the device, planned, not a
  measurement of the process's memory;
* **ops** (``ops=N``, ``jaxenvs profile ID --ops N``): the N operations of the compiled sweep
  program (the plain path at the sweep's largest ``num_envs``) that took the most time in one
  run, as JAX's profiler records them (`op_costs`): XLA's name of each fused operation, its output
  shape, the source operation it came from (the JAX primitive and where in the env's code, from
  XLA's metadata) and its share of the run. It is how to find the one operation that costs half a
  step (Connect Four's win test was four small bool reductions, about half of its batched step).
  The names are XLA:CPU's; on other backends operations the profiler names differently are left out;
* **layers**: the env with no wrapper, then with each wrapper of its stack added in turn
  (for ``make("GridWorld-v0")``: ``GridWorld``, ``TimeLimit``, ``AutoReset``): state bytes,
  the single-env ``step``'s stages and plain-path steps/s at one batch size, so what each wrapper
  adds is the difference between consecutive layers. Every layer's program makes the same steps
  (the same ``num_envs`` and ``num_steps``, `layer_programs`); all are compiled first, then timed
  in rounds (each round times every layer in turn, at least ``LAYER_REPEATS`` rounds, each timed
  run as many calls as make the fastest layer's last ``LAYER_MIN_RUN_S``, the same for all), and
  the median per layer counts. (Timed one layer after another, three runs of about 2 ms each at
  1,024 envs, a busy moment of a loaded machine could fall on one layer's runs alone and make the
  wrapper around it look several times faster than what it wraps.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs.core import Environment, check_params
from jaxenvs.rollout import benchmark_program
from jaxenvs.wrappers.base import Wrapper
import jaxenvs
from jaxenvs._optional import require

__all__ = [
    "DEFAULT_NUM_ENVS",
    "Stages",
    "SweepPoint",
    "Layer",
    "ProfileReport",
    "profile",
    "auto_num_steps",
    "tree_bytes",
    "wrapper_layers",
    "layer_programs",
    "file_stem",
]

DEFAULT_NUM_ENVS = tuple(4**k for k in range(9))  # 1, 4, 16, ..., 65,536
PATHS = ("vmap", "VectorEnv")
STEP_BUDGET = 2**18  # env steps per timed run that auto_num_steps aims at
MIN_STEPS, MAX_STEPS = 16, 1000


def auto_num_steps(num_envs: int) -> int:
    """Steps per timed run when none are given: ``2**18 // num_envs``, clipped to [16, 1000], so a
    run is long enough to time at every batch size and short at the largest."""
    return int(min(MAX_STEPS, max(MIN_STEPS, STEP_BUDGET // num_envs)))


def _leaf_bytes(x) -> int:
    dtype = x.dtype
    if jnp.issubdtype(dtype, jax.dtypes.prng_key):  # a typed key: the bytes of its key data
        data = jax.eval_shape(jax.random.key_data, x)
        return int(np.prod(data.shape, dtype=np.int64)) * np.dtype(data.dtype).itemsize
    return int(np.prod(x.shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def tree_bytes(tree: Any) -> int:
    """Bytes of a pytree of arrays (or ``jax.ShapeDtypeStruct``s): the sum of ``size * itemsize``
    over its leaves (a typed PRNG key counts its key data)."""
    return sum(_leaf_bytes(x) for x in jax.tree.leaves(tree))


def wrapper_layers(env: Environment) -> list[tuple[str, Environment]]:
    """``[(name, env)]`` from the unwrapped environment out to ``env`` itself, one entry per
    wrapper: ``make("GridWorld-v0")`` gives ``GridWorld``, ``TimeLimit``, ``AutoReset``."""
    chain = [env]
    while isinstance(chain[-1], Wrapper):
        chain.append(chain[-1].env)
    return [(type(e).__name__, e) for e in reversed(chain)]


def file_stem(env_id: str) -> str:
    """``profile_<id>`` with the characters a file name cannot hold (``/``, ``:``) as ``_``."""
    return "profile_" + "".join(c if c.isalnum() or c in "-_." else "_" for c in env_id)


@contextlib.contextmanager
def _no_persistent_cache():
    """JAX's persistent compilation cache off for the block: compile times are cold ones.

    JAX decides once per process whether it uses the cache and keeps that answer, so turning the
    flag off after a first compile would change nothing (programs compiled by an earlier run were
    still read back): the decision is reset on entry and again on exit."""
    from jax.experimental.compilation_cache.compilation_cache import reset_cache

    before = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    reset_cache()
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", before)
        reset_cache()


@dataclasses.dataclass(frozen=True)
class Stages:
    """Seconds to trace, lower and compile one jitted function (``jax.jit(f).trace(...)``,
    ``.lower()``, ``.compile()``)."""

    trace_s: float
    lower_s: float
    compile_s: float

    @property
    def total_s(self) -> float:
        return self.trace_s + self.lower_s + self.compile_s

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "total_s": self.total_s}


def compile_stages(fn: Callable, *args) -> tuple[Any, Stages]:
    """``(compiled, stages)``: ``jax.jit(fn)`` traced, lowered and compiled at ``args`` (arrays or
    ``jax.ShapeDtypeStruct``s), each stage timed."""
    t0 = time.perf_counter()
    traced = jax.jit(fn).trace(*args)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    return compiled, Stages(t1 - t0, t2 - t1, t3 - t2)


def memory_bytes(compiled) -> dict | None:
    """XLA's memory analysis of a compiled program in bytes (``argument_bytes``, ``output_bytes``,
    ``temp_bytes``, ``alias_bytes``, ``generated_code_bytes``, ``peak_bytes``), None when the
    backend gives none. ``peak_bytes`` is the backend's peak where it reports one, else
    arguments + outputs + temporaries - aliased buffers."""
    try:
        m = compiled.memory_analysis()
    except Exception:  # backends without it raise (e.g. NotImplementedError)
        return None
    if m is None:
        return None
    out = {
        "argument_bytes": int(m.argument_size_in_bytes),
        "output_bytes": int(m.output_size_in_bytes),
        "temp_bytes": int(m.temp_size_in_bytes),
        "alias_bytes": int(m.alias_size_in_bytes),
        "generated_code_bytes": int(m.generated_code_size_in_bytes),
    }
    planned = out["argument_bytes"] + out["output_bytes"] + out["temp_bytes"] - out["alias_bytes"]
    reported = int(getattr(m, "peak_memory_in_bytes", 0) or 0)
    out["peak_bytes"] = max(reported, planned)
    return out


@dataclasses.dataclass(frozen=True)
class SweepPoint:
    """One batch size on one path (``"vmap"`` or ``"VectorEnv"``): steps/s of the median run."""

    path: str
    num_envs: int
    num_steps: int
    run_s: tuple[float, ...]
    stages: Stages
    memory: dict | None

    @property
    def steps_per_s(self) -> float:
        return self.num_envs * self.num_steps / float(np.median(self.run_s))

    def to_dict(self) -> dict:
        return {
            "path": self.path, "num_envs": self.num_envs, "num_steps": self.num_steps,
            "steps_per_s": self.steps_per_s, "median_run_s": float(np.median(self.run_s)), "run_s": list(self.run_s),
            **{f"{k}": v for k, v in self.stages.to_dict().items()}, "memory": self.memory,
        }


@dataclasses.dataclass(frozen=True)
class Layer:
    """The environment up to one wrapper of its stack (``name``: that wrapper's class, or the
    environment's class for the unwrapped one)."""

    name: str
    state_bytes: int
    step_stages: Stages
    num_envs: int
    num_steps: int
    run_s: tuple[float, ...]  # seconds of one call of the layer's program (num_envs x num_steps steps), per round
    calls: int = 1  # consecutive calls each timed run made (the same for every layer of a report)

    @property
    def steps_per_s(self) -> float:
        return self.num_envs * self.num_steps / float(np.median(self.run_s))

    def to_dict(self) -> dict:
        return {
            "name": self.name, "state_bytes_per_env": self.state_bytes,
            **{f"step_{k}": v for k, v in self.step_stages.to_dict().items()},
            "num_envs": self.num_envs, "num_steps": self.num_steps, "steps_per_s": self.steps_per_s,
            "median_run_s": float(np.median(self.run_s)), "run_s": list(self.run_s), "calls_per_timed_run": self.calls,
        }


def _scientific(x: float) -> str:
    """``2.9e7`` (not Python's ``2.9e+07``)."""
    if not math.isfinite(x) or x <= 0:
        return f"{x:g}"
    exp = math.floor(math.log10(x))
    mantissa = round(x / 10**exp, 1)
    if mantissa >= 10:
        mantissa, exp = mantissa / 10, exp + 1
    return f"{mantissa:.1f}e{exp}"


@dataclasses.dataclass(frozen=True)
class OpCost:
    """One operation of a compiled program (`op_costs`): XLA's instruction ``name`` (a fusion, a
    dot, a sort...), its output ``shape``, the ``source`` operation it was made from (from XLA's
    metadata: the JAX primitive under its transformations; empty when XLA made it up), the
    profiler's events of it per call of the program (``calls``: one per run for most operations,
    e.g. once a step for an operation of a scanned step; XLA:CPU's sort records two per run) and
    its time per call (``seconds``, summed over its events; operations that ran at once on
    different threads each count in full)."""

    name: str
    shape: str
    source: str
    calls: float
    seconds: float

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


CONTAINERS = ("while", "conditional", "call", "async-start", "async-done")  # their time is their bodies


def _instructions(hlo_text: str) -> dict[str, tuple[str, str]]:
    """``{instruction name: (output shape, source op_name)}`` of a compiled program's HLO text,
    without the instructions whose time is that of the instructions they hold (`CONTAINERS`)."""
    import re

    found = {}
    for m in re.finditer(r"^\s*(?:ROOT )?%([\w.\-]+) = (.*)$", hlo_text, re.M):
        rest = m.group(2)
        if rest.startswith("("):  # a tuple shape: up to its closing parenthesis
            depth, end = 0, 0
            for end, ch in enumerate(rest):
                depth += {"(": 1, ")": -1}.get(ch, 0)
                if depth == 0:
                    break
            shape, tail = rest[:end + 1], rest[end + 1:].lstrip()
        else:
            shape, _, tail = rest.partition(" ")
        opcode = tail.split("(", 1)[0].strip()
        if opcode in CONTAINERS:
            continue
        source = re.search(r'op_name="([^"]*)"', tail)
        found.setdefault(m.group(1), (shape, source.group(1) if source else ""))
    return found


def op_costs(compiled, call: Callable[[], Any], calls: int = 3) -> list[OpCost]:
    """The operations of ``compiled`` (a ``jax.jit(...).lower(...).compile()`` program) that JAX's
    profiler saw run while ``call()`` (which calls it and blocks until it is done) ran ``calls``
    times, most expensive first, per call of the program. Records a trace with
    ``jax.profiler.trace`` into a temporary folder; profiler events that are not one of the
    program's instructions (Python, the runtime's own, loops and calls whose time is their bodies')
    are left out, and an event inside another of the same name on the same thread counts once.
    The profiler adds its own cost to every event it records (about a microsecond on a CPU), so a
    program of many tiny operations looks slower under it than it runs: read the list for which
    operations stand out, not as a timing."""
    import gzip
    import tempfile

    if not isinstance(calls, int) or isinstance(calls, bool) or calls < 1:
        raise ValueError(f"calls must be an int >= 1, got {calls!r}")
    known = _instructions(compiled.as_text())
    jax.block_until_ready(call())  # the first run's allocations are not counted
    with tempfile.TemporaryDirectory(prefix="jaxenvs-ops-") as folder:
        with jax.profiler.trace(folder, create_perfetto_trace=True):
            for _ in range(calls):
                jax.block_until_ready(call())
        traces = sorted(Path(folder).rglob("*.trace.json.gz"))
        if not traces:
            raise RuntimeError(f"JAX's profiler wrote no trace into {folder}")
        events = json.loads(gzip.open(traces[-1]).read()).get("traceEvents", [])
    runs = sorted(((float(e.get("ts", 0.0)), float(e.get("dur", 0.0)), e.get("tid"), e["name"]) for e in events
                   if e.get("ph") == "X" and e.get("name") in known), key=lambda run: (run[0], -run[1]))  # by start, the outer first
    total: dict[str, float] = {}
    count: dict[str, int] = {}
    open_until: dict[tuple, float] = {}  # (thread, name) -> when its outermost open event ends
    for ts, dur, tid, name in runs:
        if ts < open_until.get((tid, name), -1.0):
            continue  # nested in an event of the same name: already counted
        open_until[tid, name] = ts + dur
        total[name] = total.get(name, 0.0) + dur * 1e-6
        count[name] = count.get(name, 0) + 1
    ops = [OpCost(n, known[n][0], known[n][1], count[n] / calls, total[n] / calls) for n in total]
    return sorted(ops, key=lambda o: -o.seconds)


def ops_table(ops: Sequence[OpCost], top: int | None = None) -> str:
    """A text table of `op_costs`' operations (the ``top`` first), each with its share of the time
    of all of ``ops``."""
    whole = sum(o.seconds for o in ops) or 1.0
    rows = [f"{'share':>6} {'ms/call':>8} {'runs':>6}  {'operation':<28} {'output':<22} source"]
    for o in list(ops)[:top]:
        rows.append(f"{100 * o.seconds / whole:5.1f}% {o.seconds * 1e3:8.3f} {o.calls:6.0f}  {o.name[:28]:<28} "
                    f"{o.shape[:22]:<22} {o.source[-90:]}")
    return "\n".join(rows)


@dataclasses.dataclass(frozen=True)
class ProfileReport:
    """What `profile` measured; ``to_dict`` is the JSON file's content (keys ending in
    ``_s`` are seconds, ``_bytes`` and ``bytes_per_env`` bytes, ``steps_per_s`` env steps per
    second)."""

    env_id: str
    device: str
    jax_version: str
    state_bytes: int
    obs_bytes: int
    stages: dict[str, Stages]
    rollout_num_envs: int
    sweep: tuple[SweepPoint, ...]
    layers: tuple[Layer, ...]
    ops: tuple[OpCost, ...] = ()  # the sweep program's costliest operations (``profile(ops=N)``)
    ops_s: float = 0.0  # the time of all its operations per call, which ``ops``' shares are of

    @property
    def peak(self) -> SweepPoint:
        """The sweep point with the most steps/s."""
        return max(self.sweep, key=lambda p: p.steps_per_s)

    def summary(self) -> str:
        """One line: the rollout program's compile time (trace + lower + compile), the peak
        steps/s with its batch size and path, and the bytes of one env's state."""
        best = self.peak
        return (
            f"{self.env_id}: compile {self.stages['rollout'].total_s:.2f} s, peak {_scientific(best.steps_per_s)} "
            f"steps/s at {best.num_envs:,} envs ({best.path}), {self.state_bytes} B/env"
        )

    def to_dict(self) -> dict:
        return {
            "env_id": self.env_id,
            "device": self.device,
            "jax_version": self.jax_version,
            "summary": self.summary(),
            "state_bytes_per_env": self.state_bytes,
            "obs_bytes_per_env": self.obs_bytes,
            "stages": {
                name: {**s.to_dict(), **({"num_envs": self.rollout_num_envs} if name == "rollout" else {})}
                for name, s in self.stages.items()
            },
            "sweep": [p.to_dict() for p in self.sweep],
            "layers": [layer.to_dict() for layer in self.layers],
            **({"ops": {"num_envs": self.rollout_num_envs, "all_ops_s": self.ops_s,
                        "costliest": [o.to_dict() for o in self.ops]}} if self.ops else {}),
            "units": {
                "*_s": "seconds", "*_bytes, *_bytes_per_env": "bytes", "steps_per_s": "environment steps per second",
                "memory": "XLA's compiled memory analysis of the sweep program (planned buffers, not measured)",
            },
        }

    def save_json(self, path: str | os.PathLike) -> Path:
        """Write `to_dict` as JSON to ``path``; returns the path."""
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path

    def plot(self, path: str | os.PathLike) -> Path:
        """A PNG: steps/s against ``num_envs`` per path, XLA's planned peak memory against
        ``num_envs``, and steps/s of each wrapper layer. Needs matplotlib (the ``train`` extra)."""
        require("matplotlib", extra="train", purpose="the profile plot")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        panels = 3 if self.layers else 2
        fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4))
        for path_name, marker in zip(PATHS, "os"):
            pts = sorted((p for p in self.sweep if p.path == path_name), key=lambda p: p.num_envs)
            if pts:
                axes[0].plot([p.num_envs for p in pts], [p.steps_per_s for p in pts], marker=marker, label=path_name)
                mem = [(p.num_envs, p.memory["peak_bytes"]) for p in pts if p.memory]
                if mem:
                    axes[1].plot(*zip(*mem), marker=marker, label=f"{path_name} (XLA plan)")
        n = sorted({p.num_envs for p in self.sweep})
        axes[1].plot(n, [self.state_bytes * k for k in n], "k--", label=f"state only ({self.state_bytes} B/env)")
        for ax, ylabel in ((axes[0], "env steps / s"), (axes[1], "peak memory of the program (bytes)")):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("num_envs")
            ax.set_ylabel(ylabel)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        axes[0].set_title(f"{self.env_id} on {self.device}")
        axes[1].set_title("memory")
        if self.layers:
            ax = axes[2]
            names = [layer.name for layer in self.layers]
            ax.bar(range(len(names)), [layer.steps_per_s for layer in self.layers], color="tab:blue")
            for i, layer in enumerate(self.layers):
                ax.annotate(f"{layer.state_bytes} B\nstep {layer.step_stages.total_s:.2f} s", (i, layer.steps_per_s),
                            ha="center", va="bottom", fontsize=8)
            ax.set_xticks(range(len(names)), names, rotation=20)
            ax.set_ylabel(f"env steps / s (vmap, {self.layers[0].num_envs:,} envs)")
            ax.set_title("each wrapper added (state bytes, step compile)")
            ax.margins(y=0.25)
        fig.tight_layout()
        path = Path(path)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path


def _time_runs(compiled, seed: int, repeats: int) -> tuple[float, ...]:
    keys = jax.random.split(jax.random.key(seed), repeats + 1)
    jax.block_until_ready(compiled(keys[0]))  # warm-up run (allocations), not timed
    times = []
    for k in keys[1:]:
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(k))
        times.append(time.perf_counter() - t0)
    return tuple(times)


LAYER_REPEATS = 5  # timed rounds of the layers at least (each round times every layer once, in turn)
LAYER_MIN_RUN_S = 0.05  # the least seconds a timed run of the fastest layer lasts (calls repeated to reach it)
LAYER_MAX_CALLS = 64


def layer_programs(env: Environment, num_envs: int, num_steps: int, params: Any = None) -> list[tuple[str, Environment, Callable]]:
    """``[(name, layer env, program)]`` for each layer of `wrapper_layers`: the random-policy
    program of `jaxenvs.rollout.benchmark_program` (``run(key) -> total reward``), every layer at
    the same ``num_envs`` and ``num_steps``, so their times compare step for step."""
    return [(name, e, benchmark_program(e, num_envs, num_steps, params)) for name, e in wrapper_layers(env)]


def _time_interleaved(compiled: Sequence[Callable], seed: int, rounds: int,
                      min_run_s: float = LAYER_MIN_RUN_S) -> tuple[int, list[tuple[float, ...]]]:
    """``(calls, [seconds per call of each program, one per round])``: each program run once
    untimed (warm), then ``rounds`` rounds that time every program in turn (the first one
    rotating), each timed run ``calls`` consecutive calls, the same number for every program,
    enough for the fastest to last ``min_run_s``: a slow moment of a loaded machine falls on one
    round of every program alike, not on one program's every run."""
    keys = jax.random.split(jax.random.key(seed), rounds + 1)
    warm = []
    for program in compiled:
        t0 = time.perf_counter()
        jax.block_until_ready(program(keys[0]))
        warm.append(time.perf_counter() - t0)
    calls = int(min(LAYER_MAX_CALLS, max(1, math.ceil(min_run_s / max(min(warm), 1e-9)))))
    times: list[list[float]] = [[] for _ in compiled]
    for r in range(rounds):
        for j in range(len(compiled)):
            i = (r + j) % len(compiled)
            t0 = time.perf_counter()
            for _ in range(calls):
                out = compiled[i](keys[r + 1])
            jax.block_until_ready(out)
            times[i].append((time.perf_counter() - t0) / calls)
    return calls, [tuple(t) for t in times]


def _check_counts(name: str, values: Sequence[int]) -> tuple[int, ...]:
    values = tuple(values)
    if not values or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in values):
        raise ValueError(f"{name} must be a non-empty sequence of ints >= 1, got {values!r}")
    return tuple(sorted(set(values)))


def profile(
    env_or_id: Environment | str,
    num_envs: Sequence[int] = DEFAULT_NUM_ENVS,
    num_steps: int | None = None,
    repeats: int = 3,
    layers: bool = True,
    layer_num_envs: int | None = None,
    params: Any = None,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    ops: int = 0,
    **make_kwargs: Any,
) -> ProfileReport:
    """Profile an environment (see the module docstring for what each figure means).

    ``env_or_id``: an `jaxenvs.Environment` or an id for `jaxenvs.make` (with
    ``make_kwargs``; ``"module:ns/Name-v0"`` imports ``module`` first). ``num_envs``: the batch
    sizes of the sweep (default 1, 4, ..., 65,536). ``num_steps``: steps per timed run (default
    `auto_num_steps` of each batch size). ``repeats``: timed runs per point, the median
    counts. ``layers``: also profile each wrapper layer, at ``layer_num_envs`` envs (default: the
    sweep's largest size up to 1,024). ``progress``: called with a line of text as each
    measurement ends (e.g. ``print``). ``ops``: also record the sweep program's ``ops`` costliest
    operations (`op_costs`; 0: none).
    """
    if isinstance(env_or_id, str):
        env = jaxenvs.make(env_or_id, **make_kwargs)
    elif isinstance(env_or_id, Environment):
        if make_kwargs:
            raise TypeError(f"keyword arguments {sorted(make_kwargs)} are for make(id); pass an id, not an env")
        env = env_or_id
    else:
        raise TypeError(f"profile needs an Environment or an environment id, got {type(env_or_id).__name__}")
    sizes = _check_counts("num_envs", num_envs)
    if num_steps is not None:
        _check_counts("num_steps", [num_steps])
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    if not isinstance(ops, int) or isinstance(ops, bool) or ops < 0:
        raise ValueError(f"ops must be an int >= 0, got {ops!r}")
    if layer_num_envs is None:
        layer_num_envs = max([n for n in sizes if n <= 1024] or [min(sizes)])
    _check_counts("layer_num_envs", [layer_num_envs])
    params = check_params(env, params)
    say = progress or (lambda line: None)
    env_id = env.spec.id if getattr(env, "spec", None) is not None else type(env.unwrapped).__name__
    steps_of = (lambda n: num_steps) if num_steps is not None else auto_num_steps

    key = jax.random.key(seed)
    with _no_persistent_cache():
        jax.jit(lambda x: x + 1).lower(jnp.zeros(())).compile()  # the backend's one-time start, not counted
        obs_shape, state_shape = jax.eval_shape(lambda k: env.reset(k, params), key)
        action_shape = jax.eval_shape(lambda k: env.action_space(params).sample(
            k, batch_shape=(env.num_agents,) if env.multi_agent else ()), key)
        stages = {}
        _, stages["reset"] = compile_stages(lambda k: env.reset(k, params), key)
        _, stages["step"] = compile_stages(lambda k, s, a: env.step(k, s, a, params), key, state_shape, action_shape)
        say(f"reset: {_stage_text(stages['reset'])}; step: {_stage_text(stages['step'])}")

        sweep, compiled_of = [], {}
        for n in sizes:
            for path in PATHS:
                t = steps_of(n)
                run = benchmark_program(env, n, t, params, batched_path=path == "VectorEnv")
                compiled, st = compile_stages(run, key)
                compiled_of[path, n] = compiled
                point = SweepPoint(path, n, t, _time_runs(compiled, seed, repeats), st, memory_bytes(compiled))
                sweep.append(point)
                mem = f", peak memory {point.memory['peak_bytes']:,} B" if point.memory else ""
                say(f"{path:>9} {n:>7,} envs x {t} steps: {point.steps_per_s:.3g} steps/s, compile {st.total_s:.2f} s{mem}")
        rollout_point = max((p for p in sweep if p.path == "vmap"), key=lambda p: p.num_envs)
        stages["rollout"] = rollout_point.stages
        top_ops, ops_s = (), 0.0
        if ops:
            program = compiled_of["vmap", rollout_point.num_envs]
            every_op = op_costs(program, lambda: program(key))
            top_ops = tuple(every_op[:ops])
            ops_s = sum(o.seconds for o in every_op)
            say(f"the {len(top_ops)} costliest operations of one vmap run at {rollout_point.num_envs:,} envs "
                f"({rollout_point.num_steps} steps; shares of all {len(every_op)} operations' time):\n"
                f"{ops_table(every_op, top=ops)}")

        layer_results = []
        if layers:
            t = steps_of(layer_num_envs)
            programs = layer_programs(env, layer_num_envs, t, params)
            compiled, step_stages, state_b = [], [], []
            for name, layer_env, program in programs:  # every program compiled before any is timed
                _, st = compile_stages(lambda k, s, a, e=layer_env: e.step(k, s, a, params), key,
                                       jax.eval_shape(lambda k, e=layer_env: e.reset(k, params)[1], key), action_shape)
                step_stages.append(st)
                compiled.append(jax.jit(program).lower(key).compile())
                state_b.append(tree_bytes(jax.eval_shape(lambda k, e=layer_env: e.reset(k, params)[1], key)))
            calls, times = _time_interleaved(compiled, seed, max(repeats, LAYER_REPEATS))
            for (name, _, _), st, b, run_s in zip(programs, step_stages, state_b, times):
                layer = Layer(name, b, st, layer_num_envs, t, run_s, calls)
                layer_results.append(layer)
                say(f"layer {name}: {b} B/env, step compile {st.total_s:.2f} s, {layer.steps_per_s:.3g} steps/s "
                    f"({layer_num_envs:,} envs x {t} steps, {calls} call(s) a timed run, median of {len(run_s)})")

    dev = jax.devices()[0]
    return ProfileReport(
        env_id=env_id,
        device=f"{dev.platform} ({getattr(dev, 'device_kind', '')})",
        jax_version=jax.__version__,
        state_bytes=tree_bytes(state_shape),
        obs_bytes=tree_bytes(obs_shape),
        stages=stages,
        rollout_num_envs=rollout_point.num_envs,
        sweep=tuple(sweep),
        layers=tuple(layer_results),
        ops=top_ops,
        ops_s=ops_s,
    )


def _stage_text(s: Stages) -> str:
    return f"trace {s.trace_s:.3f} s, lower {s.lower_s:.3f} s, compile {s.compile_s:.3f} s"
