"""A verify_port certificate for every environment jaxenvs ships, against its original.

    python benchmarks/certificates.py                 # every row
    python benchmarks/certificates.py --only gymnax,Pgx   # the rows naming one of these (the table keeps the others)

Writes benchmarks/results/certificates/<env>.json (the `PortReport`, or the reason a row could not
run) and benchmarks/results/certificates/README.md (the table docs/certificates.md shows: verdict,
tier, certified effect, episodes, seconds). The originals: the tutorials' environments as Python
re-implementations (tests/reference_envs.py), PettingZoo's tictactoe_v3 / connect_four_v3,
Pgx's tic_tac_toe / connect_four, OpenSpiel's kuhn_poker, Gymnasium's classic control for the
gymnax ports (with the state mappings of jaxenvs.adapters.gymnax_states). A real divergence found
is a finding: the row says FAIL with its evidence.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "benchmarks", "results", "certificates")


def rows():
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import reference_envs as R

    def pz(name):
        def factory():
            import importlib

            return importlib.import_module(f"pettingzoo.classic.{name}").env()

        return factory

    def pgx_env(name):
        import pgx

        return pgx.make(name)

    def kuhn():
        import pyspiel

        return pyspiel.load_game("kuhn_poker")

    from jaxenvs.adapters.gymnax_states import STATE_TO_JAX as GX
    from jaxenvs.adapters.gymnax_states import reference as gx_ref

    out = []
    for env_id in ("GridWorld-v0", "PointEnv-v0", "HurdleRace-v0", "Lottery-v0", "RockPaperScissors-v0"):
        out.append((env_id, "tests/reference_envs.py (the tutorial's original)", lambda e=env_id: R.REFERENCES[e],
                    {"state_to_jax": R.STATE_TO_JAX[env_id]}))
    out.append(("TicTacToe-v0", "PettingZoo tictactoe_v3", lambda: pz("tictactoe_v3"), {}))
    out.append(("TicTacToe-v0", "Pgx tic_tac_toe", lambda: pgx_env("tic_tac_toe"), {}))
    out.append(("ConnectFour-v0", "PettingZoo connect_four_v3", lambda: pz("connect_four_v3"), {}))
    out.append(("ConnectFour-v0", "Pgx connect_four", lambda: pgx_env("connect_four"), {}))
    out.append(("KuhnPoker-v0", "OpenSpiel kuhn_poker", kuhn, {}))
    for gid in GX:
        out.append((f"gymnax/{gid}", f"Gymnasium {gid}", lambda g=gid: gx_ref(g), {"state_to_jax": GX[gid]}))
    return out


def certify(env_id, ref_name, make_ref, kwargs, budget):
    import jaxenvs
    from jaxenvs.testing import PortInconclusive, PortMismatch, verify_port

    t0 = time.perf_counter()
    row = {"env": env_id, "reference": ref_name}
    if make_ref is None:
        return {**row, "verdict": "not run", "why": kwargs, "seconds": 0.0}
    try:
        report = verify_port(jaxenvs.make(env_id), make_ref(), budget_s=budget, **kwargs)
        evidence = ""
    except (PortMismatch, PortInconclusive) as e:
        report, evidence = e.report, str(e).splitlines()[0][:400]
    except ImportError as e:
        return {**row, "verdict": "not run", "why": str(e), "seconds": time.perf_counter() - t0}
    if report is None:
        return {**row, "verdict": "fail", "evidence": evidence, "seconds": time.perf_counter() - t0}
    req = [s for s in report.statistics if s.required]
    worst = max(req, key=lambda s: s.detectable) if req else None
    if report.verdict == "fail":  # the statistic that failed, with its tier
        worst = min(report.failed, key=lambda s: s.p_value)
        certified = f"failed: {worst.name}"
    else:
        certified = "exact" if worst is None or worst.effect == "exact" else f"{worst.effect} {worst.detectable:.3g}"
    return {**row, "verdict": report.verdict, "tier": worst.tier if worst is not None else "", "certified": certified,
            "detect": report.detect, "episodes": report.num_episodes, "seconds": round(report.seconds, 1),
            "evidence": evidence, "report": json.loads(report.to_json())}


def table(results) -> str:
    head = "| env | reference | verdict | tier (of the weakest required statistic) | certified effect (detect) | episodes | s |\n|---|---|---|---|---|---|---|"
    lines = [head]
    for r in results:
        if r["verdict"] == "not run":
            lines.append(f"| {r['env']} | {r['reference']} | not run: {r['why']} | | | | |")
            continue
        lines.append(f"| {r['env']} | {r['reference']} | {r['verdict'].upper()} | {r.get('tier', '')} | "
                     f"{r.get('certified', '')} ({r.get('detect', '')}) | {r.get('episodes', '')} | {r['seconds']} |")
    notes = [f"* {r['env']} vs {r['reference']}: {r['evidence']}" for r in results if r.get("evidence")]
    return "\n".join(lines + ([""] + notes if notes else []))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None, help="comma-separated texts: run only the rows whose env or reference holds one")
    ap.add_argument("--budget", type=float, default=60.0, help="verify_port's budget_s per row")
    args = ap.parse_args(argv)
    os.makedirs(OUT, exist_ok=True)
    only = [o for o in (args.only or "").split(",") if o]
    results = []
    for env_id, ref_name, make_ref, kwargs in rows():
        stem = env_id.replace("/", "_") + "__" + ref_name.split()[0].lower().replace("/", "_")
        path = os.path.join(OUT, stem + ".json")
        if only and not any(o in f"{env_id} {ref_name}" for o in only):
            if os.path.exists(path):  # the table keeps the rows of earlier runs
                with open(path) as f:
                    results.append(json.load(f))
            continue
        r = certify(env_id, ref_name, make_ref, kwargs, args.budget)
        results.append(r)
        with open(path, "w") as f:
            json.dump(r, f, indent=2)
        print(f"{env_id} vs {ref_name}: {r['verdict']} {r.get('certified', '')} {r['seconds']} s", flush=True)
    with open(os.path.join(OUT, "README.md"), "w") as f:
        f.write(table(results) + "\n")
    print(table(results))


if __name__ == "__main__":
    main()
