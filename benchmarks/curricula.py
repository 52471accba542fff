"""Curricula on Maze at equal wall time: DR against PLR against ACCEL, judged on the held-out mazes.

For each curriculum the script builds one PPO trainer (the same network, batch and
hyperparameters; only ``curriculum`` differs), vmaps it over ``--seeds`` seeds in one program,
compiles a chunk of ``--chunk`` updates (compile time is not counted) and then runs chunks until
``--seconds`` of training wall time are spent. Every seed's final policy then plays the held-out
set (`jaxenvs.envs.maze.Maze.heldout_levels`: 500 generated mazes and the hand-made hard ones),
first checked hash-disjoint from every level the run holds (its envs' levels and its PLR buffer),
``--episodes-per-level`` sampled episodes per maze (`train.curricula.heldout_metrics`).

Printed and written (``--json``): per curriculum, the updates and env steps it reached, its
training env-steps/s and their ratio to ``curriculum none`` (the plain program, timed the same
way, for ``min(--seconds, 30)`` seconds), and over seeds the mean and a 95% Student-t interval of the held-out CVaR-10% solve rate,
solve rate, mean return and mean exact regret. The issue's target (PLR or ACCEL at least 10
points of CVaR-10% above DR with intervals that do not overlap, at most 10% fewer env-steps/s
than none) is evaluated on those numbers and printed as met or not met.

    python benchmarks/curricula.py --seconds 60 --seeds 3 --json benchmarks/results/curricula.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time

import numpy as np

CURRICULA = ("dr", "plr", "accel")
METRICS = ("heldout_cvar10_solve_rate", "heldout_success_rate", "heldout_mean_return", "heldout_mean_regret")


def interval(values, confidence: float = 0.95) -> tuple[float, float, float]:
    """``(mean, low, high)``: the Student-t interval of the mean of ``values`` (n >= 2)."""
    from scipy import stats

    x = np.asarray(values, np.float64)
    if x.size < 2:
        raise ValueError(f"an interval needs at least 2 values, got {x.size}")
    mean = float(x.mean())
    half = float(stats.t.ppf(0.5 + confidence / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return mean, mean - half, mean + half


def target(results: dict, points: float = 0.10, slowdown: float = 0.10) -> dict:
    """The issue's target on ``results`` (``{curriculum: {"cvar": (mean, low, high), "ratio": r}}``):
    for PLR and ACCEL, whether the CVaR mean is ``points`` above DR's with the intervals apart,
    and whether its env-steps/s are at least ``1 - slowdown`` of none's."""
    dr = results["dr"]["cvar"]
    out = {}
    for name in ("plr", "accel"):
        c = results[name]["cvar"]
        out[name] = {
            "cvar_gain": c[0] - dr[0],
            "gain_met": bool(c[0] - dr[0] >= points and c[1] > dr[2]),
            "speed_met": bool(results[name]["ratio"] >= 1 - slowdown),
        }
    out["met"] = any(v["gain_met"] and v["speed_met"] for v in out.values())
    return out


def _config(name: str, args):
    from jaxenvs.train.configs import get_config

    return get_config(
        "Maze-v0", curriculum=name, num_envs=args.num_envs, num_steps=args.num_steps,
        total_timesteps=2**31 - 1, update_epochs=args.update_epochs,
        num_minibatches=args.num_minibatches, hidden_sizes=tuple(args.hidden), lr=args.lr, anneal_lr=False,
        plr_buffer_size=args.buffer_size, plr_replay_prob=args.replay_prob, plr_score=args.score,
        plr_temperature=0.3, plr_staleness=0.3, plr_min_fill=0.5,
    )


def train_for(name: str, args) -> dict:
    """One curriculum's seeds trained for ``args.seconds`` of wall time: the runner, updates,
    env steps, steps/s and the compile seconds."""
    import jax

    from jaxenvs.train.trainers import make_trainer

    config = _config(name, args)
    trainer = make_trainer(config)
    keys = jax.random.split(jax.random.key(args.seed), args.seeds)
    init = jax.jit(jax.vmap(trainer.init))
    chunk = jax.jit(jax.vmap(lambda r: trainer._run_updates(r, None, args.chunk)))
    t0 = time.perf_counter()
    runner = jax.block_until_ready(init(keys))
    compiled = chunk.lower(runner).compile()
    compile_s = time.perf_counter() - t0
    updates, spent = 0, 0.0
    while spent < args.seconds:
        t = time.perf_counter()
        runner, metrics = compiled(runner)
        jax.block_until_ready(runner)
        spent += time.perf_counter() - t
        updates += args.chunk
        if bool(np.asarray(metrics["nonfinite"]).any()):
            raise FloatingPointError(f"curriculum {name}: a non-finite loss or parameter after {updates} updates")
    steps = updates * config.steps_per_update * args.seeds
    return dict(trainer=trainer, runner=runner, updates=updates, env_steps_per_seed=updates * config.steps_per_update,
                seconds=spent, steps_per_sec=steps / spent, compile_s=compile_s)


def heldout(run: dict, args) -> dict:
    """Held-out metrics per seed, after the disjointness check."""
    import jax

    from jaxenvs.train import curricula

    trainer, runner = run["trainer"], jax.device_get(run["runner"])
    checked = curricula.heldout_check(trainer, runner).get("heldout_disjoint_from", 0)
    per_seed = []
    for i in range(args.seeds):
        params = jax.tree.map(lambda x: x[i], runner.params)
        per_seed.append(curricula.heldout_metrics(trainer, params, jax.random.key(10_000 + i),
                                                  episodes_per_level=args.episodes_per_level))
    return dict(checked=checked, per_seed=per_seed)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=300.0, help="training wall time per curriculum (all seeds together)")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-envs", type=int, default=32)
    p.add_argument("--num-steps", type=int, default=128)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--buffer-size", type=int, default=256)
    p.add_argument("--replay-prob", type=float, default=0.8)
    p.add_argument("--score", default="regret", choices=("pvl", "maxmc", "regret", "learnability"))
    p.add_argument("--chunk", type=int, default=5, help="updates per compiled call")
    p.add_argument("--episodes-per-level", type=int, default=4)
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    if args.seeds < 3:
        p.error("--seeds: at least 3 (the intervals are over seeds)")
    if args.seconds <= 0 or args.chunk < 1:
        p.error("--seconds must be > 0 and --chunk >= 1")

    import jax

    print(f"Maze-v0, {args.seeds} seeds, {args.num_envs} envs x {args.num_steps} steps per update, "
          f"{args.seconds:g} s of training per curriculum; jax {jax.__version__} on {platform.machine()} "
          f"({os.cpu_count()} CPUs), {jax.devices()[0].platform}", flush=True)
    base = train_for("none", argparse.Namespace(**{**vars(args), "seconds": min(args.seconds, 30.0)}))
    print(f"none : {base['steps_per_sec']:,.0f} env-steps/s (training only; {base['updates']} updates)", flush=True)
    del base["trainer"], base["runner"]
    results = {"none": {k: v for k, v in base.items()}}
    for name in CURRICULA:
        run = train_for(name, args)
        ho = heldout(run, args)
        row = {k: run[k] for k in ("updates", "env_steps_per_seed", "seconds", "steps_per_sec", "compile_s")}
        row["ratio"] = run["steps_per_sec"] / base["steps_per_sec"]
        row["heldout_disjoint_from"] = ho["checked"]
        row["per_seed"] = ho["per_seed"]
        for m in METRICS:
            row[m] = interval([s[m] for s in ho["per_seed"]])
        row["cvar"] = row["heldout_cvar10_solve_rate"]
        results[name] = row
        c = row["cvar"]
        print(f"{name:5s}: {row['updates']} updates ({row['env_steps_per_seed']:,} env steps per seed), "
              f"{row['steps_per_sec']:,.0f} env-steps/s = {row['ratio']:.2f}x none; held-out CVaR-10% solve rate "
              f"{c[0]:.3f} [{c[1]:.3f}, {c[2]:.3f}], solve rate {row['heldout_success_rate'][0]:.3f} "
              f"[{row['heldout_success_rate'][1]:.3f}, {row['heldout_success_rate'][2]:.3f}], regret "
              f"{row['heldout_mean_regret'][0]:.3f}; checked disjoint from {ho['checked']} trained levels", flush=True)
    verdict = target(results)
    for name in ("plr", "accel"):
        v = verdict[name]
        print(f"{name} vs dr: CVaR-10% {v['cvar_gain']:+.3f} ({'met' if v['gain_met'] else 'not met'}: +0.10 with "
              f"intervals apart); speed {'met' if v['speed_met'] else 'not met'} (>= 0.90x none)")
    print(f"target {'met' if verdict['met'] else 'not met'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results, "target": verdict}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
