"""Test-session setup, run before any test module imports JAX.

Every test process (xdist workers included) turns XLA:CPU's concurrency-optimized scheduler off
before JAX starts, as ``jaxenvs-train`` does (`jaxenvs.train.xla`: seed-vmapped LAPACK calls could
hang under it). The trainer does not depend on it: tests/test_train_cli.py checks seed-vmapped
training with JAX started first, in a process of its own without the flag.
"""

import os
import sys
import types

from jaxenvs.train.xla import use_safe_cpu_scheduler

use_safe_cpu_scheduler()  # before any JAX computation
import pytest  # noqa: E402

# Test modules import each other as ``tests.<module>``. Pgx's wheel (the bench extra) installs a
# top-level ``tests`` package of its own into site-packages, which would win over this folder (a
# regular package beats a namespace one): bind the name to this folder before any test imports it.
_HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(os.path.abspath(getattr(sys.modules.get("tests"), "__file__", None) or os.devnull)) != _HERE:
    _tests = types.ModuleType("tests", "jaxenvs' test suite")
    _tests.__path__ = [_HERE]
    sys.modules["tests"] = _tests


# ---- one compilation cache for the session ------------------------------------------------------
# Most of the suite's time is XLA compiling, and its subprocesses (command lines, docs pages, README
# examples, notebooks, multi-device runs) compile many of the same programs. A session gets one fresh
# cache folder (as CI's fresh venv has no cache), shared by the pytest-xdist workers (they inherit this
# process's environment), the workers' own compilations and every subprocess: jaxenvs' command lines use it through
# JAXENVS_CACHE_DIR (the user's ~/.cache is left alone), plain Python subprocesses through JAX's
# JAX_COMPILATION_CACHE_DIR, which `helpers.subprocess_env` adds. A JAXENVS_TEST_CACHE_DIR set by the
# caller is used instead, and kept (a warm cache across sessions).
if "JAXENVS_TEST_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["JAXENVS_TEST_CACHE_DIR"] = _SESSION_CACHE = tempfile.mkdtemp(prefix="jaxenvs-test-cache-")
    atexit.register(shutil.rmtree, _SESSION_CACHE, ignore_errors=True)  # made by this process: removed with it
os.environ.setdefault("JAXENVS_CACHE_DIR", os.environ["JAXENVS_TEST_CACHE_DIR"])
# ... and the test processes themselves: a program another test (or worker, or subprocess) compiled
# is read back, though each test builds its own jitted functions (JAX's in-memory cache is per
# function object; the persistent one is keyed by the program). As the command lines keep them:
# programs that took 0.2 s or more to compile.
import jax  # noqa: E402  (after the scheduler flag above)

jax.config.update("jax_compilation_cache_dir", os.environ["JAXENVS_TEST_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)


# ---- scheduling under pytest-xdist ---------------------------------------------------------------
# The README's ``pytest -n 2`` runs on two cores, where a handful of tests (subprocesses that train,
# build the docs or run notebooks) take most of the time. So that they do not end up last on one
# worker, and module-scoped fixtures (trained run directories, a benchmark run) are computed once
# rather than once per worker: ``-n`` without ``--dist`` schedules like ``--dist loadgroup``, a
# module's tests that share a module-scoped fixture form one group (one worker runs them in order),
# every other test is scheduled on its own, and the units start heaviest first (``SLOW_FIRST``,
# measured; the rest in collection order). An explicit ``--dist`` is left as given.

# nodeid prefixes, heaviest unit first (a module fixture's group counts as one unit)
SLOW_FIRST = (
    "tests/test_docs.py::test_every_page_runs",
    "tests/test_docs.py::test_the_site_builds",
    "tests/test_startup.py",
    "tests/test_checkpoint_resume.py",
    "tests/test_notebooks.py::test_notebook_runs_top_to_bottom[02",
    "tests/test_distributed.py",
    "tests/test_train_cli.py",
    "tests/test_game_eval.py",
    "tests/test_selfplay.py",
    "tests/test_notebooks.py::test_notebook_runs_top_to_bottom",
    "tests/test_sharding.py::test_data_parallel",
    "tests/test_readme.py::test_core_examples",
    "tests/test_ppo.py",
    "tests/test_gymnax.py::test_check_env_on_gymnax_ids[",
    "tests/test_readme.py",
    "tests/test_play_against.py",
    "tests/test_checker.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    opt = config.option
    if getattr(opt, "numprocesses", None) and getattr(opt, "dist", None) == "no" and not hasattr(config, "workerinput"):
        opt.dist = "loadgroup"
        opt.loadscopereorder = False  # keep SLOW_FIRST's order (xdist would sort the units by size)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):  # pytest-xdist's hook, on the controller: tell each worker
    node.workerinput["jaxenvs_dist"] = node.config.option.dist


def pytest_configure(config):
    # a worker parses the bare command line (-n 2: no --dist): group as the controller schedules
    if getattr(config, "workerinput", {}).get("jaxenvs_dist") == "loadgroup":
        config.option.loadgroup = True


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker reads the groups
def pytest_collection_modifyitems(config, items):
    def rank(item):
        return next((i for i, prefix in enumerate(SLOW_FIRST) if item.nodeid.startswith(prefix)), len(SLOW_FIRST))

    items.sort(key=rank)  # stable: a module's tests keep their order
    if getattr(config.option, "loadgroup", False):  # an xdist worker: its groups in the node ids
        _suffix_groups(items)


def _suffix_groups(items) -> None:
    """The ``@group`` suffix pytest-xdist's worker gives a grouped item's node id, by which the
    controller schedules a group on one worker. xdist 3.8 writes it to ``item._nodeid``, which pytest
    9.2 no longer reads (a node id is the structured ``item._id``): without this every group was
    split across the workers and its module fixture computed on each. Older pytest: left to xdist."""
    try:
        from _pytest.nodeid import NodeId
    except ImportError:
        return
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        if mark is not None and "@" not in item.nodeid and isinstance(getattr(item, "_id", None), NodeId):
            item._id = NodeId.parse(f"{item.nodeid}@{mark.args[0]}")


def pytest_itemcollected(item):
    # a module's tests that share a module-scoped fixture form one group (marked as each item is
    # collected, before any pytest_collection_modifyitems hook reads the marks)
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if any(d.scope in ("module", "class", "package") for fixture_defs in defs.values() for d in fixture_defs):
        item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


@pytest.fixture
def rollout_without_retrace():
    """``run(env, num_steps, num_envs)``: a random-policy :func:`jaxenvs.rollout.rollout` (no
    recorded states) called twice with different keys; asserts the second call compiled nothing
    and returns the first trajectory."""
    import jax

    from jaxenvs.rollout import random_policy, rollout, trace_count

    def run(env, num_steps, num_envs):
        policy = random_policy(env)
        traj = rollout(env, jax.random.key(5), policy, num_steps, num_envs=num_envs, record_states=False)
        traces = trace_count()
        rollout(env, jax.random.key(6), policy, num_steps, num_envs=num_envs, record_states=False)
        assert trace_count() == traces, "the second rollout call traced again"
        return traj

    return run


@pytest.fixture(scope="session")
def grid_rollout():
    """A 24-step auto-resetting 2x2 GridWorld rollout (several episodes end in it) and its frames;
    shared by the rollout and rendering tests, so it is computed once."""
    import jax

    import jaxenvs
    from jaxenvs.rendering import render_frames
    from jaxenvs.rollout import random_policy, rollout

    env = jaxenvs.make("GridWorld-v0", size=2)
    traj = rollout(env, jax.random.key(3), random_policy(env), 24)
    return env, traj, render_frames(env, traj.state)
