"""Compare a benchmark run's JSON against a committed one in ``benchmarks/results/``: print ratios.

Every number under a key that ends in ``_s`` (seconds) or ``steps_per_s``/``steps_per_sec``
(rates) found at the same place in both files is paired, and the ratio new / baseline printed
(above 1: slower for seconds, faster for rates). Lists of runs are left out; medians are kept.
It never fails on timing: the exit status is 0 whatever the ratios say, 2 only when a file cannot
be read or the two share no figure. A timing record for CI that cannot flake:

    python benchmarks/startup.py --repeats 1 --out runs/ci-startup
    python benchmarks/compare_results.py runs/ci-startup/startup.json benchmarks/results/startup.json

A run directory's ``timings.json`` (what ``jaxenvs-train`` writes: its wall time, phases and JAX's
trace / lower / compile seconds) is compared with the main job of ``startup.json`` (``--kind cold``,
the default, for a run with an empty compilation cache as in CI, or ``warm``):

    python benchmarks/compare_results.py runs/GridWorld-v0-*/timings.json benchmarks/results/startup.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys

RATES = ("steps_per_s", "steps_per_sec")


def figures(tree, prefix: str = "", seconds: bool = False) -> dict[str, float]:
    """``{"a.b.c_s": value}`` for the timed figures (keys ending in ``_s`` or a rate, and every
    number in a dict whose key ends in ``_s``, such as ``phases_s``) of a JSON tree, skipping lists
    (individual runs)."""
    out = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict):
                out.update(figures(v, path, seconds=str(k).endswith("_s")))
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and (seconds or k.endswith("_s") or k in RATES):
                if math.isfinite(v):
                    out[path] = float(v)
    return out


def _settings(tree) -> dict:
    return tree.get("settings", {}) if isinstance(tree, dict) else {}


def compare(new: dict, baseline: dict) -> list[tuple[str, float, float, float]]:
    """``[(figure, new, baseline, new / baseline)]`` for the figures both hold (baseline > 0)."""
    a, b = figures(new), figures(baseline)
    return [(k, a[k], b[k], a[k] / b[k]) for k in a if k in b and b[k] > 0]


def as_main_job(timings: dict, kind: str = "cold") -> dict:
    """A ``timings.json`` of one ``jaxenvs-train`` run placed where ``startup.json`` keeps the main
    job's medians of ``kind`` (its ``wall_s`` is the trainer's own clock: ``trainer_wall_s``)."""
    med = {"trainer_wall_s": timings["wall_s"], "phases_s": timings.get("phases_s", {})}
    if isinstance(timings.get("jax"), dict):
        med["jax"] = {"seconds": timings["jax"].get("seconds", {})}
    return {"main_job": {kind: {"median": med}}}


def _is_timings(tree) -> bool:
    return isinstance(tree, dict) and "wall_s" in tree and "phases_s" in tree and "main_job" not in tree


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("new", help="the JSON file of this run")
    p.add_argument("baseline", help="the committed JSON file, e.g. benchmarks/results/startup.json")
    p.add_argument("--kind", choices=("cold", "warm"), default="cold",
                   help="a timings.json is compared with startup.json's main job of this kind (default: cold)")
    args = p.parse_args(argv)
    try:
        new, baseline = (json.loads(open(path).read()) for path in (args.new, args.baseline))
    except (OSError, json.JSONDecodeError) as e:
        print(f"compare_results: cannot read {e}", file=sys.stderr)
        return 2
    if _is_timings(new):
        new = as_main_job(new, args.kind)
        print(f"{args.new}: one jaxenvs-train run, compared with the {args.kind} main job's medians")
    rows = compare(new, baseline)
    if not rows:
        print(f"compare_results: {args.new} and {args.baseline} share no timed figure", file=sys.stderr)
        return 2
    if _settings(new) and _settings(new) != _settings(baseline):
        print(f"note: the settings differ, so the ratios compare different work: {_settings(new)} vs {_settings(baseline)}")
    width = max(len(k) for k, *_ in rows)
    print(f"{'figure':<{width}}  {'this run':>10}  {'baseline':>10}  ratio (seconds: >1 slower; rates: >1 faster)")
    for k, a, b, r in rows:
        print(f"{k:<{width}}  {a:>10.4g}  {b:>10.4g}  {r:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
