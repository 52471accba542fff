"""Startup cost, from fresh processes: the main job cold and warm, and time to first trained policy
for jaxenvs and rejax at identical settings.

Every figure comes from a new Python process (the parent only starts them and reads their
output), paired in one run: each repeat runs, in this order,

* ``main job``: ``jaxenvs-train`` with its defaults (GridWorld-v0, its tuned PPO config, progress
  evaluation, learning curve, evaluation table, GIF, checkpoint), ``--out`` a temporary folder.
  **cold**: ``JAXENVS_CACHE_DIR`` is a new empty folder (JAX's persistent compilation cache holds
  nothing); **warm**: the same command again with the folder the cold run just filled. Wall
  clock of the whole command as a user sees it (process start to exit), and the trainer's own
  phases (the ``wall time ... (imports, init, compile, train, progress evaluation, plot,
  evaluate, gif ...)`` line it prints last; ``before its clock`` is the process wall time not
  on the trainer's clock: the interpreter's start and ``import jaxenvs`` with JAX, which run
  before the trainer module's first line);
* ``first policy``: process start to trained parameters (on the host) for ``jaxenvs`` (the tuned
  GridWorld PPO config, the whole run as one jitted program: ``trainer._train``) and ``rejax``
  (rejax 0.1.3's PPO on ``to_gymnax(make("GridWorld-v0"))`` with the same rollout shape, epochs,
  minibatches, learning rate, gamma, lambda, clip, entropy and value coefficients and 64x64 tanh
  network as ``benchmarks/train_speed.py`` sets, the whole run as one jitted program:
  ``algo.train(rng)``), cold and warm as above, with each program's trace / lower / compile
  split (``jax.jit(f).trace(...)``, ``.lower()``, ``.compile()``), the imports and the run itself.
  Both import ``jaxenvs.train`` first (the same XLA flags) and use the cache as the trainer does
  (`jaxenvs.train.xla.enable_compilation_cache`: no minimum compile time).

``--envs``: the main job of each listed environment as well (``jaxenvs-train --env ID`` with its
tuned defaults; ``all``: the five built-in environments), cold and warm as above, into a table of
its own; the first listed is the main job above (default: GridWorld-v0 only). The trainer's
``timings.json`` (in the run directory) adds what each run traced, lowered and compiled: programs
compiled or loaded from the cache, and their seconds.

Medians over ``--repeats`` processes of each kind (>= 5 for a result worth committing). Also
measured once per run: the floor (``import jax`` and one tiny computation, a fresh process) and
``python -X importtime`` of the trainer's module (the heaviest imports). Prints figures and ratios;
writes ``startup.json`` and ``startup.md`` (a markdown table) into ``--out``. Timings depend on the
machine's load: the run records ``uptime``'s load averages before and after.

    python benchmarks/startup.py --out benchmarks/results --envs all   # the committed record (--repeats 5 when the CPU is free)
    python benchmarks/startup.py --repeats 1 --quick --out /tmp/s   # the output's shape only (see --quick)
    python benchmarks/compare_results.py /tmp/s/startup.json benchmarks/results/startup.json   # ratios
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

RESULT_TAG = "STARTUP_RESULT "
ENV_ID = "GridWorld-v0"
BUILT_IN = ("GridWorld-v0", "PointEnv-v0", "HurdleRace-v0", "Lottery-v0", "RockPaperScissors-v0")
# --quick: a tiny training run (the numbers say nothing; the output has its full shape)
QUICK = dict(total_timesteps=512, num_envs=8, num_steps=16, num_minibatches=2, update_epochs=1)
FAST_COMPILE = "--xla_backend_optimization_level=0"
PROGRAMS = ("jaxenvs", "rejax")


# ---- children (run in their own processes) ------------------------------------------------------
def _child(program: str, quick: bool) -> None:
    """Train one seed to the end in one jitted program and print the timestamps (``time.time()``)
    of each stage as one JSON line; the parent subtracts its spawn time."""
    import jaxenvs.train  # noqa: F401  (the trainer's XLA flags, for both programs)
    import jax

    from jaxenvs.train.configs import get_config
    from jaxenvs.train.xla import enable_compilation_cache

    enable_compilation_cache()  # as jaxenvs-train does
    cfg = get_config(ENV_ID, **(QUICK if quick else {}))
    if program == "jaxenvs":
        from jaxenvs.train.trainers import make_trainer

        t = {"imported": time.time()}
        trainer = make_trainer(cfg)
        fn, args = trainer._train, (jax.random.key(0), cfg.hparams())
        params_of = lambda out: out[0].params  # noqa: E731
    else:
        import rejax  # noqa: F401  (imported before the clock starts, as jaxenvs' modules are)
        from rejax_peer import rejax_ppo

        t = {"imported": time.time()}
        algo = rejax_ppo(cfg, cfg.num_updates * cfg.steps_per_update)  # no evaluation inside
        fn, args = (lambda key: algo.train(rng=key)[0]), (jax.random.key(0),)
        params_of = lambda ts: ts.actor_ts.params  # noqa: E731
    t["built"] = time.time()
    traced = jax.jit(fn).trace(*args)
    t["traced"] = time.time()
    lowered = traced.lower()
    t["lowered"] = time.time()
    compiled = lowered.compile()
    t["compiled"] = time.time()
    params = jax.device_get(params_of(compiled(*args)))
    t["trained"] = time.time()
    n = sum(x.size for x in jax.tree.leaves(params))
    print(RESULT_TAG + json.dumps({"t": t, "num_params": int(n), "env_steps": cfg.num_updates * cfg.steps_per_update}),
          flush=True)


# ---- the parent ---------------------------------------------------------------------------------
def _run(cmd: list[str], env: dict, cwd: str, timeout: float) -> tuple[float, float, list[tuple[float, str]], str, int]:
    """``(spawn time.time(), wall s, [(s since spawn, stdout line)], stderr, status)``."""
    t0 = time.time()
    p0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    err: list[str] = []
    drain = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)  # a full pipe would block
    drain.start()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append((round(time.perf_counter() - p0, 3), line.rstrip("\n")))
        proc.wait()
    finally:
        timer.cancel()
    wall = time.perf_counter() - p0
    drain.join()
    return t0, wall, lines, "".join(err), proc.returncode


def _check(status: int, what: str, stderr: str, lines) -> None:
    if status != 0:
        tail = "\n".join(text for _, text in lines[-10:])
        raise SystemExit(f"{what} failed with status {status}:\n{tail}\n{stderr[-3000:]}")


_WALL = re.compile(r"wall time ([\d.]+)s of this command \((.*?); the rest")


def trainer_phases(lines: list[tuple[float, str]]) -> tuple[float | None, dict[str, float]]:
    """``(trainer's wall s, {phase: s})`` from the ``wall time ...`` line ``jaxenvs-train`` prints
    last (phases under 0.05 s are left out of that line); ``(None, {})`` when there is none."""
    for _, text in reversed(lines):
        m = _WALL.search(text)
        if m:
            phases = {}
            for part in m.group(2).split(", "):
                name, _, value = part.rpartition(" ")
                if value.endswith("s"):
                    phases[name] = float(value[:-1])
            return float(m.group(1)), phases
    return None, {}


def _child_env(cache: str, quick: bool) -> dict:
    """The environment of a measured process: its cache folder; with ``quick``, XLA's cheapest
    compile (no LLVM optimisation), since quick runs only check the output's shape."""
    env = dict(os.environ, JAXENVS_CACHE_DIR=cache)
    if quick:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip()
    return env


def main_job(cache: str, quick: bool, workdir: str, timeout: float, env_id: str = ENV_ID) -> dict:
    exe = shutil.which("jaxenvs-train", path=os.path.dirname(sys.executable))
    cmd = [exe] if exe else [sys.executable, "-m", "jaxenvs.train"]
    runs = tempfile.mkdtemp(prefix="runs-", dir=workdir)
    cmd += ["--out", runs] + ([] if env_id == ENV_ID else ["--env", env_id])
    if quick:
        cmd += [f"--{k.replace('_', '-')}={v}" for k, v in QUICK.items()] + ["--chunks", "2", "--no-gif", "--no-eval"]
    env = _child_env(cache, quick)
    _, wall, lines, err, status = _run(cmd, env, workdir, timeout)
    _check(status, "jaxenvs-train", err, lines)
    trainer_wall, phases = trainer_phases(lines)
    out = {"wall_s": wall, "trainer_wall_s": trainer_wall, "phases_s": phases}
    if trainer_wall is not None:
        out["before_clock_s"] = wall - trainer_wall
    found = list(Path(runs).glob("*/timings.json"))
    if found:  # what the run traced, lowered and compiled (train.xla.CompileLog)
        timings = json.loads(found[0].read_text())
        jax_log = timings.get("jax") or {}
        out["jax"] = {"seconds": jax_log.get("seconds", {}), "counts": jax_log.get("counts", {})}
        out["learning_curve_drawn_in"] = timings.get("learning_curve_drawn_in")  # the command's helper process
        out["outputs_sha256"] = outputs_digest(found[0].parent)
    return out | {"lines": lines}


def outputs_digest(run_dir: Path) -> str:
    """sha256 of the run's numbers: ``metrics.csv`` (every update's losses and returns) and
    ``evaluation.json`` when written. A warm run (programs from the cache) must give the cold
    run's digest: the cache may save time, never change a result."""
    h = hashlib.sha256()
    for name in ("metrics.csv", "evaluation.json"):
        if (run_dir / name).exists():
            h.update(name.encode() + b"\0" + (run_dir / name).read_bytes())
    return h.hexdigest()


def first_policy(program: str, cache: str, quick: bool, workdir: str, timeout: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", program] + (["--quick"] if quick else [])
    env = _child_env(cache, quick)
    t0, wall, lines, err, status = _run(cmd, env, workdir, timeout)
    _check(status, f"first policy ({program})", err, lines)
    found = [json.loads(text[len(RESULT_TAG):]) for _, text in lines if text.startswith(RESULT_TAG)]
    if not found:
        raise SystemExit(f"first policy ({program}) printed no result:\n{err[-3000:]}")
    t = found[0]["t"]
    return {
        "first_policy_s": t["trained"] - t0,
        "wall_s": wall,
        "imports_s": t["imported"] - t0,
        "build_s": t["built"] - t["imported"],
        "trace_s": t["traced"] - t["built"],
        "lower_s": t["lowered"] - t["traced"],
        "compile_s": t["compiled"] - t["lowered"],
        "train_s": t["trained"] - t["compiled"],
        "num_params": found[0]["num_params"],
        "env_steps": found[0]["env_steps"],
    }


FLOOR_CODE = "import jax, jax.numpy as jnp; jnp.zeros(1).block_until_ready()"
# the libraries the main job cannot do without: the network and optimizer (flax, optax) and the
# learning curve's plot (matplotlib); imageio writes the GIF
LIBRARY_FLOOR_CODE = ("import jax, jax.numpy as jnp, flax.linen, optax, matplotlib; matplotlib.use('Agg'); "
                      "import matplotlib.pyplot, imageio; jnp.zeros(1).block_until_ready()")


def floor(workdir: str, timeout: float, code: str = FLOOR_CODE) -> float:
    """Wall s of a fresh ``python -c CODE``; by default ``import jax`` and one tiny computation,
    what any JAX command costs (`LIBRARY_FLOOR_CODE`: the main job's libraries as well)."""
    _, wall, lines, err, status = _run([sys.executable, "-c", code], dict(os.environ), workdir, timeout)
    _check(status, "the floor", err, lines)
    return wall


def import_times(workdir: str, timeout: float, module: str = "jaxenvs.train.__main__", top: int = 14) -> dict:
    """``python -X importtime -c "import MODULE"``: the import's total seconds and the cumulative
    seconds of the first import of each package (a name without a dot) and of each ``jaxenvs``
    module, the biggest ``top`` of them (a package imported inside another counts in both)."""
    _, _, lines, err, status = _run([sys.executable, "-X", "importtime", "-c", f"import {module}"], dict(os.environ),
                                    workdir, timeout)
    _check(status, "-X importtime", err, lines)
    cumulative, total = {}, 0.0
    for line in err.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if not m:
            continue
        name, seconds = m.group(4), int(m.group(2)) / 1e6
        if len(m.group(3)) == 1:  # top level of the import tree
            total += seconds
        if "." not in name or name.startswith("jaxenvs"):
            cumulative[name] = seconds
    biggest = dict(sorted(cumulative.items(), key=lambda kv: -kv[1])[:top])
    return {"module": module, "total_s": total, "cumulative_s": biggest}


def _load() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "(uptime not available)"


def _median_runs(runs: list[dict], keys=None) -> dict:
    keys = keys or [k for k, v in runs[0].items() if isinstance(v, (int, float)) and k.endswith("_s")]
    return {k: statistics.median(r[k] for r in runs if r.get(k) is not None) for k in keys
            if any(r.get(k) is not None for r in runs)}


def summarise_main(runs: list[dict]) -> dict:
    med = _median_runs(runs, ["wall_s", "trainer_wall_s", "before_clock_s"])
    names = list(dict.fromkeys(k for r in runs for k in r["phases_s"]))
    med["phases_s"] = {k: statistics.median(r["phases_s"].get(k, 0.0) for r in runs) for k in names}
    logs = [r["jax"] for r in runs if "jax" in r]
    if logs:
        med["jax"] = {part: {k: statistics.median(log[part].get(k, 0) for log in logs) for k in logs[0][part]}
                      for part in ("seconds", "counts")}
    return {"median": med, "runs": [{k: v for k, v in r.items() if k != "lines"} for r in runs],
            "outputs_sha256": sorted({r["outputs_sha256"] for r in runs if "outputs_sha256" in r}),
            "lines_of_first_run": runs[0]["lines"]}


def main(argv=None) -> dict | None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5, help="processes of each kind (the median counts)")
    p.add_argument("--quick", action="store_true", help="tiny training settings, no evaluation or GIF, XLA's cheapest compile: "
                   "checks the output's shape, says nothing about speed")
    p.add_argument("--no-rejax", action="store_true", help="skip rejax's first policy")
    p.add_argument("--envs", default=ENV_ID, help=f"comma-separated env ids whose main job is measured too, the first being "
                   f"the main job's ('all': {', '.join(BUILT_IN)}; default {ENV_ID})")
    p.add_argument("--out", default="runs/benchmarks", help="folder for startup.json and startup.md")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds one process may take")
    p.add_argument("--child", choices=PROGRAMS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.child, args.quick)
        return None
    if args.repeats < 1:
        p.error(f"--repeats {args.repeats}: must be >= 1")
    envs = list(BUILT_IN) if args.envs == "all" else [e.strip() for e in args.envs.split(",") if e.strip()]
    if not envs:
        p.error("--envs: give at least one env id")
    unknown = [e for e in envs if e not in BUILT_IN]
    if unknown:
        p.error(f"--envs {','.join(unknown)}: not a built-in environment; choose from {', '.join(BUILT_IN)} or 'all'")
    args.env_list = envs
    programs = [x for x in PROGRAMS if not (x == "rejax" and args.no_rejax)]
    if "rejax" in programs:
        import importlib.util

        if importlib.util.find_spec("rejax") is None:
            p.error('rejax is not installed (pip install "jaxenvs[rejax]"); or pass --no-rejax')
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    load_before = _load()
    print(f"load before: {load_before}", flush=True)
    env_runs = {env: {"cold": [], "warm": []} for env in args.env_list}
    main_runs = env_runs[args.env_list[0]]
    fp_runs = {prog: {"cold": [], "warm": []} for prog in programs}
    floors, library_floors = [], []
    with tempfile.TemporaryDirectory(prefix="jaxenvs-startup-") as tmp:
        imports = import_times(tmp, args.timeout)
        for r in range(args.repeats):
            floors.append(floor(tmp, args.timeout))
            library_floors.append(floor(tmp, args.timeout, LIBRARY_FLOOR_CODE))
            for env in args.env_list:
                cache = tempfile.mkdtemp(prefix="cache-main-", dir=tmp)
                for kind in ("cold", "warm"):
                    res = main_job(cache, args.quick, tmp, args.timeout, env)
                    env_runs[env][kind].append(res)
                    print(f"[{r + 1}/{args.repeats}] main job {env} {kind}: {res['wall_s']:.2f} s "
                          f"({', '.join(f'{k} {v:.1f}' for k, v in res['phases_s'].items())})", flush=True)
            for prog in programs:
                cache = tempfile.mkdtemp(prefix=f"cache-{prog}-", dir=tmp)
                for kind in ("cold", "warm"):
                    res = first_policy(prog, cache, args.quick, tmp, args.timeout)
                    fp_runs[prog][kind].append(res)
                    print(f"[{r + 1}/{args.repeats}] first policy {prog} {kind}: {res['first_policy_s']:.2f} s "
                          f"(imports {res['imports_s']:.2f}, trace {res['trace_s']:.2f}, lower {res['lower_s']:.2f}, "
                          f"compile {res['compile_s']:.2f}, train {res['train_s']:.2f})", flush=True)
            # the record so far, rewritten after every repeat (a long run stopped early keeps its repeats)
            result = _record(args, load_before, _load(), (floors, library_floors), env_runs, fp_runs, imports, r + 1)
    print(f"load after: {result['machine']['load_after']}", flush=True)
    print(markdown(result))
    print(f"wrote {out / 'startup.json'} and {out / 'startup.md'}")
    return result


def _record(args, load_before, load_after, floors, env_runs, fp_runs, imports, done) -> dict:
    """The result of the ``done`` repeats so far, written to ``--out``."""
    import jax

    result = {
        "settings": {"env_id": args.env_list[0], "envs": args.env_list, "quick": args.quick, "repeats": args.repeats,
                     "training": QUICK if args.quick else "the tuned defaults (jaxenvs.train.configs)"},
        "repeats_done": done,
        "machine": {"cpus": os.cpu_count(), "jax": jax.__version__, "python": sys.version.split()[0],
                    "load_before": load_before, "load_after": load_after},
        "floor_s": {"median": statistics.median(floors[0]), "runs": floors[0]},
        # a fresh process that imports jax, flax, optax, matplotlib (pyplot) and imageio: the least any
        # run with the main job's outputs can take
        "library_floor_s": {"median": statistics.median(floors[1]), "runs": floors[1]},
        "main_job": {kind: summarise_main(runs) for kind, runs in env_runs[args.env_list[0]].items()},
        "per_env": {env: {kind: summarise_main(runs)["median"] for kind, runs in kinds.items()} for env, kinds in env_runs.items()},
        # per env, every cold and warm run wrote the same numbers (metrics.csv, evaluation.json)
        "same_outputs_cold_and_warm": {env: len({r.get("outputs_sha256") for k in kinds.values() for r in k}) == 1
                                       for env, kinds in env_runs.items()},
        "first_policy": {prog: {kind: {"median": _median_runs(runs), "runs": runs} for kind, runs in kinds.items()}
                         for prog, kinds in fp_runs.items()},
        "imports": imports,
    }
    result["ratios"] = ratios(result)
    out = Path(args.out)
    (out / "startup.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "startup.md").write_text(markdown(result))
    return result


def ratios(result: dict) -> dict:
    """The figures the issue's budget and the rejax comparison are stated in."""
    mj = result["main_job"]
    cold, warm = mj["cold"]["median"]["wall_s"], mj["warm"]["median"]["wall_s"]
    out = {"main_cold_over_warm": cold / warm, "main_cold_over_floor": cold / result["floor_s"]["median"],
           "main_warm_over_floor": warm / result["floor_s"]["median"]}
    fp = result["first_policy"]
    if "rejax" in fp:
        for kind in ("cold", "warm"):
            j, x = fp["jaxenvs"][kind]["median"], fp["rejax"][kind]["median"]
            out[f"first_policy_{kind}_jaxenvs_over_rejax"] = j["first_policy_s"] / x["first_policy_s"]
            jc = j["trace_s"] + j["lower_s"] + j["compile_s"]
            xc = x["trace_s"] + x["lower_s"] + x["compile_s"]
            out[f"trace_lower_compile_{kind}_jaxenvs_over_rejax"] = jc / xc
    return out


def markdown(result: dict) -> str:
    s, m = result["settings"], result["machine"]
    mj = result["main_job"]
    phases = list(dict.fromkeys(k for kind in mj.values() for k in kind["median"]["phases_s"]))
    lines = [
        f"Startup of the main job (`jaxenvs-train`, {s['env_id']}{', --quick settings' if s['quick'] else ', defaults'}) "
        f"and time to first trained policy, median of {result['repeats_done']} fresh process(es) each "
        f"({result['repeats_done']} of {s['repeats']} repeats run); {m['cpus']} CPUs, "
        f"jax {m['jax']}.",
        f"Load before: `{m['load_before']}`; after: `{m['load_after']}`. "
        f"Floor (`import jax` + one op, fresh process): {result['floor_s']['median']:.2f} s; with the main job's "
        f"libraries (flax, optax, matplotlib, imageio): {result['library_floor_s']['median']:.2f} s.",
        "",
        "| main job | wall | before its clock | " + " | ".join(phases) + " |",
        "|---|---|---|" + "---|" * len(phases),
    ]
    for kind in ("cold", "warm"):
        med = mj[kind]["median"]
        lines.append(f"| {kind} | {med['wall_s']:.2f} s | {med.get('before_clock_s', float('nan')):.2f} | "
                     + " | ".join(f"{med['phases_s'].get(k, 0.0):.1f}" for k in phases) + " |")
    lines += ["", "| main job of each env (`jaxenvs-train --env ID`) | cold | warm | cold: init / compile waited / train | programs compiled cold / loaded warm |",
              "|---|---|---|---|---|"]
    for env, kinds in result.get("per_env", {}).items():
        cold, warm = kinds["cold"], kinds["warm"]
        ph = cold["phases_s"]
        counts = lambda m, k: m.get("jax", {}).get("counts", {}).get(k)  # noqa: E731
        lines.append(f"| {env} | {cold['wall_s']:.2f} s | {warm['wall_s']:.2f} s | {ph.get('init', 0.0):.1f} / "
                     f"{ph.get('compile', 0.0):.1f} / {ph.get('train', 0.0):.1f} | {counts(cold, 'compile')} / {counts(warm, 'cache_hits')} |")
    lines += ["", "| first trained policy | process start to params | imports | build | trace | lower | compile | train |",
              "|---|---|---|---|---|---|---|---|"]
    for prog, kinds in result["first_policy"].items():
        for kind in ("cold", "warm"):
            med = kinds[kind]["median"]
            lines.append(f"| {prog} {kind} | {med['first_policy_s']:.2f} s | " + " | ".join(
                f"{med[k]:.2f}" for k in ("imports_s", "build_s", "trace_s", "lower_s", "compile_s", "train_s")) + " |")
    lines += ["", "Ratios: " + ", ".join(f"{k} {v:.2f}x" for k, v in result["ratios"].items()) + ".", ""]
    imp = result["imports"]
    lines.append(f"`python -X importtime -c \"import {imp['module']}\"`: {imp['total_s']:.2f} s in all; largest (cumulative, nested ones counted in their parents too): "
                 + ", ".join(f"{k} {v:.2f} s" for k, v in imp["cumulative_s"].items()) + ".")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
