"""``jaxenvs profile`` and :func:`jaxenvs.profile.profile`: what the report says is what it measured.

One profile runs (module-scoped, through the command line, from a temporary directory that holds
the environment's module and is not on ``sys.path``), on a tiny environment with a tiny sweep;
the tests read its files and output. Timings are only checked to exist and be positive.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs import cli
from jaxenvs.profile import auto_num_steps, file_stem, tree_bytes, wrapper_layers

MODULE = "tinyprof_mod"
ENV_ID = "tinyprof/Counter-v0"
SPECS: dict = {}  # the specs the profiled command registered, taken out of the registry after it
SIZES = (1, 16)
STEPS = 4
SUMMARY = re.compile(
    r"^(?P<id>\S+): compile (?P<compile>\d+\.\d\d) s, peak (?P<m>\d\.\d)e(?P<e>-?\d+) steps/s at "
    r"(?P<n>[\d,]+) envs \((?P<path>vmap|VectorEnv)\), (?P<bytes>\d+) B/env$"
)
MODULE_SOURCE = textwrap.dedent(
    '''
    """A counter: int32 count and float32[3] position (16 bytes of state), 3 steps to terminate."""
    import jax
    import jax.numpy as jnp

    import jaxenvs
    from jaxenvs import spaces, struct
    from jaxenvs.core import Environment


    @struct.dataclass
    class State:
        count: jax.Array
        pos: jax.Array


    class Counter(Environment):
        def reset_env(self, key, params):
            s = State(jnp.int32(0), jax.random.uniform(key, (3,)))
            return s.pos, s

        def step_env(self, key, state, action, params):
            s = State(state.count + 1, state.pos + action)
            return s.pos, s, jnp.float32(action), s.count >= 3, jnp.bool_(False), {}

        def observation_space(self, params=None):
            return spaces.Box(-jnp.inf, jnp.inf, (3,), jnp.float32)

        def action_space(self, params=None):
            return spaces.Discrete(2)


    jaxenvs.register("tinyprof/Counter-v0", Counter, max_episode_steps=5)
    '''
)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """``(folder, out folder, stdout lines, exit status)`` of ``jaxenvs profile tinyprof_mod:tinyprof/Counter-v0``
    run from a folder that holds ``tinyprof_mod.py`` and is not on ``sys.path`` (as the console
    script sees it)."""
    work = tmp_path_factory.mktemp("profile_cwd")
    (work / f"{MODULE}.py").write_text(MODULE_SOURCE)
    mp = pytest.MonkeyPatch()
    mp.chdir(work)
    mp.setattr(sys, "path", [p for p in sys.path if p not in ("", str(work))])
    from io import StringIO

    buf = StringIO()
    mp.setattr(sys, "stdout", buf)
    try:
        argv = ["profile", f"{MODULE}:{ENV_ID}", "--num-envs", *map(str, SIZES), "--steps", str(STEPS),
                "--repeats", "1", "--out", "out", "--ops", "3"]
        status = cli.main(argv)
    finally:
        mp.undo()
        sys.modules.pop(MODULE, None)
        # other tests (e.g. `jaxenvs list`'s) see the registry as shipped; the spec is kept for this file's
        SPECS[ENV_ID] = jaxenvs.registry.pop(ENV_ID, None)
    return work, work / "out", buf.getvalue().splitlines(), status


@pytest.fixture(scope="module")
def report(profiled):
    _, out, _, status = profiled
    assert status == 0
    return json.loads((out / f"{file_stem(ENV_ID)}.json").read_text())


def test_module_id_from_a_folder_off_sys_path(profiled):
    _, out, lines, status = profiled
    assert status == 0, lines
    assert sorted(p.name for p in out.iterdir()) == ["profile_tinyprof_Counter-v0.json", "profile_tinyprof_Counter-v0.png"]
    png = (out / "profile_tinyprof_Counter-v0.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_summary_line_says_what_the_json_holds(profiled, report):
    _, _, lines, _ = profiled
    m = SUMMARY.match(lines[-1])
    assert m, lines[-1]
    assert lines[-1] == report["summary"]
    assert m["id"] == ENV_ID and int(m["bytes"]) == report["state_bytes_per_env"]
    best = max(report["sweep"], key=lambda p: p["steps_per_s"])
    assert int(m["n"].replace(",", "")) == best["num_envs"] and m["path"] == best["path"]
    assert float(f"{m['m']}e{m['e']}") == pytest.approx(best["steps_per_s"], rel=0.06)  # 2 significant digits
    assert float(m["compile"]) == pytest.approx(report["stages"]["rollout"]["total_s"], abs=0.006)


def test_bytes_per_env_is_the_sum_of_one_states_leaf_nbytes(report, monkeypatch):
    monkeypatch.setitem(jaxenvs.registry, ENV_ID, SPECS[ENV_ID])  # the profiled command's module registered it
    env = jaxenvs.make(ENV_ID)
    obs, state = env.reset(jax.random.key(0))
    assert report["state_bytes_per_env"] == sum(np.asarray(x).nbytes for x in jax.tree.leaves(state)) == 4 + 12 + 4
    assert report["obs_bytes_per_env"] == np.asarray(obs).nbytes == 12


def test_json_keys_units_and_stages(report):
    assert set(report) >= {"env_id", "device", "jax_version", "summary", "state_bytes_per_env", "obs_bytes_per_env",
                           "stages", "sweep", "layers", "units"}
    assert set(report["stages"]) == {"reset", "step", "rollout"}
    for name, st in report["stages"].items():
        assert all(st[k] > 0 for k in ("trace_s", "lower_s", "compile_s")), (name, st)
        assert st["total_s"] == pytest.approx(st["trace_s"] + st["lower_s"] + st["compile_s"], rel=1e-12)
    assert report["stages"]["rollout"]["num_envs"] == max(SIZES)


def test_sweep_covers_both_paths_and_every_size(report):
    points = {(p["path"], p["num_envs"]): p for p in report["sweep"]}
    assert set(points) == {(path, n) for path in ("vmap", "VectorEnv") for n in SIZES}
    for (path, n), p in points.items():
        assert p["num_steps"] == STEPS and len(p["run_s"]) == 1
        assert p["steps_per_s"] == pytest.approx(n * STEPS / p["median_run_s"], rel=1e-12)
        assert p["compile_s"] > 0 and p["trace_s"] > 0 and p["lower_s"] > 0
        mem = p["memory"]  # XLA:CPU gives a memory analysis
        assert set(mem) == {"argument_bytes", "output_bytes", "temp_bytes", "alias_bytes", "generated_code_bytes", "peak_bytes"}
        assert mem["argument_bytes"] > 0 and mem["output_bytes"] == 4  # a key in, the float32 reward sum out
        # the scan carries n states: the planned buffers hold at least those
        assert mem["peak_bytes"] >= mem["argument_bytes"] + mem["output_bytes"] + mem["temp_bytes"] - mem["alias_bytes"]
        assert mem["peak_bytes"] >= n * report["state_bytes_per_env"]
    # the rollout stage is the vmap program at the largest size
    big = points[("vmap", max(SIZES))]
    assert report["stages"]["rollout"]["compile_s"] == big["compile_s"]


def test_layers_are_the_wrapper_stack_and_what_each_adds(report):
    layers = report["layers"]
    assert [layer["name"] for layer in layers] == ["Counter", "TimeLimit", "AutoReset"]
    # TimeLimit adds its int32 step counter; AutoReset keeps no state of its own
    assert [layer["state_bytes_per_env"] for layer in layers] == [16, 20, 20]
    for layer in layers:
        assert layer["num_envs"] == max(SIZES) and layer["steps_per_s"] > 0 and layer["step_total_s"] > 0
    # timed alike: the same steps per call, the same calls per timed run, the same rounds (>= LAYER_REPEATS
    # though --repeats 1), and steps/s is the steps of one call over the median call's seconds
    from jaxenvs.profile import LAYER_REPEATS

    assert len({(la["num_envs"], la["num_steps"], la["calls_per_timed_run"], len(la["run_s"])) for la in layers}) == 1
    assert layers[0]["num_steps"] == STEPS and len(layers[0]["run_s"]) == LAYER_REPEATS >= 5
    for la in layers:
        assert la["median_run_s"] == pytest.approx(float(np.median(la["run_s"])), rel=1e-12)
        assert la["steps_per_s"] == pytest.approx(la["num_envs"] * la["num_steps"] / la["median_run_s"], rel=1e-12)


def test_every_layer_program_makes_the_same_steps():
    """Without timing: each layer's program (bare env, + TimeLimit, + AutoReset) steps num_envs envs
    num_steps times, on an env whose every step rewards 1 (episodes of 3 steps, a limit of 2): its
    total reward is num_envs x num_steps exactly, whether the episodes end, are cut or restart."""
    from jaxenvs import spaces, struct
    from jaxenvs.core import Environment
    from jaxenvs.profile import layer_programs
    from jaxenvs.wrappers import AutoReset, TimeLimit

    @struct.dataclass
    class S:
        count: jax.Array

    class Ones(Environment):
        def reset_env(self, key, params):
            return jnp.zeros(1), S(jnp.int32(0))

        def step_env(self, key, state, action, params):
            s = S(state.count + 1)
            return jnp.ones(1) * s.count, s, jnp.float32(1), s.count >= 3, jnp.bool_(False), {}

        def observation_space(self, params=None):
            return spaces.Box(-jnp.inf, jnp.inf, (1,), jnp.float32)

        def action_space(self, params=None):
            return spaces.Discrete(2)

    env = AutoReset(TimeLimit(Ones(), 2))
    programs = layer_programs(env, 8, 7)
    assert [name for name, _, _ in programs] == ["Ones", "TimeLimit", "AutoReset"]
    for name, _, program in programs:
        assert float(jax.jit(program)(jax.random.key(0))) == 8 * 7, name
    assert float(jax.jit(layer_programs(env, 3, 5)[0][2])(jax.random.key(1))) == 3 * 5


def test_helpers():
    import jaxenvs

    assert [n for n, _ in wrapper_layers(jaxenvs.make("GridWorld-v0"))] == ["GridWorld", "TimeLimit", "AutoReset"]
    assert [n for n, _ in wrapper_layers(jaxenvs.make("GridWorld-v0", size=3, autoreset=False))] == [
        "GridWorld", "WithParams", "TimeLimit"]
    tree = {"k": jax.random.key(0), "x": jnp.zeros((3, 2), jnp.float16), "n": jnp.int32(1)}
    assert tree_bytes(tree) == jax.random.key_data(tree["k"]).nbytes + 12 + 4
    assert tree_bytes(jax.eval_shape(lambda: tree)) == tree_bytes(tree)
    assert [auto_num_steps(n) for n in (1, 262, 1024, 65536)] == [1000, 1000, 256, 16]
    assert file_stem("gymnax:ns/Env-v0") == "profile_gymnax_ns_Env-v0"


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jaxenvs: error:"), err
    return lines[0]


@pytest.mark.parametrize(
    "argv, status, message",
    [
        (["profile", "GridWrold-v0"], 2, "GridWorld-v0"),
        (["profile", "no_such_module_xyz:ns/Env-v0"], 2, "no_such_module_xyz"),
        (["profile", "GridWorld-v0", "--num-envs", "0"], 2, "expected an integer >= 1, got '0'"),
        (["profile", "GridWorld-v0", "--steps", "x"], 2, "--steps"),
        (["profile", "GridWorld-v0", "--ops", "-1"], 2, "expected an integer >= 0, got '-1'"),
        (["profile", "GridWorld-v0", "-k", "size=-3", "--no-plot"], 2, "size"),
    ],
)
def test_command_line_mistakes(argv, status, message, capsys):
    assert cli.main(argv) == status
    assert message in _one_error_line(capsys.readouterr().err)


def test_out_naming_a_file_and_missing_matplotlib(tmp_path, monkeypatch, capsys):
    f = tmp_path / "f.txt"
    f.write_text("")
    assert cli.main(["profile", "GridWorld-v0", "--out", str(f)]) == 2
    assert "is a file" in _one_error_line(capsys.readouterr().err)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    assert cli.main(["profile", "GridWorld-v0", "--out", str(tmp_path / "o")]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert "jaxenvs[train]" in line and "--no-plot" in line
    assert not (tmp_path / "o").exists()  # failed before any work


def test_library_argument_checks():
    from jaxenvs.profile import profile

    with pytest.raises(ValueError, match="num_envs"):
        profile("GridWorld-v0", num_envs=())
    with pytest.raises(ValueError, match="repeats"):
        profile("GridWorld-v0", num_envs=(1,), repeats=0)
    with pytest.raises(TypeError, match="Environment or an environment id"):
        profile(3)
    with pytest.raises(ValueError, match="ops must be an int >= 0"):
        profile("GridWorld-v0", num_envs=(1,), ops=-1)


def test_ops_of_the_sweep_program(profiled, report):
    """``--ops 3``: the sweep program's costliest operations, most expensive first, each with its
    instruction, output shape, source and runs per call."""
    ops = report["ops"]
    assert ops["num_envs"] == max(SIZES) and 1 <= len(ops["costliest"]) <= 3
    seconds = [o["seconds"] for o in ops["costliest"]]
    assert seconds == sorted(seconds, reverse=True) and seconds[-1] > 0 and sum(seconds) <= ops["all_ops_s"] + 1e-12
    assert all(o["calls"] >= 1 and o["name"] and o["shape"] for o in ops["costliest"])
    assert all(float(o["calls"]).is_integer() for o in ops["costliest"])  # whole runs per call (runs 2 calls)
    lines = profiled[2]
    assert any("costliest operations of one vmap run" in line for line in lines)


def test_op_costs_finds_the_costly_op_and_counts_its_runs():
    """A program that sorts 2**16 floats twice (a scan of 2) beside an add of 8: the sort is the
    costliest operation, it ran twice per call (XLA:CPU's sort records two events a run), and its
    source names the sort."""
    from jaxenvs.profile import op_costs, ops_table

    def program(x, y):
        def body(c, _):
            return jnp.sort(c[::-1]), None
        return jax.lax.scan(body, x, None, 2)[0], y + 1

    x, y = jnp.arange(2**16, dtype=jnp.float32), jnp.zeros(8)
    compiled = jax.jit(program).lower(x, y).compile()
    ops = op_costs(compiled, lambda: compiled(x, y), calls=2)
    assert ops[0].calls in (2, 4) and "sort" in ops[0].source, ops_table(ops)
    assert not any(o.name.startswith("while") for o in ops)  # a loop's time is its body's: not listed
    assert "sort" in ops_table(ops, top=1).splitlines()[1]
    with pytest.raises(ValueError, match="calls must be an int >= 1"):
        op_costs(compiled, lambda: compiled(x, y), calls=0)


def test_the_persistent_cache_is_really_off_while_profiling(tmp_path):
    # JAX memoises "is the cache used" at the first compile: flipping the flag alone would leave it on
    script = textwrap.dedent(f"""
        import jax, jax.numpy as jnp
        from jax._src import compilation_cache as cc
        from jaxenvs.profile import _no_persistent_cache
        jax.config.update("jax_compilation_cache_dir", {str(tmp_path)!r})
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.jit(lambda x: x + 1)(jnp.ones(3))  # the first compile decides: the cache is used
        backend = jax.devices()[0].client
        assert cc.is_cache_used(backend)
        with _no_persistent_cache():
            assert not cc.is_cache_used(backend)
        assert cc.is_cache_used(backend)  # back on afterwards
        print("ok")
    """)
    import subprocess

    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-2000:]
