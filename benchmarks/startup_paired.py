"""The main job's own overhead against an earlier commit's, paired round by round in one driver.

Each round runs, in fresh processes: the library floor (``import jax, flax, optax, matplotlib,
imageio`` and one op, as ``benchmarks/startup.py`` measures it), then for each side (the order
alternates between rounds) ``jaxenvs-train`` with its defaults cold (a new, empty
``JAXENVS_CACHE_DIR``) and warm (the same command again on that cache). The base side is the tree
of ``--base`` (a commit, ``git archive``'d into a temporary folder and put first on ``PYTHONPATH``,
so the same venv and Python run both sides); the other is this checkout.

A run's own overhead is what ``benchmarks/startup.py`` calls it: wall time minus the library floor
(of the same round) minus the trainer's ``train`` phase. Printed per round and as medians, with the
ratio new / base per round; STEM.json and STEM.md are written with ``--out STEM``. Beside it, each
run's CPU seconds (user + system, ``getrusage``) beyond the floor's: the work done, which other
programs on a shared machine slow less than they slow the wall time.

    python benchmarks/startup_paired.py --base 005fae2 --rounds 5 --out benchmarks/results/startup_paired
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLOOR = ("import jax, jax.numpy as jnp, flax, optax, matplotlib, matplotlib.pyplot, imageio; "
         "jnp.zeros(3).block_until_ready()")


def _run(cmd, env) -> tuple[float, float, float]:
    """``(wall seconds, the trainer's train phase seconds or 0, CPU seconds)`` of one fresh process
    (CPU: user + system of the process and its threads, from ``getrusage``: the work it did, which
    a loaded machine slows less than it slows the wall time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    m = re.search(r"\btrain ([0-9.]+)s", out.stdout)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, float(m.group(1)) if m else 0.0, cpu


def base_tree(ref: str, folder: str) -> str:
    """The tree of ``ref`` in ``folder``, importable as ``jaxenvs`` (with ``jaxenvs.train``)."""
    os.makedirs(folder, exist_ok=True)
    archive = subprocess.run(["git", "-C", ROOT, "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
    os.symlink(os.path.join(folder, "train"), os.path.join(folder, "jaxenvs", "train"))
    return folder


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", default="main", help="the commit to compare against (default: main)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", metavar="STEM", help="write STEM.json and STEM.md")
    args = p.parse_args(argv)
    exe = shutil.which("jaxenvs-train", path=os.path.dirname(sys.executable))
    train_cmd = [exe] if exe else [sys.executable, "-m", "jaxenvs.train"]
    work = tempfile.mkdtemp(prefix="startup-paired-")
    base = base_tree(args.base, os.path.join(work, "base"))
    kinds = ("base cold", "new cold", "base warm", "new warm")
    res: dict = {"floor": [], "floor cpu": [], **{k: [] for k in kinds}}
    load0 = os.getloadavg()
    for r in range(args.rounds):
        floor_wall, _, floor_cpu = _run([sys.executable, "-c", FLOOR], dict(os.environ))
        res["floor"].append(floor_wall)
        res["floor cpu"].append(floor_cpu)
        for side in ("base", "new") if r % 2 == 0 else ("new", "base"):
            env = dict(os.environ)
            if side == "base":
                env["PYTHONPATH"] = base + os.pathsep + env.get("PYTHONPATH", "")
            tmp = tempfile.mkdtemp(dir=work)
            env["JAXENVS_CACHE_DIR"] = os.path.join(tmp, "cache")
            for kind in ("cold", "warm"):
                res[f"{side} {kind}"].append(_run(train_cmd + ["--out", os.path.join(tmp, "out")], env))
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"round {r + 1}: floor {res['floor'][-1]:.2f} s, "
              + ", ".join(f"{k} {res[k][-1][0]:.2f} s (CPU {res[k][-1][2]:.1f} s)" for k in kinds)
              + f" (load {os.getloadavg()[0]:.1f})", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    own = {k: [w - f - t for (w, t, _), f in zip(res[k], res["floor"])] for k in kinds}
    # CPU seconds beyond the floor's (training's own CPU seconds are not known apart: they are in
    # both sides alike, the same program running the same steps)
    cpu = {k: [c - f for (_, _, c), f in zip(res[k], res["floor cpu"])] for k in kinds}
    summary = {
        "base": args.base, "rounds": args.rounds, "load_start": load0, "load_end": os.getloadavg(),
        "floor_s": res["floor"], "floor_cpu_s": res["floor cpu"], "wall_s": {k: [w for w, _, _ in res[k]] for k in kinds},
        "train_s": {k: [t for _, t, _ in res[k]] for k in kinds}, "own_s": own,
        "cpu_beyond_floor_s": cpu,
        "cpu_ratio_new_over_base": {kind: [n / b for b, n in zip(cpu[f"base {kind}"], cpu[f"new {kind}"])]
                                    for kind in ("cold", "warm")},
        "own_ratio_new_over_base": {kind: [n / b for b, n in zip(own[f"base {kind}"], own[f"new {kind}"])]
                                    for kind in ("cold", "warm")},
    }
    lines = [f"Main job (`jaxenvs-train`, defaults) against {args.base}, {args.rounds} paired rounds; load "
             f"{load0[0]:.1f} -> {os.getloadavg()[0]:.1f}; library floor median {statistics.median(res['floor']):.2f} s.", "",
             "| run | wall (median) | own: wall - floor - train (median) | per round | CPU s beyond the floor's (median) |",
             "|---|---:|---:|---|---:|"]
    for k in kinds:
        lines.append(f"| {k} | {statistics.median(summary['wall_s'][k]):.2f} s | {statistics.median(own[k]):.2f} s | "
                     f"{', '.join(f'{x:.2f}' for x in own[k])} | {statistics.median(cpu[k]):.2f} s |")
    lines.append("")
    for kind, ratios in summary["own_ratio_new_over_base"].items():
        lines.append(f"{kind}: own overhead new / base per round {', '.join(f'{x:.2f}' for x in ratios)}; "
                     f"median {statistics.median(ratios):.2f}")
    for kind, ratios in summary["cpu_ratio_new_over_base"].items():
        lines.append(f"{kind}: CPU seconds beyond the floor's, new / base per round {', '.join(f'{x:.2f}' for x in ratios)}; "
                     f"median {statistics.median(ratios):.2f}")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out + ".json", "w") as f:
            json.dump(summary, f, indent=1)
        with open(args.out + ".md", "w") as f:
            f.write(text)
    return summary


if __name__ == "__main__":
    main()
