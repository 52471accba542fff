"""The backend the library's programs are built for, and what in a compiled program makes an
accelerator wait on its host.

Some of the library's speed tricks pay on a CPU only: `jaxenvs.prng`'s unrolled Threefry, the
trainers' radix-sort shuffle (`jaxenvs.train.permutation`), `VectorEnv`'s compacted auto-reset and
the ``lax.cond`` steps that skip work the CPU would otherwise do. On a GPU, XLA runs a
``conditional`` by copying its predicate to the host and a ``while`` loop by copying its condition
to the host after every iteration (an NVIDIA H100 and H200 ran such programs at a third to three
quarters of their speed without them; ``benchmarks/results/gpu*/``). Every such trick reads
`platform` (never ``jax.default_backend()`` itself), takes the same values either way (each is
tested both ways on the CPU), and `building_for` lets a test trace the accelerator's paths on a
CPU, where `host_round_trips` reads the compiled program (``tests/test_gpu_path.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import threading

import jax
import jax.numpy as jnp

__all__ = ["platform", "on_cpu", "building_for", "cond", "bounded_while", "HostRoundTrip", "host_round_trips"]

_LOCK = threading.Lock()
_OVERRIDE: list[str] = []


def platform() -> str:
    """The backend whose code paths the library's programs take: JAX's default backend
    (``"cpu"``, ``"gpu"``, ``"tpu"``), or the one `building_for` selects."""
    return _OVERRIDE[-1] if _OVERRIDE else jax.default_backend()


def on_cpu() -> bool:
    """Whether the programs take the CPU's code paths (`platform` is ``"cpu"``)."""
    return platform() == "cpu"


@contextlib.contextmanager
def building_for(name: str):
    """Trace programs with ``name``'s code paths (``"cpu"``, ``"gpu"``, ``"tpu"``) whatever device
    compiles and runs them. JAX's in-memory caches are cleared on entry and exit (a trace keyed by
    the function alone would otherwise be reused across the switch); what runs still runs on JAX's
    own devices (a selection of the platform already selected clears nothing). Not for threads
    that trace concurrently: the selection is process-wide."""
    if name not in ("cpu", "gpu", "tpu"):
        raise ValueError(f"building_for takes 'cpu', 'gpu' or 'tpu', got {name!r}")
    switch = name != platform()
    with _LOCK:
        _OVERRIDE.append(name)
    if switch:
        jax.clear_caches()
    try:
        yield
    finally:
        with _LOCK:
            _OVERRIDE.pop()
        if switch:
            jax.clear_caches()


def _select(pred, new, old):
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), new, old)


def cond(pred, true_fn, false_fn, *operands):
    """``jax.lax.cond(pred, true_fn, false_fn, *operands)``, the same values on every backend: on a
    CPU the branch ``pred`` picks runs alone; elsewhere both run and a select keeps one (a GPU
    would copy ``pred`` to its host to branch). For a branch that saves work on a CPU only."""
    if on_cpu():
        return jax.lax.cond(pred, true_fn, false_fn, *operands)
    return _select(pred, true_fn(*operands), false_fn(*operands))


def bounded_while(cond_fn, body_fn, init, max_trips: int):
    """``jax.lax.while_loop(cond_fn, body_fn, init)`` for a loop known to stop within ``max_trips``
    iterations (``cond_fn`` false by then: the caller's promise), the same values on every backend:
    on a CPU the loop stops as soon as ``cond_fn`` is false; elsewhere it runs ``max_trips``
    iterations, each after the stop leaving the carry as it was (a GPU would copy the condition to
    its host after every iteration of a loop whose trip count depends on data)."""
    if on_cpu():
        return jax.lax.while_loop(cond_fn, body_fn, init)

    def counted(_, carry):
        return _select(cond_fn(carry), body_fn(carry), carry)

    return jax.lax.fori_loop(0, int(max_trips), counted, init)


@dataclasses.dataclass(frozen=True)
class HostRoundTrip:
    """One op of a compiled program that makes the device wait on its host.

    ``kind``: ``"while"`` (a loop whose trip count XLA could not prove, so its condition is read
    back after every iteration on a GPU), ``"conditional"`` (a branch on a value computed in the
    program: its predicate or index is read back on a GPU), ``"callback"`` (a custom call into
    Python) or ``"transfer"`` (send / recv / infeed / outfeed); ``op``: the HLO instruction's name;
    ``source``: the JAX operation it came from (HLO metadata ``op_name``; empty when absent)."""

    kind: str
    op: str
    source: str

    def __str__(self) -> str:
        return f"{self.kind} {self.op}" + (f" ({self.source})" if self.source else "")


_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*.*?\s([a-z][\w\-]*)\(")
_TRANSFERS = ("send", "recv", "send-done", "recv-done", "infeed", "outfeed")


def _field(line: str, name: str) -> str:
    m = re.search(rf'{name}="([^"]*)"', line)
    return m.group(1) if m else ""


def _known_trip_count(line: str) -> bool:
    m = re.search(r"backend_config=(\{.*\})", line)
    if not m:
        return False
    text = m.group(1)
    try:
        config = json.loads(text)
    except ValueError:  # other attributes may follow the JSON on the line
        return '"known_trip_count"' in text
    return "known_trip_count" in config


def host_round_trips(compiled) -> list[HostRoundTrip]:
    """The ops of an XLA-optimised program that would make a GPU wait on its host: while loops
    without a ``known_trip_count`` (XLA's loop analysis annotates every loop whose trip count is a
    constant, ``lax.scan`` and ``lax.fori_loop`` with static bounds included), ``conditional`` ops
    (one left after optimisation branches on a computed value), custom calls whose target is a
    Python callback, and host transfers. ``compiled``: a ``jax.stages.Compiled`` (its
    ``as_text()``) or that text. The analysis reads the program XLA:CPU optimised; XLA:GPU's
    optimisation keeps the same loops and branches (neither backend turns a data-dependent loop
    into a counted one)."""
    text = compiled if isinstance(compiled, str) else compiled.as_text()
    found = []
    for line in text.splitlines():
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        name, opcode = m.groups()
        source = _field(line, "op_name")
        if opcode == "while" and not _known_trip_count(line):
            found.append(HostRoundTrip("while", name, source))
        elif opcode == "conditional":
            found.append(HostRoundTrip("conditional", name, source))
        elif opcode == "custom-call" and "callback" in _field(line, "custom_call_target").lower():
            found.append(HostRoundTrip("callback", name, source))
        elif opcode in _TRANSFERS:
            found.append(HostRoundTrip("transfer", name, source))
    return found
