"""``jaxenvs bench [ID]``: steps per second with jit + vmap + scan and random actions."""

from __future__ import annotations

import argparse

import numpy as np

from jaxenvs.rollout import benchmark
from .args import Command, add_env_args, positive_int, seed_arg
from .envs import make_env, out_of_memory

BENCH_DEFAULT_ENV = "GridWorld-v0"  # what `jaxenvs bench` times without an ID


def run(args) -> None:
    if args.env_id is None:
        args.env_id = BENCH_DEFAULT_ENV
        print(f"no ID given: timing {BENCH_DEFAULT_ENV} (jaxenvs list shows the others)")
    env = make_env(args.env_id, args.kwarg)
    try:
        res = benchmark(env, num_envs=args.num_envs, num_steps=args.steps, seed=args.seed, repeats=args.repeats)
    except Exception as e:
        oom = out_of_memory(e, args.num_envs)
        if oom is None:
            raise
        raise oom from None
    import jax

    print(
        f"{env.spec.id}: {res.num_envs} envs x {res.num_steps} steps, random actions, jit+vmap+scan "
        f"on {jax.devices()[0].platform}"
    )
    print(f"compile: {res.compile_s:.2f} s (excluded)")
    print(f"run: median {np.median(res.run_s):.4f} s of {len(res.run_s)}")
    print(f"{res.steps_per_s:,.0f} steps/s")



def arguments(p: argparse.ArgumentParser) -> None:
    add_env_args(p, optional=True)
    p.add_argument("--num-envs", type=positive_int, default=1024, metavar="N", help="parallel envs")
    p.add_argument("--steps", type=positive_int, default=1000, metavar="T", help="steps per env")
    p.add_argument("--repeats", type=positive_int, default=3, help="timed runs; the median counts")
    p.add_argument("--seed", type=seed_arg, default=0, metavar="S", help="random seed, in [0, 2**63)")


COMMAND = Command(
    "bench", run=run, arguments=arguments,
    help="steps per second with jit + vmap + scan and random actions",
    description=f"Steps per second of jax.vmap(env.step) inside jit + lax.scan with random actions (compile "
        f"time excluded). Without an ID: {BENCH_DEFAULT_ENV}.",
)
