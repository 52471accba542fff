"""Where the CPU time of `verify_port`'s default call goes, on the slippery corridor port
(benchmarks/verify_power.py's `corridor`, against tests/reference_envs.py's plain Gymnasium
`SlipperyCorridorEnv`: 7 cells, slip 0.2), with and without `state_to_jax`.

Each call runs under cProfile with this process's CPU clock (`time.process_time`), so the
breakdown does not depend on how busy the machine is; the wall seconds and the load are
recorded beside it. The phases are cumulative CPU seconds of the functions that do them:

    python benchmarks/verify_profile.py            # writes benchmarks/results/verify_profile.json and .md
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

# phase: (file suffix, function name) whose cumulative time it is
PHASES = {
    "XLA compiles": ("jax/_src/compiler.py", "backend_compile_and_load"),
    "reference episodes (stepping, resets, bookkeeping; policy calls included)": ("jaxenvs/testing/reference.py", "run"),
    "  of which the policy's calls for the reference": ("jaxenvs/testing/port_verification.py", "act"),
    "  of which the reference's own step": ("jaxenvs/testing/reference.py", "_step"),
    "  of which state_to_jax": ("benchmarks/verify_power.py", "corridor_state"),
    "port episodes (rollouts)": ("jaxenvs/testing/port_verification.py", "port_episodes"),
    "extra initial observations (both sides)": ("jaxenvs/testing/port_verification.py", "more_initial"),
    "from-state tier (port draws at reference states, ranks)": ("jaxenvs/testing/from_state.py", "from_state_statistic"),
    "sample tier statistics": ("jaxenvs/testing/port_verification.py", "sample_tier"),
    "importing scipy.stats": ("scipy/stats/__init__.py", "<module>"),
}


def profile(with_state: bool, seed: int) -> dict:
    import verify_power as V

    from jaxenvs.testing import verify_port

    kwargs = {"state_to_jax": V.corridor_state} if with_state else {}
    prof = cProfile.Profile(time.process_time)
    load0, t0, c0 = os.getloadavg(), time.perf_counter(), time.process_time()
    prof.enable()
    report = verify_port(V.corridor(), V.corridor_reference, seed=seed, raise_inconclusive=False, **kwargs)
    prof.disable()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    stats = pstats.Stats(prof).stats
    phases = {}
    for name, (suffix, fn) in PHASES.items():
        phases[name] = sum(v[3] for (f, _, func), v in stats.items() if f.endswith(suffix) and func == fn)
    return {"state_to_jax": with_state, "seed": seed, "verdict": report.verdict, "episodes": report.num_episodes,
            "cpu_s": cpu, "wall_s": wall, "load": [load0[0], os.getloadavg()[0]], "phases_cpu_s": phases}


def table(rows: list[dict]) -> str:
    out = []
    for r in rows:
        out.append(f"**{'with' if r['state_to_jax'] else 'without'} state_to_jax** (seed {r['seed']}): {r['verdict']}, "
                   f"{r['episodes']:,} episodes a side, {r['cpu_s']:.1f} CPU s under the profiler "
                   f"({r['wall_s']:.1f} s wall at load {r['load'][0]:.1f} -> {r['load'][1]:.1f})\n")
        out.append("| phase | CPU s |\n|---|---|")
        out += [f"| {k.strip()} | {v:.2f} |" if not k.startswith("  ") else f"| &nbsp;&nbsp;{k.strip()} | {v:.2f} |"
                for k, v in r["phases_cpu_s"].items()]
        out.append("")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "verify_profile"))
    args = ap.parse_args(argv)
    rows = [profile(False, args.seed), profile(True, args.seed)]
    result = {"command": "python benchmarks/verify_profile.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "machine": f"{os.cpu_count()} CPUs", "rows": rows}
    with open(args.out + ".json", "w") as f:
        json.dump(result, f, indent=2)
    with open(args.out + ".md", "w") as f:
        f.write(table(rows) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
