"""Checkpoints of PPO runs: one msgpack file (``flax.serialization``) per run directory.

The runner state is stored as a flat mapping from each leaf's pytree path (``jax.tree_util.keystr``)
to its array, so any pytree (flax, jaxenvs.struct or plain dataclasses) round-trips.

``checkpoint.msgpack`` holds the whole :class:`~train.ppo.RunnerState` of every seed (network
params, Adam state, environment states and observations, PRNG keys, update counter), the config
and the number of updates and env steps done, so a resumed run continues exactly where the
saved one stopped. PRNG keys are stored as their raw ``key_data`` (uint32) and re-wrapped on load.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import serialization

from jaxenvs.parallel import to_host
from .configs import PPOConfig, config_from_dict, load_config_file
from .ppo import Trainer
from .trainers import make_trainer

__all__ = ["CHECKPOINT", "CONFIG", "save_checkpoint", "load_checkpoint", "load_run", "runner_template"]

CHECKPOINT = "checkpoint.msgpack"
CONFIG = "config.json"
FORMAT_VERSION = 2


def _is_key(x) -> bool:
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _flat(tree: Any) -> dict[str, np.ndarray]:
    """``{path: array}`` of every leaf (PRNG keys as their ``key_data``)."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {
        jax.tree_util.keystr(p): np.asarray(jax.random.key_data(x) if _is_key(x) else x) for p, x in leaves
    }


def _unflat(template: Any, flat: dict, path: Path) -> Any:
    """The pytree of ``template`` (``ShapeDtypeStruct`` leaves) filled from :func:`_flat`'s mapping."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(template)
    out = []
    for p, t in leaves:
        k = jax.tree_util.keystr(p)
        if k not in flat:
            raise ValueError(f"{path}: the checkpoint has no entry {k}; it was written for another config")
        x = np.asarray(flat[k])
        if _is_key(t):
            want = tuple(t.shape) + tuple(jax.eval_shape(jax.random.key_data, t).shape[len(t.shape):])
        else:
            want = tuple(t.shape)
        if x.shape != want:
            raise ValueError(
                f"{path}: entry {k} has shape {x.shape}, the config expects {want}; it was written for another config"
            )
        out.append(jax.random.wrap_key_data(jax.numpy.asarray(x)) if _is_key(t) else jax.numpy.asarray(x, t.dtype))
    return jax.tree_util.tree_unflatten(treedef, out)


def runner_template(trainer: Trainer) -> Any:
    """Shapes and dtypes (``jax.ShapeDtypeStruct``) of the seed-batched runner state."""
    keys = jax.random.split(jax.random.key(0), trainer.config.num_seeds)
    return jax.eval_shape(jax.vmap(trainer.init, in_axes=(0, None)), keys, trainer.config.hparams())


def save_checkpoint(path: str | os.PathLike, config: PPOConfig, runner: Any) -> Path:
    """Write ``runner`` (seed-batched) and ``config`` to ``path`` (atomically: write, then rename).

    A runner split over several processes' devices is gathered first, so in a multi-process run
    every process must call this (a collective); only process 0 writes the file.
    """
    host = to_host(runner)
    update = np.asarray(host.update).reshape(-1)
    payload = {
        "format_version": FORMAT_VERSION,
        "config": json.dumps(config.to_dict()),
        "update": int(update[0]),
        "env_steps": int(update[0]) * config.steps_per_update,
        "runner": _flat(host),
    }
    path = Path(path)
    if jax.process_index() != 0:
        return path
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(serialization.msgpack_serialize(payload))
    tmp.replace(path)
    return path


def load_checkpoint(path: str | os.PathLike, trainer: Trainer | None = None) -> tuple[Trainer, Any, dict]:
    """``(trainer, runner, meta)`` from a checkpoint file; ``meta`` has ``update``, ``env_steps``
    and ``config`` (a dict). ``trainer`` is rebuilt from the stored config unless given."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {str(path)!r}")
    payload = serialization.msgpack_restore(path.read_bytes())
    if payload.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: checkpoint format {payload.get('format_version')!r}, expected {FORMAT_VERSION}")
    config = config_from_dict(json.loads(payload["config"]))
    trainer = make_trainer(config) if trainer is None else trainer
    template = runner_template(trainer)
    runner = _unflat(template, payload["runner"], path)
    meta = {"update": payload["update"], "env_steps": payload["env_steps"], "config": config.to_dict()}
    return trainer, runner, meta


def load_run(run_dir: str | os.PathLike, mesh: Any = None, **overrides) -> tuple[Trainer, Any, dict]:
    """Load a run directory's checkpoint; ``overrides`` change config fields (e.g. a larger
    ``total_timesteps`` to train on) as long as the stored state still fits them. With a ``mesh``
    the trainer trains over it (any device count: the checkpoint does not depend on it); place
    the runner with :func:`train.distributed.place_runner`."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory {str(run_dir)!r} does not exist")
    config = config_from_dict({**load_config_file(str(run_dir / CONFIG)), **overrides})
    return load_checkpoint(run_dir / CHECKPOINT, make_trainer(config, mesh=mesh))
