"""What XLA:CPU's compile options trade on the main job's training program: compile seconds against
training seconds, in one process (the same lowered program compiled once per option set).

    python benchmarks/compile_options.py                    # GridWorld-v0, its tuned defaults
    python benchmarks/compile_options.py --env PointEnv-v0

Each option set compiles the whole training program (every update of the run, one seed) from the
same lowering and runs it twice (the first run includes nothing else: the compile is timed apart);
the figures print with their ratio to XLA's defaults, and the mean return of the last updates shows
that the run learned the same. The persistent compilation cache is off (every compile is real).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("JAXENVS_CACHE_DIR", "off")

OPTIONS = {
    "default": None,
    "no expensive LLVM passes": {"xla_llvm_disable_expensive_passes": True},
    "backend O1": {"xla_backend_optimization_level": 1},
    "O1, no expensive passes": {"xla_backend_optimization_level": 1, "xla_llvm_disable_expensive_passes": True},
    "O0, no expensive passes": {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True},
}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="GridWorld-v0")
    args = p.parse_args(argv)
    import jax

    from jaxenvs.train.configs import get_config
    from jaxenvs.train.trainers import make_trainer

    cfg = get_config(args.env)
    trainer = make_trainer(cfg)
    hp, n = cfg.hparams(), cfg.num_updates
    runner = jax.block_until_ready(jax.jit(trainer.init)(jax.random.key(0), hp))
    t0 = time.perf_counter()
    lowered = jax.jit(lambda r, h: trainer._run_updates(r, h, n)).lower(runner, hp)
    print(f"{args.env}: {n} updates of {cfg.steps_per_update} env steps; trace + lower {time.perf_counter() - t0:.2f} s; "
          f"load {os.getloadavg()[0]:.2f}", flush=True)
    out = {}
    for name, opts in OPTIONS.items():
        t0 = time.perf_counter()
        compiled = lowered.compile(compiler_options=opts) if opts else lowered.compile()
        t1 = time.perf_counter()
        runs = []
        for _ in range(2):
            s = time.perf_counter()
            _, metrics = jax.block_until_ready(compiled(runner, hp))
            runs.append(time.perf_counter() - s)
        ret = float(metrics["episode_return"][-5:].mean())
        out[name] = {"compile_s": t1 - t0, "train_s": min(runs), "final_return": ret}
        base = out["default"]
        print(f"{name:<26} compile {t1 - t0:6.2f} s ({(t1 - t0) / base['compile_s']:.2f}x)   train {min(runs):6.2f} s "
              f"({min(runs) / base['train_s']:.2f}x)   compile + train {t1 - t0 + min(runs):6.2f} s   "
              f"last return {ret:.3f}", flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f}")
    return out


if __name__ == "__main__":
    main()
