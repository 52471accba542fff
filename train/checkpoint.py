"""Checkpoints of training runs (every algorithm): one msgpack file (``flax.serialization``) per run directory.

The runner state is stored as a flat mapping from each leaf's pytree path (``jax.tree_util.keystr``)
to its array, so any pytree (flax, jaxenvs.struct or plain dataclasses) round-trips.

``checkpoint.msgpack`` holds the whole runner state (`train.base.RunnerState` or an algorithm's own) of every seed (network
params, Adam state, environment states and observations, PRNG keys, update counter), the config
with its run settings (as ``config.json`` holds them: `train.configs.run_record`) and the
number of updates and env steps done, so a resumed run continues exactly where the
saved one stopped. PRNG keys are stored as their raw ``key_data`` (uint32) and re-wrapped on load.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import json
import os
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import serialization

from jaxenvs.core import is_prng_key
from jaxenvs.prng import key_on_host
from jaxenvs.sharding import to_host
from .base import Trainer
from .configs import (
    RUN_FIELDS, RUN_KEY, RunSettings, TrainConfig, config_from_dict, load_config_file, run_record,
    run_settings_from_dict,
)
from .trainers import make_trainer

__all__ = [
    "CHECKPOINT", "CONFIG", "OUTPUTS", "CheckpointError", "save_checkpoint", "load_checkpoint", "load_run", "runner_template",
    "atomic_write", "write_text_atomic", "check_run_dir",
]

CHECKPOINT = "checkpoint.msgpack"
CONFIG = "config.json"
OUTPUTS = "outputs.json"  # written last by a run's end: {"update": N, "outputs": [the files written after update N]}
FORMAT_VERSION = 2
# Config fields and run settings a resumed run may change: the checkpoint still fits after either.
RESUMABLE_FIELDS = ("total_timesteps", "num_chunks")


class CheckpointError(ValueError):
    """A checkpoint or run directory that cannot be used: the message names the path and what is wrong."""


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike):
    """``with atomic_write(path) as tmp: write tmp``: the file appears at ``path`` whole (an
    ``os.replace`` of a temporary file beside it) or not at all, never half-written."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    with atomic_write(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def check_run_dir(run_dir: str | os.PathLike) -> Path:
    """``run_dir`` as a Path when it is a run directory (holds ``config.json`` and
    ``checkpoint.msgpack``); otherwise a `CheckpointError` saying what is missing."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise CheckpointError(f"run directory {str(run_dir)!r} does not exist")
    if not run_dir.is_dir():
        raise CheckpointError(f"{str(run_dir)!r} is a file, not a run directory written by jaxenvs-train")
    missing = [name for name in (CONFIG, CHECKPOINT) if not (run_dir / name).is_file()]
    if missing:
        raise CheckpointError(
            f"{str(run_dir)!r} is not a run directory written by jaxenvs-train: it has no {' and no '.join(missing)}"
        )
    return run_dir


def _flat(tree: Any) -> dict[str, np.ndarray]:
    """``{path: array}`` of every leaf (PRNG keys as their ``key_data``)."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {
        jax.tree_util.keystr(p): np.asarray(jax.random.key_data(x) if is_prng_key(x) else x) for p, x in leaves
    }


def _unflat(template: Any, flat: dict, path: Path) -> Any:
    """The pytree of ``template`` (``ShapeDtypeStruct`` leaves) filled from `_flat`'s mapping."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(template)
    out = []
    for p, t in leaves:
        k = jax.tree_util.keystr(p)
        if k not in flat:
            raise CheckpointError(f"{path}: the checkpoint has no entry {k}; it was written for another config")
        x = np.asarray(flat[k])
        if is_prng_key(t):
            want = tuple(t.shape) + tuple(jax.eval_shape(jax.random.key_data, t).shape[len(t.shape):])
        else:
            want = tuple(t.shape)
        if x.shape != want:
            raise CheckpointError(
                f"{path}: entry {k} has shape {x.shape}, the config expects {want}; it was written for another config"
            )
        out.append(jax.random.wrap_key_data(jax.numpy.asarray(x)) if is_prng_key(t) else jax.numpy.asarray(x, t.dtype))
    return jax.tree_util.tree_unflatten(treedef, out)


def runner_template(trainer: Trainer, num_seeds: int) -> Any:
    """Shapes and dtypes (``jax.ShapeDtypeStruct``) of the runner state of ``num_seeds`` seeds."""
    def init_seeds(key, hp):  # the split inside: shapes only, nothing compiled or run
        return jax.vmap(trainer.init, in_axes=(0, None))(jax.random.split(key, num_seeds), hp)

    return jax.eval_shape(init_seeds, key_on_host(0), trainer.config.hparams())


def save_checkpoint(path: str | os.PathLike, config: TrainConfig, runner: Any, settings: RunSettings) -> Path:
    """Write ``runner`` (seed-batched: ``settings.num_seeds`` seeds), ``config`` and the run's
    ``settings`` to ``path`` (atomically: write, then rename).

    A runner split over several processes' devices is gathered first, so in a multi-process run
    every process must call this (a collective); only process 0 writes the file.
    """
    host = to_host(runner)
    update = np.asarray(host.update).reshape(-1)
    payload = {
        "format_version": FORMAT_VERSION,
        "jax": jax_settings(),
        "config": json.dumps(run_record(config, settings)),
        "update": int(update[0]),
        "env_steps": int(update[0]) * config.steps_per_update,
        "runner": _flat(host),
    }
    path = Path(path)
    if jax.process_index() != 0:
        return path
    with atomic_write(path) as tmp:
        tmp.write_bytes(serialization.msgpack_serialize(payload))
    return path


def jax_settings() -> dict:
    """The JAX settings a run's numbers depend on: ``x64`` (``JAX_ENABLE_X64``) and ``prng_impl``
    (``jax_default_prng_impl``), recorded in every checkpoint."""
    return {"x64": bool(jax.config.jax_enable_x64), "prng_impl": str(jax.config.jax_default_prng_impl)}


def check_jax_settings(path: Path, payload: dict) -> None:
    """Refuse to resume a checkpoint written under other JAX settings (`jax_settings`): the same
    keys draw other numbers, so the resumed run would silently be another run."""
    stored = payload.get("jax")
    if not isinstance(stored, dict):  # written before the settings were recorded
        return
    now = jax_settings()
    if stored.get("x64", now["x64"]) != now["x64"]:
        raise CheckpointError(
            f"{path}: the run was trained with JAX_ENABLE_X64={int(stored['x64'])} (jax_enable_x64 {stored['x64']}), "
            f"this process has {now['x64']}; set JAX_ENABLE_X64={int(stored['x64'])} to resume it"
        )
    if stored.get("prng_impl", now["prng_impl"]) != now["prng_impl"]:
        raise CheckpointError(
            f"{path}: the run was trained with the PRNG implementation {stored['prng_impl']!r} "
            f"(jax_default_prng_impl), this process uses {now['prng_impl']!r}; set "
            f"JAX_DEFAULT_PRNG_IMPL={stored['prng_impl']} to resume it"
        )


def _read_payload(path: Path) -> dict:
    """The checkpoint's top-level mapping, or a `CheckpointError` naming ``path`` and the fault."""
    data = path.read_bytes()
    if not data:
        raise CheckpointError(f"{path}: the checkpoint file is empty (0 bytes); the run was stopped before it was written")
    try:
        payload = serialization.msgpack_restore(data)
    except Exception as e:  # msgpack's own errors ("Unpack failed: incomplete input", ...) name no file
        raise CheckpointError(
            f"{path}: not a readable checkpoint ({len(data):,} bytes; truncated or corrupt: {e})"
        ) from None
    required = {"format_version", "config", "update", "env_steps", "runner"}
    if not isinstance(payload, dict) or not required <= set(payload):
        have = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(f"{path}: not a jaxenvs checkpoint (expected entries {sorted(required)}, found {have})")
    if payload["format_version"] != FORMAT_VERSION:
        raise CheckpointError(f"{path}: checkpoint format {payload['format_version']!r}, expected {FORMAT_VERSION}")
    if not isinstance(payload["runner"], dict):
        raise CheckpointError(f"{path}: the checkpoint's runner state is not a mapping of arrays")
    return payload


def load_checkpoint(
    path: str | os.PathLike, trainer: Trainer | None = None, settings: RunSettings | None = None,
) -> tuple[Trainer, Any, dict]:
    """``(trainer, runner, meta)`` from a checkpoint file; ``meta`` has ``update``, ``env_steps``,
    ``config`` (a dict of the algorithm's config) and ``run`` (the `train.configs.RunSettings`).
    ``trainer`` and ``settings`` are the stored ones unless given (``settings.num_seeds`` must then
    be the checkpoint's). Checkpoints written before config.json had its ``"run"`` object load too."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {str(path)!r}")
    payload = _read_payload(path)
    check_jax_settings(path, payload)
    try:
        stored = json.loads(payload["config"])
        config, stored_settings = config_from_dict(stored), run_settings_from_dict(stored)
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"{path}: the checkpoint's stored config is not valid: {e}") from None
    trainer = make_trainer(config) if trainer is None else trainer
    settings = stored_settings if settings is None else settings
    template = runner_template(trainer, settings.num_seeds)
    runner = _unflat(template, payload["runner"], path)
    meta = {"update": payload["update"], "env_steps": payload["env_steps"], "config": config.to_dict(), "run": settings}
    return trainer, runner, meta


def _field_differences(stored: dict, written: dict) -> list[tuple[str, Any, Any]]:
    """``(name, stored value, written value)`` for each config field and run setting (named
    ``run.<setting>``) in which two config.json-style dicts differ, except `RESUMABLE_FIELDS`."""
    pairs = [("", stored, written), (f"{RUN_KEY}.", stored.get(RUN_KEY, {}), written.get(RUN_KEY, {}))]
    return [
        (prefix + k, a.get(k), b.get(k))
        for prefix, a, b in pairs
        for k in sorted(set(a) | set(b))
        if not (prefix == "" and k == RUN_KEY) and k not in RESUMABLE_FIELDS and a.get(k) != b.get(k)
    ]


def load_run(run_dir: str | os.PathLike, mesh: Any = None, **overrides) -> tuple[Trainer, Any, dict]:
    """Load a run directory's checkpoint; ``overrides`` change config fields or run settings (e.g.
    a larger ``total_timesteps`` to train on) as long as the stored state still fits them. With a
    ``mesh`` the trainer trains over it (any device count: the checkpoint does not depend on it);
    place the runner with `train.distributed.place_runner`. ``meta["run"]`` holds the run
    settings of config.json with the overrides applied."""
    run_dir = check_run_dir(run_dir)
    stored = load_config_file(str(run_dir / CONFIG))
    payload = _read_payload(run_dir / CHECKPOINT)
    try:
        differ = _field_differences(stored, json.loads(payload["config"]))
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"{run_dir / CHECKPOINT}: the checkpoint's stored config is not valid: {e}") from None
    if differ:
        detail = "; ".join(f"{k}: {CONFIG} has {a!r}, the checkpoint {b!r}" for k, a, b in differ)
        resumable = ", ".join(f"{RUN_KEY}.{k}" if k in RUN_FIELDS else k for k in RESUMABLE_FIELDS)
        raise CheckpointError(
            f"{run_dir / CONFIG} disagrees with {run_dir / CHECKPOINT}, which was written with another config ({detail}); "
            f"only {resumable} may differ"
        )
    run_overrides = {k: overrides.pop(k) for k in RUN_FIELDS if k in overrides}
    config = config_from_dict({**stored, **overrides})
    settings = run_settings_from_dict(stored).replace(**run_overrides)
    announce_env_module(config.env_id, str(run_dir / CONFIG))  # a module:id env's module runs its code: say which
    return load_checkpoint(run_dir / CHECKPOINT, make_trainer(config, mesh=mesh), settings)


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
