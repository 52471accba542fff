"""``python -m train``: train PPO on a jaxenvs environment and write a run directory.

    python -m train                                   # GridWorld-v0 with its tuned defaults
    python -m train --env PointEnv-v0 --seeds 4       # 4 seeds in one compiled program
    python -m train --resume runs/GridWorld-v0-20250101-120000 --total-timesteps 400000
    srun python -m train --distributed                # one process per host (SLURM), all their devices

The run is split into chunks of updates; each chunk is one call of one compiled program (all
seeds vmapped), and a progress line (steps, steps/s, mean return, ETA) is printed between chunks
(after every chunk on a terminal, at most every 2 s in a log), so printing costs nothing inside
the compiled program. A run directory ``<out>/<env>-<YYYYmmdd-HHMMSS>/`` receives:

* ``config.json``: the full :class:`~train.configs.PPOConfig` (``--config FILE`` reads one back);
* ``metrics.csv`` (one row per update: env steps, return/length mean and std over seeds, losses)
  and ``metrics.json`` (the same per seed);
* ``learning_curve.png``, ``policy.gif`` (seed 0, greedy), ``evaluation.json``;
* ``checkpoint.msgpack`` (params, optimizer and env states, keys, config, step count), written
  after every chunk that takes longer than ``--checkpoint-every`` seconds and at the end, and on
  Ctrl-C, so ``--resume`` continues from where the run stopped.

Devices: the env batch is split over every visible device (``jax.sharding``, data parallel:
one set of parameters, gradients averaged across devices) when their count divides
``--num-envs`` (otherwise over the largest count that does; ``--devices N`` picks the count).
``--distributed`` first starts ``jax.distributed``, from ``JAXENVS_COORDINATOR`` (``host:port``),
``JAXENVS_NUM_PROCESSES`` and ``JAXENVS_PROCESS_ID`` or, when those are unset, from what
``jax.distributed.initialize()`` detects (SLURM, Open MPI, Cloud TPU pod slices); the run then
spans every process's devices. Every process runs the same command; process 0 prints the
progress and writes the run directory, and every process prints a digest of its final
parameters (equal on all of them). ``--resume`` under ``--distributed`` needs the run directory on
a filesystem every process reads.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import sys
import time
from pathlib import Path

import jax
import numpy as np

from jaxenvs.parallel import env_mesh, initialize_distributed, to_host
from .checkpoint import CHECKPOINT, CONFIG, load_run, runner_template, save_checkpoint
from .configs import ALGOS, DEFAULT_ENV, DEFAULTS, PPOConfig, config_from_dict, get_config, load_config_file
from .distributed import is_main_process, params_digest, place_runner, put_global, replicated, runner_shardings
from .trainers import make_trainer

METRIC_KEYS = ("episode_return", "episode_length", "episodes", "pg_loss", "vf_loss", "entropy", "approx_kl", "clip_frac")


def chunk_length(num_updates: int, num_chunks: int) -> int:
    """Updates per chunk: the largest divisor of ``num_updates`` that is at most
    ``ceil(num_updates / num_chunks)``, so every chunk has the same length (one compilation)."""
    cap = max(1, math.ceil(num_updates / num_chunks))
    return max(d for d in range(1, cap + 1) if num_updates % d == 0)


def _parse(argv):
    p = argparse.ArgumentParser(prog="python -m train", description=__doc__.split("\n\n")[0])
    p.add_argument("--env", help=f"environment id (default {DEFAULT_ENV}); tuned: {', '.join(DEFAULTS)}")
    p.add_argument("--algo", choices=sorted(ALGOS), help="training algorithm (default ppo, or the --config file's \"algo\")")
    p.add_argument("--seeds", type=int, help="number of seeds trained in parallel (vmap)")
    p.add_argument("--seed", type=int, help="root PRNG seed")
    p.add_argument("--total-timesteps", type=int, help="env steps per seed")
    p.add_argument("--num-envs", type=int, help="parallel environments per seed")
    p.add_argument("--lr", type=float, help="Adam learning rate")
    p.add_argument("--chunks", type=int, help="number of jitted calls the run is split into (progress granularity)")
    p.add_argument("--config", metavar="FILE", help="JSON object of PPOConfig fields (flags override it)")
    p.add_argument("--out", default="runs", metavar="DIR", help="parent directory of run directories (default runs)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR (to its or a new --total-timesteps)")
    p.add_argument("--checkpoint-every", type=float, default=60.0, metavar="S", help="seconds between checkpoints")
    p.add_argument("--no-gif", action="store_true", help="skip policy.gif")
    p.add_argument(
        "--devices", type=int, metavar="N",
        help="split the env batch over the first N devices (default: all whose count divides --num-envs)",
    )
    p.add_argument(
        "--distributed", action="store_true",
        help="start jax.distributed (JAXENVS_COORDINATOR, JAXENVS_NUM_PROCESSES, JAXENVS_PROCESS_ID, or "
        "detected under SLURM / Open MPI / Cloud TPU) and train over every process's devices",
    )
    return p.parse_args(argv)


def _flag_overrides(args) -> dict:
    pairs = {
        "num_seeds": args.seeds,
        "seed": args.seed,
        "total_timesteps": args.total_timesteps,
        "num_envs": args.num_envs,
        "lr": args.lr,
        "num_chunks": args.chunks,
    }
    return {k: v for k, v in pairs.items() if v is not None}


class MetricsLog:
    """Per-update metrics of all seeds (float[num_updates, num_seeds] per name) and their files."""

    def __init__(self, run_dir: Path, steps_per_update: int, owner: bool = True):
        self.run_dir, self.steps_per_update, self.owner = run_dir, steps_per_update, owner  # owner: reads/writes files
        self.data: dict[str, list] = {k: [] for k in METRIC_KEYS}
        old = run_dir / "metrics.json"
        if owner and old.exists():
            self.data.update({k: list(v) for k, v in json.loads(old.read_text())["per_seed"].items()})

    def append(self, metrics: dict):
        for k in METRIC_KEYS:
            self.data[k].extend(np.asarray(metrics[k]).T.tolist())  # [seeds, L] -> L rows of seeds

    def array(self, k) -> np.ndarray:
        return np.array(self.data[k], np.float64)

    @property
    def env_steps(self) -> np.ndarray:
        return (np.arange(len(self.data["episode_return"])) + 1) * self.steps_per_update

    def latest(self, k) -> float:
        """Mean over seeds of the last update in which an episode ended (NaN if none yet)."""
        a = self.array(k)
        finite = np.flatnonzero(np.isfinite(a).any(axis=1)) if a.size else []
        return float(np.nanmean(a[finite[-1]])) if len(finite) else float("nan")

    def write(self):
        if not self.owner:
            return
        steps = self.env_steps
        json_data = {k: [[None if not math.isfinite(x) else x for x in row] for row in self.data[k]] for k in METRIC_KEYS}
        (self.run_dir / "metrics.json").write_text(json.dumps({"env_steps": steps.tolist(), "per_seed": json_data}))
        with open(self.run_dir / "metrics.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["update", "env_steps"] + [f"{k}_{s}" for k in METRIC_KEYS for s in ("mean", "std")])
            arrays = {k: self.array(k) for k in METRIC_KEYS}
            for i, n in enumerate(steps):
                row = [i + 1, int(n)]
                for k in METRIC_KEYS:
                    v = arrays[k][i]
                    v = v[np.isfinite(v)]
                    row += [f"{v.mean():.6g}", f"{v.std():.6g}"] if v.size else ["", ""]
                w.writerow(row)


def _progress(done, total, seeds, rate, log: MetricsLog, eta, end="\r"):
    line = (
        f"steps {done:,}/{total:,}" + (f" x{seeds} seeds" if seeds > 1 else "")
        + f" | {rate:,.0f} steps/s | return {log.latest('episode_return'):.4g}"
        + f" | length {log.latest('episode_length'):.3g} | ETA {eta:.0f}s"
    )
    print(line.ljust(100), end=end if sys.stdout.isatty() else "\n", flush=True)


def choose_mesh(num_envs: int, devices: int | None = None, distributed: bool = False):
    """The env mesh ``python -m train`` trains over (None: one device, no mesh).

    Default: every visible device, or the largest count of them that divides ``num_envs``.
    ``devices`` asks for that many (an error when it does not divide ``num_envs``); a
    ``distributed`` run uses every device of every process.
    """
    visible = jax.device_count()
    if devices is not None and not 1 <= devices <= visible:
        raise ValueError(f"--devices {devices}: {visible} device(s) visible ({jax.devices()[0].platform})")
    if distributed and devices not in (None, visible):
        raise ValueError(f"--distributed trains over all {visible} devices of all processes; leave out --devices")
    n = visible if devices is None else devices
    if num_envs % n:
        if devices is not None or distributed:
            raise ValueError(f"--num-envs {num_envs} does not split evenly over {n} devices; use a multiple of {n}")
        n = max(d for d in range(1, n + 1) if num_envs % d == 0)
    return env_mesh(n) if n > 1 or distributed else None


def _from_process_0(value: int) -> int:
    """Process 0's ``value`` (an int32) on every process: decisions that start collectives, and
    names every process must agree on. A single-process run returns ``value`` itself."""
    if jax.process_count() == 1:
        return value
    from jax.experimental import multihost_utils

    return int(multihost_utils.broadcast_one_to_all(np.int32(value)))


def _run_stamp() -> str:
    """``YYYYmmdd-HHMMSS`` of process 0's clock (the run directory's name on every process)."""
    return datetime.datetime.fromtimestamp(_from_process_0(int(time.time()))).strftime("%Y%m%d-%H%M%S")


def main(argv=None) -> int:
    args = _parse(argv)
    if args.distributed:
        initialize_distributed()  # before anything else asks JAX for its devices
    try:
        return _main(args)
    except (KeyError, ValueError, TypeError, FileNotFoundError) as e:
        # bad ids, config fields or paths: one line naming what was wrong, no traceback
        raise SystemExit(f"python -m train: error: {e.args[0] if isinstance(e, KeyError) else e}") from e


def _main(args) -> int:
    main_process = is_main_process()
    say = print if main_process else (lambda *a, **k: None)  # process 0 speaks for the run
    overrides = _flag_overrides(args)
    if args.resume:
        extra = sorted(k for k in overrides if k not in ("total_timesteps", "num_chunks"))
        if args.env or args.config or extra:
            raise SystemExit("--resume takes the run's own config; only --total-timesteps and --chunks may change it")
        run_dir = Path(args.resume)
        stored = config_from_dict(load_config_file(str(run_dir / CONFIG))) if run_dir.is_dir() else None
        mesh = choose_mesh(stored.num_envs if stored else 1, args.devices, args.distributed)
        trainer, runner, meta = load_run(run_dir, mesh=mesh, **overrides)
        runner = place_runner(runner, mesh)
        config = trainer.config
        if meta["update"] > config.num_updates:
            raise SystemExit(
                f"--resume: the checkpoint has done {meta['env_steps']:,} env steps, more than total_timesteps "
                f"{config.total_timesteps:,}; pass a larger --total-timesteps"
            )
        say(f"resuming {run_dir} at update {meta['update']} ({meta['env_steps']:,} env steps)")
    else:
        file_cfg = load_config_file(args.config) if args.config else {}
        env_id = args.env or file_cfg.pop("env_id", None) or DEFAULT_ENV
        file_cfg.pop("env_id", None)
        algo = file_cfg.pop("algo", "ppo")
        algo = args.algo or algo
        config = get_config(env_id, algo=algo, **{**file_cfg, **overrides})
        mesh = choose_mesh(config.num_envs, args.devices, args.distributed)
        trainer = make_trainer(config, mesh=mesh)
        stamp = _run_stamp()
        run_dir = Path(args.out) / f"{config.env_id.replace('/', '_')}-{stamp}"
        if main_process:
            run_dir.mkdir(parents=True, exist_ok=False)
        keys = jax.random.split(jax.random.key(config.seed), config.num_seeds)
        shardings = runner_shardings(runner_template(trainer), mesh) if mesh is not None else None
        runner = jax.jit(jax.vmap(trainer.init, in_axes=(0, None)), out_shardings=shardings)(keys, config.hparams())
    if main_process:
        (run_dir / CONFIG).write_text(json.dumps(config.to_dict(), indent=2) + "\n")

    hp = config.hparams()
    if mesh is not None:
        hp = put_global(hp, replicated(mesh))
    done_updates = int(to_host(runner.update).reshape(-1)[0])
    remaining = config.num_updates - done_updates
    log = MetricsLog(run_dir, config.steps_per_update, owner=main_process)
    where = "1 device" if mesh is None else f"{mesh.devices.size} {mesh.devices.flat[0].platform} devices"
    if jax.process_count() > 1:
        where += f" of {jax.process_count()} processes"
    say(
        f"{config.env_id}: {config.num_seeds} seed(s) x {config.num_envs} envs x {config.num_steps} steps per update, "
        f"{config.num_updates} updates ({config.num_updates * config.steps_per_update:,} env steps per seed) "
        f"on {where} -> {run_dir}"
    )
    t_start = time.perf_counter()
    train_s = 0.0
    if remaining > 0:
        length = chunk_length(remaining, config.num_chunks)
        body = jax.vmap(lambda r, h: trainer.run_updates(r, h, num_updates=length), in_axes=(0, None))
        if mesh is None:
            chunk = jax.jit(body)
        else:  # the runner keeps its layout; metrics come back whole on every device
            shardings = runner_shardings(runner, mesh)
            chunk = jax.jit(body, in_shardings=(shardings, replicated(mesh)), out_shardings=(shardings, replicated(mesh)))
        compiled = chunk.lower(runner, hp).compile()
        say(f"compiled {remaining // length} chunk(s) of {length} update(s) in {time.perf_counter() - t_start:.1f}s")
        last_save = last_print = time.perf_counter()
        try:
            for i in range(remaining // length):
                t0 = time.perf_counter()
                new_runner, metrics = compiled(runner, hp)
                metrics = to_host(metrics)  # waits for the chunk
                runner = new_runner
                train_s += time.perf_counter() - t0
                log.append(metrics)
                done = (done_updates + (i + 1) * length) * config.steps_per_update
                rate = (i + 1) * length * config.steps_per_update * config.num_seeds / train_s
                eta = train_s / (i + 1) * (remaining // length - i - 1)
                last_chunk = i == remaining // length - 1
                if main_process and (sys.stdout.isatty() or last_chunk or time.perf_counter() - last_print > 2.0):
                    _progress(done, config.num_updates * config.steps_per_update, config.num_seeds, rate, log, eta)
                    last_print = time.perf_counter()
                if _from_process_0(time.perf_counter() - last_save > args.checkpoint_every):  # the same on every process
                    save_checkpoint(run_dir / CHECKPOINT, config, runner)
                    log.write()
                    last_save = time.perf_counter()
        except KeyboardInterrupt:
            if jax.process_count() > 1:  # the other processes cannot join a gather now
                say(f"\ninterrupted: continue from the last checkpoint with  python -m train --distributed --resume {run_dir}")
                return 130
            save_checkpoint(run_dir / CHECKPOINT, config, runner)
            log.write()
            print(f"\ninterrupted: checkpoint saved; continue with  python -m train --resume {run_dir}")
            return 130
        say()
        steps_run = remaining * config.steps_per_update * config.num_seeds
        say(f"trained {steps_run:,} env steps in {train_s:.1f}s ({steps_run / max(train_s, 1e-9):,.0f} steps/s), "
            f"{time.perf_counter() - t_start:.1f}s with compilation")

    ckpt = save_checkpoint(run_dir / CHECKPOINT, config, runner)
    log.write()
    if jax.process_count() > 1:
        print(f"process {jax.process_index()} of {jax.process_count()}: parameters {params_digest(runner.params)}", flush=True)
    if not main_process:
        return 0
    from .evaluate import evaluate
    from .plotting import plot_learning_curve, policy_gif

    curve = plot_learning_curve(
        log.env_steps, log.array("episode_return"), log.array("episode_length"), run_dir / "learning_curve.png", config.env_id
    )
    params = to_host(runner.params)  # replicated: this process's own copy
    result = evaluate(trainer, params)
    (run_dir / "evaluation.json").write_text(json.dumps(result, indent=2) + "\n")
    gif = None
    if not args.no_gif:
        params0 = jax.tree.map(lambda x: x[0], params)
        gif = policy_gif(trainer, params0, run_dir / "policy.gif", jax.random.key(config.seed))
    print(f"evaluation: solved={result['solved']}  " + "; ".join(_summary(m) for m in result["seeds"]))
    print(f"learning curve: {curve}")
    print(f"policy GIF:     {gif if gif else '(not written)'}")
    print(f"checkpoint:     {ckpt}")
    print(f"evaluate again: python -m train.evaluate {run_dir}")
    return 0


def _summary(metrics: dict) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in metrics.items() if k != "solved")


if __name__ == "__main__":
    sys.exit(main())
