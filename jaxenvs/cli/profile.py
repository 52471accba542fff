"""``jaxenvs profile ID``: compile time, steps/s against num_envs, memory and wrapper costs
(`jaxenvs.profile`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from jaxenvs._optional import require
from jaxenvs.profile import DEFAULT_NUM_ENVS, file_stem, profile
from .args import Command, Failure, UsageError, add_env_args, non_negative_int, positive_int, seed_arg
from .envs import import_path_for, make_env, message, out_of_memory


def run(args) -> None:
    import_path_for(args.env_id)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {args.out!r} is a file; --out names the folder the profile files go into")
    if not args.no_plot:
        try:
            require("matplotlib", extra="train", purpose="jaxenvs profile's plot (or pass --no-plot)")
        except ImportError as e:
            raise Failure(message(e)) from e
    env = make_env(args.env_id, args.kwarg)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise Failure(f"--out {args.out!r}: cannot create it ({e.strerror})") from e

    stem = file_stem(env.spec.id if getattr(env, "spec", None) is not None else type(env.unwrapped).__name__)
    where = out.resolve()
    names = f"{stem}.json" + ("" if args.no_plot else f" and {stem}.png")
    print(f"writing {names} into {where}" + (" (the current folder; --out DIR puts them elsewhere)" if args.out == "." else ""))
    try:
        report = profile(
            env, num_envs=args.num_envs, num_steps=args.steps, repeats=args.repeats, layers=not args.no_wrappers,
            seed=args.seed, progress=lambda line: print(line, flush=True), ops=args.ops,
        )
    except Exception as e:
        oom = out_of_memory(e, args.num_envs)
        if oom is None:
            raise
        raise oom from None
    stem = file_stem(report.env_id)
    print(f"wrote {Path(report.save_json(out / (stem + '.json'))).resolve()}")
    if not args.no_plot:
        print(f"wrote {Path(report.plot(out / (stem + '.png'))).resolve()}")
    print(report.summary())



def arguments(p: argparse.ArgumentParser) -> None:
    add_env_args(p)
    p.add_argument(
        "--num-envs", type=positive_int, nargs="+", default=list(DEFAULT_NUM_ENVS), metavar="N",
        help="batch sizes of the sweep (default: 1 4 16 ... 65536)",
    )
    p.add_argument(
        "--steps", type=positive_int, default=None, metavar="T",
        help="steps per timed run (default: 2**18 // num_envs, clipped to [16, 1000])",
    )
    p.add_argument("--repeats", type=positive_int, default=3, help="timed runs per point; the median counts")
    p.add_argument("--out", default=".", metavar="DIR", help="folder for profile_<ID>.json and profile_<ID>.png (default: the current folder; the command says where it wrote)")
    p.add_argument("--no-plot", action="store_true", help="write the JSON file only (no matplotlib needed)")
    p.add_argument("--no-wrappers", action="store_true", help="skip profiling each wrapper layer")
    p.add_argument("--seed", type=seed_arg, default=0, metavar="S", help="random seed, in [0, 2**63)")
    p.add_argument(
        "--ops", type=non_negative_int, default=0, metavar="N",
        help="also print (and write) the N operations that take the most time in the jax.vmap rollout at the "
             "largest --num-envs, with the env code each came from (JAX's profiler; default 0: none)",
    )


COMMAND = Command(
    "profile", run=run, arguments=arguments,
    help="compile time, steps/s against num_envs, memory and wrapper costs of an environment",
    description="Trace, lower and compile times of reset, step and a vmapped scan rollout; steps/s against "
        "num_envs for jax.vmap(env.step) and jaxenvs.VectorEnv; bytes per env state and XLA's planned peak "
        "memory; what each wrapper adds. Writes profile_<ID>.json and .png into --out and prints a one-line "
        "summary. A 'module:ns/Name-v0' ID imports module from the current directory first.",
)
