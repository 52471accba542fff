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


# ---- the adapters' tests (Gymnasium, SB3, PettingZoo) ------------------------------------------


def registry_params(multi_agent: bool) -> list:
    """Built-in registered ids (no namespace) of single-agent (or multi-agent) envs; an id that
    cannot be made is an error. Namespaced ids are left out: gymnax's register on first use, so
    whether they were there depended on which tests this process ran before (and gymnax's
    MNISTBandit cannot be built offline)."""
    import jaxenvs

    return [i for i in sorted(jaxenvs.registry)
            if "/" not in i and jaxenvs.make(i, autoreset=False).multi_agent == multi_agent]


def sample_actions(space, seed: int, n: int) -> list:
    """``n`` samples of the Gymnasium ``space`` seeded with ``seed``."""
    space.seed(seed)
    return [space.sample() for _ in range(n)]


class GridWorldModel:
    """GridWorld's documented dynamics on the host, for checking adapters' autoreset bookkeeping:
    move (clipped), terminated on the target, truncated when the episode's step count reaches
    the limit (both may hold at once, as jaxenvs' TimeLimit does)."""

    def __init__(self, size: int, max_steps: int, num_envs: int):
        import numpy as np

        self.size, self.max_steps = size, max_steps
        self.t = np.zeros(num_envs, int)

    def predict(self, obs_agent, obs_target, action, i):
        import numpy as np

        from jaxenvs.envs.grid_world import ACTION_TO_DIRECTION

        agent = np.clip(obs_agent + ACTION_TO_DIRECTION[action], 0, self.size - 1)
        terminated = bool(np.all(agent == obs_target))
        truncated = bool(self.t[i] + 1 >= self.max_steps)
        return agent, terminated, truncated


def box_leaves(space):
    """The Box leaves of a Gymnasium space (inside Dict and Tuple spaces)."""
    import gymnasium

    if isinstance(space, gymnasium.spaces.Dict):
        return [b for s in space.spaces.values() for b in box_leaves(s)]
    if isinstance(space, gymnasium.spaces.Tuple):
        return [b for s in space.spaces for b in box_leaves(s)]
    return [space] if isinstance(space, gymnasium.spaces.Box) else []


def run_checker_recording(check, *args, **kwargs) -> set:
    """Run a checker with warnings recorded; returns the set of messages (ANSI colours removed)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check(*args, **kwargs)
    return {str(w.message).replace("\x1b[33mWARN: ", "").replace("\x1b[0m", "") for w in caught}


def assert_only_advice(messages: set, advice: set):
    """Every message is one of the expected ``advice`` (by its start), and every advice was given."""
    unexpected = {m for m in messages if not any(m.startswith(a) for a in advice)}
    assert not unexpected, unexpected
    missing = {a for a in advice if not any(m.startswith(a) for m in messages)}
    assert not missing, missing


def enable_x64(on: bool = True):
    """A context with 64-bit types on (or off): ``jax.enable_x64`` where JAX has it, else (the floor,
    jax 0.4.36) ``jax.experimental.enable_x64``."""
    import jax

    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(on)
    from jax.experimental import disable_x64, enable_x64 as old

    return old() if on else disable_x64()


def benchmark(name: str):
    """The module of ``benchmarks/<name>.py``, imported once per process (under its own name in
    ``sys.modules``, so tests that share it share its compiled programs)."""
    import importlib.util
    import os
    import sys

    if name not in sys.modules:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        spec = importlib.util.spec_from_file_location(name, os.path.join(root, "benchmarks", f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
