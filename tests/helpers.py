"""Helpers shared by the test modules: ``from helpers import ...`` (tests/conftest.py holds only
pytest's hooks and fixtures)."""

import pytest


def assert_trees_equal(a, b, dtypes: bool = False):
    """``a`` and ``b`` have one tree structure and exactly equal leaves (of equal dtypes too when
    ``dtypes``)."""
    import jax
    import numpy as np

    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        if dtypes:
            assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


def subprocess_env(**overrides) -> dict:
    """The environment of a test's Python subprocess: this one's, with JAX's persistent compilation
    cache pointed at the session's shared folder (see tests/conftest.py), so that programs another
    test or subprocess compiled are read back instead of compiled again; ``overrides`` on top."""
    import os

    cache = os.environ["JAXENVS_TEST_CACHE_DIR"]
    return {**os.environ, "JAX_COMPILATION_CACHE_DIR": cache, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0.2",
            **overrides}


def require(module: str):
    """Import the optional dependency ``module`` for a test module: the module's tests are skipped
    where it is not installed (e.g. stable_baselines3, which needs torch, outside the ``sb3``
    extra), but under ``CI=true`` a missing module is an error, so a skip never hides it in CI."""
    import importlib
    import os

    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"{module} is not installed (pip install -e '.[all]')")


CHEAP_XLA = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
"""XLA:CPU's cheap backend settings: tiny test programs compile in about half the time."""


def tiny_run_dir(parent, name: str, config):
    """A run directory ``parent/name`` (config.json and checkpoint.msgpack, one seed) of ``config``
    trained in one jitted call compiled with `CHEAP_XLA`, as ``jaxenvs-train`` would write it."""
    import json

    import jax

    from jaxenvs.train.checkpoint import CHECKPOINT, CONFIG, save_checkpoint
    from jaxenvs.train.configs import RunSettings, run_record
    from jaxenvs.train.trainers import make_trainer

    trainer = make_trainer(config)
    train = jax.jit(trainer.train).lower(jax.random.key(0)).compile(compiler_options=CHEAP_XLA)
    runner = jax.tree.map(lambda x: x[None], train(jax.random.key(0))[0])  # the run's seed axis
    path = parent / name
    path.mkdir()
    (path / CONFIG).write_text(json.dumps(run_record(config, RunSettings())))
    save_checkpoint(path / CHECKPOINT, config, runner, RunSettings())
    return path
