"""One run of ``jaxenvs-train``, step by step: its run directory, then `Run` (set up a new run or
resume one, train chunk by chunk with progress lines and checkpoints). `Run`'s other parts live
beside it: the chunk program in `train.app.chunks`, the outputs in `train.app.outputs`, the devices in
`train.distributed`, the printed phases in `train.app.timing`.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import sys
import time
from pathlib import Path

import jax
import numpy as np

import jaxenvs
from jaxenvs._fast_compile import compiler_options
from jaxenvs.prng import key_on_host, split_on_host
from jaxenvs.sharding import to_host
from jaxenvs.games.search import supports_search
from ..checkpoint import CHECKPOINT, CONFIG, OUTPUTS, check_run_dir, load_run, runner_template, save_checkpoint, write_text_atomic
from .chunks import ChunkProgram, chunk_plan
from ..configs import ALGORITHMS, DEFAULT_ENV, RUN_KEY, RunSettings, config_from_dict, get_config, load_config_file, run_record, run_settings_from_dict
from ..distributed import choose_mesh, from_process_0, place_runner, put_global, replicated, runner_shardings
from .envids import run_dir_stem
from .exits import Diverged, StorageError, UsageError
from .metrics_log import MetricsLog, first_nonfinite_update
from .outputs import RunOutputs, progress_line
from .parser import config_overrides, flag_of, split_run_settings
from .timing import Background, Say
from ..trainers import make_trainer
from ..grading import progress_metrics, progress_note

__all__ = ["Run", "seed_keys", "make_run_dir", "check_out_dir", "probe_run_dir", "outputs_complete"]


# ----------------------------------------------------------------------------------------------
# The run directory


def _run_stamp() -> str:
    """``YYYYmmdd-HHMMSS`` of process 0's clock (the run directory's name on every process)."""
    return datetime.datetime.fromtimestamp(from_process_0(int(time.time()))).strftime("%Y%m%d-%H%M%S")


def check_out_dir(out: str) -> Path:
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out {out!r} is a file; --out names the directory that run directories go into")
    return path


def make_run_dir(out: Path, env_id: str, main_process: bool = True) -> Path:
    """A new, empty ``<out>/<env>-<YYYYmmdd-HHMMSS>[-k]`` (``-2``, ``-3``, ... when runs start in
    the same second): ``mkdir`` without ``exist_ok`` claims the name atomically."""
    base = f"{run_dir_stem(env_id)}-{_run_stamp()}"
    k = 1
    if main_process:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"--out {str(out)!r}: cannot create it ({e.strerror})") from None
        while True:
            try:
                (out / (base if k == 1 else f"{base}-{k}")).mkdir()
                break
            except FileExistsError:
                k += 1
    k = from_process_0(k)
    return out / (base if k == 1 else f"{base}-{k}")


def probe_run_dir(run_dir: Path, need_bytes: int) -> None:
    """Check, before training, that ``run_dir`` takes a new file and has room for a checkpoint of
    ``need_bytes`` (twice: the new one is written beside the old before replacing it); a
    `StorageError` naming the directory otherwise."""
    probe = run_dir / f".write-probe.{os.getpid()}"
    try:
        probe.write_bytes(b"x")
        probe.unlink()
    except OSError as e:
        raise StorageError(f"cannot write into the run directory {run_dir} ({e.strerror or e}); "
                           f"nothing was trained. Make it writable, or choose another --out") from None
    free = shutil.disk_usage(run_dir).free
    if free < 2 * need_bytes:
        raise StorageError(f"the file system of {run_dir} has {free:,} bytes free, less than the {2 * need_bytes:,} a "
                           f"checkpoint needs; nothing was trained. Free some space, or choose another --out")


def outputs_complete(run_dir: Path, update: int, no_eval: bool, no_gif: bool) -> list[str]:
    """The outputs of a run trained to ``update`` that are missing (``[]``: complete): the metrics
    files (written with every checkpoint), those written after the last checkpoint that are absent
    or older than it (the learning curve, the evaluation unless ``no_eval``), every file the run's
    `train.checkpoint.OUTPUTS` record lists, and, without a record of ``update`` (a run stopped, or killed, before it
    wrote the record: the learning curve may have been finished by its helper process after the kill),
    ``policy.gif`` unless ``no_gif``, else the record itself. The record is written after every other
    output, so a kill at any point leaves a run that is not complete."""
    ckpt = (run_dir / CHECKPOINT).stat().st_mtime

    def absent(name):
        return not (run_dir / name).exists() or (run_dir / name).stat().st_mtime < ckpt

    missing = [n for n in ("metrics.json", "metrics.csv") if not (run_dir / n).exists()]
    missing += [n for n in ["learning_curve.png"] + ([] if no_eval else ["evaluation.json"]) if absent(n)]
    try:
        record = json.loads((run_dir / OUTPUTS).read_text())
        listed = [str(n) for n in record["outputs"]] if record.get("update") == update else None
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        listed = None
    if listed is None:
        missing += ["policy.gif"] if not no_gif and absent("policy.gif") else []
        return missing or [OUTPUTS]
    return missing + [n for n in listed if n not in missing and not (run_dir / n).exists()]


def _check_play_fields(config, flags: dict) -> None:
    """A `UsageError` before anything is built when ``play_search`` or ``play_lookahead`` (what the
    trained policy plays with, `train.policy`) is set for an environment that tree search and
    look-ahead cannot play (`jaxenvs.games.search.supports_search`): ``jaxenvs play`` would refuse
    the run afterwards."""
    given = {name: getattr(config, name, 0) for name in ("play_search", "play_lookahead")}
    given = {name: value for name, value in given.items() if value}
    if not given:
        return

    if supports_search(jaxenvs.make(config.env_id, **config.env_kwargs)):
        return
    named = ", ".join(f"{flag_of(name)} {value}" if name in flags else f"{name} {value} (from --config)"
                      for name, value in given.items())
    raise UsageError(
        f"{named}: tree search and look-ahead play two-player zero-sum turn-based games of perfect information "
        f"whose class rebuilds its state from an observation (TicTacToe-v0, ConnectFour-v0); {config.env_id} is not "
        f"one: leave {'them' if len(given) > 1 else 'it'} out"
    )


def seed_keys(seed: int, num_seeds: int) -> jax.Array:
    """The init keys of a run's seeds (shape ``(num_seeds,)``): seed i of a run with root seed ``seed``
    gets the key a run of one seed with root seed ``seed + i`` gets (``jax.random.split(jax.random.key(
    seed + i), 1)[0]``), so seed i of ``--seeds N`` starts where ``--seed i`` alone starts. Made on the
    host (nothing compiled)."""
    keys = [split_on_host(key_on_host(seed + i), 1)[0] for i in range(num_seeds)]
    data = np.stack([np.asarray(jax.random.key_data(k)) for k in keys])
    return jax.random.wrap_key_data(data, impl=jax.random.key_impl(keys[0]))


def _tree_bytes(tree) -> int:
    """Bytes of the arrays of ``tree`` (PRNG keys as their key data): about a checkpoint's size."""
    def nbytes(x):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x = jax.random.key_data(x)
        return int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize

    return sum(nbytes(x) for x in jax.tree.leaves(tree))


# ----------------------------------------------------------------------------------------------
# The run, step by step


@dataclasses.dataclass
class Run(ChunkProgram, RunOutputs):
    args: argparse.Namespace
    say: Say
    main_process: bool
    config: object = None
    settings: RunSettings | None = None
    trainer: object = None
    runner: object = None
    mesh: object = None
    run_dir: Path | None = None
    created: bool = False  # this command created run_dir (removed again if nothing usable was written)
    resumed_at: int = 0
    log: MetricsLog | None = None
    chunk_job: tuple | None = None  # (plan, Background compiling its program) started by start_new
    compile_log: object = None  # train.xla.CompileLog of this command
    cache_dir: Path | None = None  # JAX's persistent compilation cache in use (None: off)
    curve: object = None  # train.app.curve_drawing.CurveProcess drawing the learning curve (None: drawn in this process)
    gif_job: object = None  # train.app.timing.Background compiling the GIF's programs during the training

    # -- setting up ----------------------------------------------------------------------------
    def new_config(self) -> tuple[object, RunSettings]:
        """``(config, run settings)`` of a new run: defaults < the env's tuned values < ``--config`` < flags."""
        args = self.args
        file_cfg = load_config_file(args.config, algo=args.algo) if args.config else {}
        file_run = run_settings_from_dict(file_cfg)
        file_cfg.pop(RUN_KEY, None)
        overrides, run_overrides = split_run_settings(config_overrides(args))
        env_id = overrides.pop("env_id", None) or file_cfg.pop("env_id", None) or DEFAULT_ENV
        file_cfg.pop("env_id", None)
        algo = args.algo or file_cfg.pop("algo", "ppo")
        file_cfg.pop("algo", None)
        cls = ALGORITHMS[algo].config
        foreign = sorted(k for k in overrides if k not in {f.name for f in dataclasses.fields(cls)})
        if foreign:
            raise UsageError(f"--algo {algo} has no field(s) {foreign}; leave those flags out")
        config = get_config(env_id, algo=algo, **{**file_cfg, **overrides})
        _check_play_fields(config, overrides)
        return config, file_run.replace(**run_overrides)

    def start_new(self, after_tracing=None):
        """Set up a new run; ``after_tracing()``, when given, is called once its programs are
        traced (the command starts its background import of matplotlib there)."""
        out = check_out_dir(self.args.out)
        self.config, self.settings = config, settings = self.new_config()
        self.mesh = choose_mesh(config.num_envs, self.args.devices, self.args.distributed)
        with self.say.phase(f"building {config.env_id} and initialising {settings.num_seeds} seed(s)", "init"):
            self.trainer = trainer = make_trainer(config, mesh=self.mesh)
            num_seeds = settings.num_seeds

            def init_seeds(keys, hp):  # one program for every seed
                return jax.vmap(trainer.init, in_axes=(0, None))(keys, hp)

            shardings = None
            if self.mesh is not None:
                shardings = runner_shardings(runner_template(trainer, num_seeds), self.mesh)
            key, hp = seed_keys(settings.seed, num_seeds), config.hparams()
            # the init program runs once, for a millisecond: XLA's cheapest compile (no LLVM
            # optimisation) takes half the time; its float rounding may differ from the optimised
            # compile's in the last bit (|difference| < 1e-6 in the initial parameters, as between
            # CPUs with and without fused multiply-add); the environments' states and keys are equal
            options = compiler_options(jax.default_backend())
            plan = chunk_plan(config.num_updates, settings.num_chunks)
            traced = jax.jit(init_seeds, out_shardings=shardings).trace(key, hp)
            template = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), traced.out_info)
            lowered = traced.lower()
            init_job = Background(lambda: lowered.compile(options), "jaxenvs-compile")  # XLA compiles it while Python traces the next
            # the training program needs only the runner's shapes: it compiles while init runs
            self.chunk_job = (plan, self._start_chunk_program(plan, template))
            if after_tracing is not None:
                after_tracing()
            self.runner = init_job.result()(key, hp)
        self.run_dir = make_run_dir(out, config.env_id, self.main_process)
        self.created = True
        if self.main_process:
            probe_run_dir(self.run_dir, _tree_bytes(self.runner))
        self.log = MetricsLog(self.run_dir, config.steps_per_update, owner=self.main_process, num_seeds=settings.num_seeds)
        self.save()  # a run directory --resume can use from the start (update 0)

    def start_resume(self):
        args = self.args
        overrides = config_overrides(args)
        extra = sorted(k for k in overrides if k not in ("total_timesteps", "num_chunks"))
        if args.config or args.algo or extra:
            given = (["--config"] if args.config else []) + (["--algo"] if args.algo else []) + [flag_of(k) for k in extra]
            raise UsageError(f"--resume takes the run's own config; only --total-timesteps and --chunks may change it (got {', '.join(given)})")
        self.run_dir = check_run_dir(args.resume)
        stored = config_from_dict(load_config_file(str(self.run_dir / CONFIG)))
        self.mesh = choose_mesh(stored.num_envs, args.devices, args.distributed)
        with self.say.phase(f"loading {self.run_dir / CHECKPOINT}", "init"):
            self.trainer, runner, meta = load_run(self.run_dir, mesh=self.mesh, **overrides)
            self.runner = place_runner(runner, self.mesh)
        self.config, self.settings = self.trainer.config, meta["run"]
        self.resumed_at = meta["update"]
        if meta["update"] > self.config.num_updates:
            raise UsageError(
                f"--resume: the checkpoint has done {meta['env_steps']:,} env steps, more than total_timesteps "
                f"{self.config.total_timesteps:,}; pass a larger --total-timesteps"
            )
        if self.main_process:
            probe_run_dir(self.run_dir, _tree_bytes(self.runner))
        self.log = MetricsLog(self.run_dir, self.config.steps_per_update, owner=self.main_process,
                              updates_done=meta["update"], num_seeds=self.settings.num_seeds)
        if self.log.rebuilt:
            self.say(f"warning: {self.run_dir / 'metrics.json'} was missing; the {self.log.rebuilt} update(s) the "
                     "checkpoint has done are recorded without values (their env steps stay right)")

    def save(self):
        """Metrics, then checkpoint, then config: each file atomic; a resume truncates the
        metrics to the checkpoint's update, so a crash between them loses nothing that matters."""
        try:
            self.log.write()
            save_checkpoint(self.run_dir / CHECKPOINT, self.config, self.runner, self.settings)
            if self.main_process:
                write_text_atomic(self.run_dir / CONFIG, json.dumps(run_record(self.config, self.settings), indent=2) + "\n")
        except OSError as e:
            raise StorageError(f"cannot write {e.filename or self.run_dir}: {e.strerror or e}") from None

    # -- training ------------------------------------------------------------------------------
    def train(self) -> None:
        config, say = self.config, self.say
        num_seeds = self.settings.num_seeds
        done_updates = int(to_host(self.runner.update).reshape(-1)[0])
        remaining = config.num_updates - done_updates
        plan = chunk_plan(remaining, self.settings.num_chunks)
        if len(plan) != self.settings.num_chunks:
            say(f"{remaining} update(s) to run: {len(plan)} chunk(s), not {self.settings.num_chunks} (a chunk holds at least one update)")
            self.settings = self.settings.replace(num_chunks=len(plan))  # config.json tells the truth
        where = "1 device" if self.mesh is None else f"{self.mesh.devices.size} {self.mesh.devices.flat[0].platform} devices"
        if jax.process_count() > 1:
            where += f" of {jax.process_count()} processes"
        say(
            f"{config.env_id}: {num_seeds} seed(s) x {config.num_envs} envs x {config.num_steps} steps per update, "
            f"{config.num_updates} updates ({config.num_updates * config.steps_per_update:,} env steps per seed) in "
            f"{len(plan)} chunk(s) on {where} -> {self.run_dir}"
        )

        if self.main_process and not self.args.no_eval:
            print(progress_note(config.env_id))
        total = config.num_updates * config.steps_per_update
        if done_updates == 0 and not self.args.no_eval:  # the untrained policy: where each curve starts
            params = to_host(self.runner.params)  # a collective in a multi-process run
            if self.main_process:
                with say.phase("evaluating the untrained policy", "progress evaluation"):
                    self.log.progress = [{"env_steps": 0, **progress_metrics(self.trainer, params)}]
        warm_up = self.chunk_job is not None and self.main_process
        if warm_up:
            self.warm_up_evaluation()
        run_chunk = self.compile_chunks(plan)
        if warm_up:
            self.start_gif_compile()
        last_save = last_print = time.perf_counter()
        train_s = eval_s = 0.0
        for i, length in enumerate(plan):
            t0 = time.perf_counter()
            new_runner, metrics = run_chunk(self.runner, self.hparams, length)
            metrics = {k: np.asarray(v)[:, :length] for k, v in to_host(metrics).items()}  # waits for the chunk
            train_s += time.perf_counter() - t0
            bad = first_nonfinite_update(metrics)
            if bad is not None:
                self.diverged(done_updates + bad + 1)
            self.runner = new_runner
            done_updates += length
            self.log.append(metrics)
            t1 = time.perf_counter()
            params = to_host(self.runner.params)  # a collective in a multi-process run
            progress = progress_metrics(self.trainer, params) if self.main_process and not self.args.no_eval else None
            if progress is not None:
                self.log.progress.append({"env_steps": done_updates * config.steps_per_update, **progress})
            eval_s += time.perf_counter() - t1
            elapsed = train_s + eval_s
            rate = sum(plan[: i + 1]) * config.steps_per_update * num_seeds / max(train_s, 1e-9)
            eta = elapsed / sum(plan[: i + 1]) * sum(plan[i + 1:])
            last = i == len(plan) - 1
            if self.main_process and (sys.stdout.isatty() or last or time.perf_counter() - last_print > 2.0):
                line = progress_line(done_updates * config.steps_per_update, total, num_seeds, rate, self.log, eta, progress)
                line = f"chunk {i + 1}/{len(plan)} | " + line
                print(line.ljust(110), end="\r" if sys.stdout.isatty() and not last else "\n", flush=True)
                last_print = time.perf_counter()
            if not last and from_process_0(time.perf_counter() - last_save > self.args.checkpoint_every):
                self.save()  # the same decision on every process
                last_save = time.perf_counter()
        self.save()
        steps_run = remaining * config.steps_per_update * num_seeds
        say.times["train"] = train_s
        say.times["progress evaluation"] = say.times.get("progress evaluation", 0.0) + eval_s
        say(f"trained {steps_run:,} env steps in {train_s:.1f}s ({steps_run / max(train_s, 1e-9):,.0f} steps/s); "
            f"progress evaluations {eval_s:.1f}s")

    @property
    def hparams(self):
        hp = self.config.hparams()
        return put_global(hp, replicated(self.mesh)) if self.mesh is not None else hp

    def diverged(self, update: int):
        """Stop on non-finite numbers: keep the last good state (this chunk's start) as the
        checkpoint, never the poisoned one."""
        good = int(to_host(self.runner.update).reshape(-1)[0])
        self.save()
        raise Diverged(
            f"training diverged: a loss, gradient or parameter became NaN or infinite in update {update} "
            f"(env step {update * self.config.steps_per_update:,}); stopped. {self.run_dir / CHECKPOINT} holds the "
            f"last good state (update {good}). Try a smaller --lr or --max-grad-norm, or a smaller --reward-scale."
        )

