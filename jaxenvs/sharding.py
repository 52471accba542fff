"""Sharding environment batches over devices and hosts with JAX's own machinery.

The env batch axis is sharded over a one-dimensional device mesh (``jax.sharding``): arrays with
a leading ``num_envs`` axis are split evenly across devices, and ``jit`` partitions the vmapped
``reset``/``step`` (GSPMD) with no change to the environment. Per-env computations are the
same as on one device, so results are identical for the same keys (random bits too:
``jax_threefry_partitionable`` is on by default).

Across hosts, `initialize_distributed` starts ``jax.distributed`` from the usual
environment variables; afterwards ``jax.devices()`` lists every process's devices and the same
mesh spans them all.

    mesh = jaxenvs.sharding.env_mesh()            # all devices (all hosts after initialize)
    traj = jaxenvs.rollout.rollout(env, key, policy, 100, num_envs=4096, mesh=mesh)
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxenvs.spaces import is_prng_key

__all__ = ["ENV_AXIS", "env_mesh", "batch_sharding", "constrain_batch", "to_host", "initialize_distributed"]

ENV_AXIS = "envs"


def env_mesh(devices: Sequence[jax.Device] | int | None = None) -> Mesh:
    """A 1-D mesh named ``"envs"`` over ``devices`` (a list, a count of the first devices, or all)."""
    all_devices = jax.devices()
    if devices is None:
        devices = all_devices
    elif isinstance(devices, int):
        if not 1 <= devices <= len(all_devices):
            raise ValueError(
                f"asked for {devices} devices but {len(all_devices)} are visible ({all_devices[0].platform}); on a "
                "CPU, XLA_FLAGS=--xla_force_host_platform_device_count=N (set before JAX starts) gives N devices"
            )
        devices = all_devices[:devices]
    return Mesh(np.asarray(devices), (ENV_AXIS,))


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Sharding of arrays whose leading axis is the env batch."""
    return NamedSharding(mesh, PartitionSpec(ENV_AXIS))


def constrain_batch(tree: Any, mesh: Mesh | None) -> Any:
    """Inside ``jit``: ask for every leaf's leading (env) axis to be split over ``mesh``.

    ``None`` leaves ``tree`` as it is. The batch size must be a multiple of the mesh size.
    """
    if mesh is None:
        return tree
    n = mesh.devices.size

    def constrain(x):
        if x.shape[0] % n:
            raise ValueError(f"a batch of {x.shape[0]} envs does not split evenly over {n} devices")
        return jax.lax.with_sharding_constraint(x, batch_sharding(mesh))

    return jax.tree.map(constrain, tree)


def to_host(tree: Any) -> Any:
    """A numpy copy of every leaf of ``tree``, whole, on every process.

    Arrays split over several processes' devices are gathered
    (``jax.experimental.multihost_utils.process_allgather``), a collective: in a multi-process
    run every process must call this with the same tree. PRNG keys come back as their
    ``key_data`` (uint32). Everything else is copied without communication.
    """

    def one(x):
        if isinstance(x, jax.Array) and is_prng_key(x):
            x = jax.random.key_data(x)
        if isinstance(x, jax.Array) and not (x.is_fully_addressable or x.is_fully_replicated):
            from jax.experimental import multihost_utils

            return np.asarray(multihost_utils.process_allgather(x, tiled=True))
        return np.asarray(x)

    return jax.tree.map(one, tree)


def initialize_distributed(
    coordinator_address: str | None = None, num_processes: int | None = None, process_id: int | None = None
) -> None:
    """Start ``jax.distributed`` for a multi-host run.

    Arguments default to ``JAXENVS_COORDINATOR`` (``host:port``), ``JAXENVS_NUM_PROCESSES`` and
    ``JAXENVS_PROCESS_ID``; when those are unset too, ``jax.distributed.initialize()`` detects the
    cluster itself (SLURM, Open MPI, Cloud TPU pod slices) or reads JAX's own variables.
    Call it once, before anything else touches JAX's devices. On CPU, Gloo prints a connection
    banner to file descriptor 1 when the processes first talk; this function leaves the process's
    output alone (``jaxenvs-train --distributed`` filters the banner out of its own output).
    """
    coordinator_address = coordinator_address or os.environ.get("JAXENVS_COORDINATOR")
    if num_processes is None and "JAXENVS_NUM_PROCESSES" in os.environ:
        num_processes = int(os.environ["JAXENVS_NUM_PROCESSES"])
    if process_id is None and "JAXENVS_PROCESS_ID" in os.environ:
        process_id = int(os.environ["JAXENVS_PROCESS_ID"])
    if coordinator_address is not None and (num_processes is None or process_id is None):
        raise ValueError(
            f"coordinator {coordinator_address!r} given without "
            + " and ".join(n for n, v in (("num_processes (JAXENVS_NUM_PROCESSES)", num_processes),
                                         ("process_id (JAXENVS_PROCESS_ID)", process_id)) if v is None)
            + "; pass all three, or none to let jax.distributed detect the cluster"
        )
    # CPU devices of different processes talk through Gloo (GPUs and TPUs use their own links)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    kwargs = {}
    if coordinator_address is not None:
        kwargs.update(coordinator_address=coordinator_address, num_processes=num_processes, process_id=process_id)
    jax.distributed.initialize(**kwargs)
