"""Where a PPO run's arrays live when it spans several devices or processes.

A seed-batched runner state (`train.base.RunnerState`) on a mesh (`jaxenvs.sharding.env_mesh`)
has its environment states and observations split over the mesh along the env axis (axis 1;
axis 0 is the seed) and everything else (network params, optimizer state, keys, the update
counter) replicated on every device. `runner_shardings` spells that layout out, so the
compiled programs of ``jaxenvs-train`` take and return it explicitly and their metrics come
back replicated (readable on every process without communication).

In a multi-process run (``jaxenvs-train --distributed``) every process runs the same
program on its own devices; `jaxenvs.sharding.to_host` gathers a runner for a checkpoint
(a collective: every process calls it), and only process 0 writes files.
"""

from __future__ import annotations

import hashlib
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxenvs.core import is_prng_key
from jaxenvs.sharding import ENV_AXIS, env_mesh

__all__ = ["runner_shardings", "put_global", "place_runner", "replicated", "params_digest", "is_main_process",
           "choose_mesh", "from_process_0"]


def replicated(mesh: Mesh) -> NamedSharding:
    """A whole copy on every device of ``mesh``."""
    return NamedSharding(mesh, PartitionSpec())


def runner_shardings(runner: Any, mesh: Mesh) -> Any:
    """For a seed-batched runner (or its ``jax.eval_shape``), a matching tree of shardings:
    ``env_state`` and ``obs`` split along axis 1 (envs), every other leaf replicated."""
    envs = NamedSharding(mesh, PartitionSpec(None, ENV_AXIS))
    rep = replicated(mesh)
    shard = jax.tree.map(lambda _: rep, runner)
    return shard.replace(
        env_state=jax.tree.map(lambda _: envs, runner.env_state), obs=jax.tree.map(lambda _: envs, runner.obs)
    )


def put_global(tree: Any, shardings: Any) -> Any:
    """``tree`` (host or device arrays holding the same values on every process) laid out as
    ``shardings`` says (one sharding, or a matching tree of them); PRNG keys stay keys."""

    def put(x, sharding):
        if is_prng_key(x):
            return jax.random.wrap_key_data(put(jax.random.key_data(x), sharding), impl=jax.random.key_impl(x))
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return jax.device_put(x, sharding)  # already spans processes: reshard
        host = np.asarray(x)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    if isinstance(shardings, jax.sharding.Sharding):
        return jax.tree.map(lambda x: put(x, shardings), tree)
    return jax.tree.map(put, tree, shardings)


def place_runner(runner: Any, mesh: Mesh | None) -> Any:
    """A seed-batched runner laid out on ``mesh`` as `runner_shardings` says (e.g. one
    loaded from a checkpoint); unchanged when ``mesh`` is None."""
    return runner if mesh is None else put_global(runner, runner_shardings(runner, mesh))


def params_digest(params: Any) -> str:
    """SHA-256 (first 16 hex digits) of this process's own copy of the (replicated) parameters:
    equal digests on every process show they hold one set of parameters."""
    h = hashlib.sha256()
    for x in jax.tree.leaves(params):
        local = x.addressable_shards[0].data if isinstance(x, jax.Array) else x
        h.update(np.ascontiguousarray(np.asarray(local)).tobytes())
    return h.hexdigest()[:16]


def is_main_process() -> bool:
    """True on process 0 (the one that prints and writes files), and in single-process runs."""
    return jax.process_index() == 0


def choose_mesh(num_envs: int, devices: int | None = None, distributed: bool = False):
    """The env mesh ``jaxenvs-train`` trains over (None: one device, no mesh).

    Default: every visible device, or the largest count of them that divides ``num_envs``.
    ``devices`` asks for that many (an error when it does not divide ``num_envs``); a
    ``distributed`` run uses every device of every process.
    """
    visible = jax.device_count()
    if devices is not None and not 1 <= devices <= visible:
        raise ValueError(f"--devices {devices}: {visible} device(s) visible ({jax.devices()[0].platform})")
    if distributed and devices not in (None, visible):
        raise ValueError(f"--distributed trains over all {visible} devices of all processes; leave out --devices")
    n = visible if devices is None else devices
    if num_envs % n:
        if devices is not None or distributed:
            raise ValueError(f"--num-envs {num_envs} does not split evenly over {n} devices; use a multiple of {n}")
        n = max(d for d in range(1, n + 1) if num_envs % d == 0)
    return env_mesh(n) if n > 1 or distributed else None


def from_process_0(value: int) -> int:
    """Process 0's ``value`` (an int32) on every process: decisions that start collectives, and
    names every process must agree on. A single-process run returns ``value`` itself."""
    if jax.process_count() == 1:
        return value
    from jax.experimental import multihost_utils

    return int(multihost_utils.broadcast_one_to_all(np.int32(value)))
