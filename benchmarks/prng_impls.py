"""The trainer under each of JAX's PRNG implementations: PPO's whole run, paired in one process.

For each ``--envs`` id (default GridWorld-v0, at its tuned config and at ``--num-envs`` envs), the
trainer's whole run (``trainer.train``: init and every update, one jitted program) is compiled
once per implementation (``threefry2x32``, JAX's default; ``rbg``; ``unsafe_rbg``: the key given
to ``train`` decides, ``jax.random.key(seed, impl=...)``), then the programs run in turn, round
after round, and each ratio is the median of the per-round ratios against threefry. Prints a
markdown table and, with ``--out STEM``, writes STEM.json and STEM.md. JAX's caveats for the
other implementations are in docs/guides/performance.md.

    python benchmarks/prng_impls.py --out benchmarks/results/prng_impls
    python benchmarks/prng_impls.py --envs GridWorld-v0 gymnax/CartPole-v1 --num-envs 32 1024
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jaxenvs.train  # noqa: E402,F401  (the trainer's XLA flags before JAX compiles anything)
import jax  # noqa: E402
import numpy as np  # noqa: E402

from jaxenvs.train.configs import get_config  # noqa: E402
from jaxenvs.train.trainers import make_trainer  # noqa: E402

IMPLS = ["threefry2x32", "rbg", "unsafe_rbg"]


def measure(env_id: str, num_envs: int | None, impls, rounds: int) -> list[dict]:
    cfg = get_config(env_id) if num_envs is None else get_config(env_id, num_envs=num_envs)
    trainer = make_trainer(cfg)
    compiled = {}
    for impl in impls:
        key = jax.random.key(0, impl=impl)
        compiled[impl] = jax.jit(trainer._train).lower(key).compile()
        jax.block_until_ready(compiled[impl](key))
    times = {i: [] for i in impls}
    for r in range(rounds):
        for impl in impls if r % 2 == 0 else impls[::-1]:
            key = jax.random.key(r + 1, impl=impl)
            t0 = time.perf_counter()
            jax.block_until_ready(compiled[impl](key))
            times[impl].append(time.perf_counter() - t0)
    steps = cfg.num_updates * cfg.steps_per_update
    base = np.asarray(times[impls[0]])
    return [{
        "env": env_id, "num_envs": cfg.num_envs, "prng_impl": i, "env_steps": steps,
        "steps_per_sec": steps / float(np.median(times[i])),
        "vs_" + impls[0]: float(np.median(base / np.asarray(times[i]))),
        "load": os.getloadavg()[0],
    } for i in impls]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", nargs="+", default=["GridWorld-v0"], metavar="ID")
    p.add_argument("--num-envs", nargs="+", type=int, default=[None], metavar="N", help="default: the tuned config's")
    p.add_argument("--prng-impl", nargs="+", default=IMPLS, choices=IMPLS)
    p.add_argument("--repeats", type=int, default=5, help="rounds; medians count")
    p.add_argument("--out", default=None, metavar="STEM")
    args = p.parse_args(argv)
    rows = []
    for env_id in args.envs:
        for n in args.num_envs:
            rows += measure(env_id, n, args.prng_impl, args.repeats)
            print(table(rows[-len(args.prng_impl):]), flush=True)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out + ".json", "w") as f:
            json.dump({"device": str(jax.devices()[0]), "jax": jax.__version__, "rows": rows}, f, indent=1)
        with open(args.out + ".md", "w") as f:
            f.write(f"PPO's whole run (`trainer.train`), jax {jax.__version__}, {jax.devices()[0].platform}, "
                    f"medians of {args.repeats} paired rounds\n\n" + table(rows) + "\n")
        print(f"wrote {args.out}.json and {args.out}.md")
    return rows


def table(rows) -> str:
    vs = [k for k in rows[0] if k.startswith("vs_")][0]
    lines = [f"| env | num_envs | PRNG | env-steps/s | {vs.replace('_', ' ')} | load |", "|---|---:|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['env']} | {r['num_envs']} | {r['prng_impl']} | {r['steps_per_sec']:,.0f} | {r[vs]:.2f} | {r['load']:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
