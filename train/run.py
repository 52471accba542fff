"""One run of ``jaxenvs-train``, step by step: the chunks the updates are split into, the devices,
the run directory, then `Run` (set up a new run or resume one, compile the chunk program, train
chunk by chunk with progress lines and checkpoints, evaluate and write the outputs).

This file is long because `Run` is one sequence of steps that share its state; each step is a
method of a few dozen lines.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import jax
import numpy as np

from jaxenvs.sharding import env_mesh, to_host
from .checkpoint import CHECKPOINT, CONFIG, check_run_dir, load_run, runner_template, save_checkpoint, write_text_atomic
from .configs import ALGORITHMS, DEFAULT_ENV, RUN_KEY, RunSettings, config_from_dict, get_config, load_config_file, run_record, run_settings_from_dict
from .distributed import params_digest, place_runner, put_global, replicated, runner_shardings
from .envids import from_here, run_dir_stem
from .exits import Diverged, StorageError, UsageError
from .metrics_log import MetricsLog, first_nonfinite_update
from .parser import PROG, config_overrides, flag_of, split_run_settings
from .trainers import make_trainer
from . import tuned


__all__ = ["chunk_length", "chunk_plan", "choose_mesh", "Say", "Run", "make_run_dir", "check_out_dir", "Background"]

EVALUATE = "python -m jaxenvs.train.evaluate"


# ----------------------------------------------------------------------------------------------
# Chunks


def chunk_length(num_updates: int, num_chunks: int) -> int:
    """Updates per chunk when all chunks must have one length: the largest divisor of
    ``num_updates`` that is at most ``ceil(num_updates / num_chunks)`` (benchmarks/train_speed.py
    times one compiled program so; ``jaxenvs-train`` uses `chunk_plan`)."""
    cap = max(1, math.ceil(num_updates / num_chunks))
    return max(d for d in range(1, cap + 1) if num_updates % d == 0)


def chunk_plan(num_updates: int, num_chunks: int) -> list[int]:
    """The lengths of the chunks ``num_updates`` updates split into: exactly
    ``min(num_chunks, num_updates)`` chunks whose lengths differ by at most one (longer ones
    first), so ``--chunks N`` makes N calls (of one compiled program: see ``Run.compile_chunks``)."""
    n = max(1, min(num_chunks, num_updates))
    q, r = divmod(num_updates, n)
    return [q + 1] * r + [q] * (n - r)


# ----------------------------------------------------------------------------------------------
# Output


class Say:
    """Printing of process 0, with phases: ``with say.phase("compiling"):`` prints what runs
    and, when it ends, how long it took (so no phase longer than a second is silent)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.times: dict[str, float] = {}
        self._open = False  # a terminal line "label ... " waits for its phase's "done in"

    def __call__(self, *a, **k):
        if self.enabled:
            if self._open:  # another message inside a phase: it gets a line of its own
                print(flush=True)
                self._open = False
            print(*a, **k, flush=True)

    def phase(self, label: str, key: str):
        say = self

        class _Phase:
            def __enter__(self):
                self.t0 = time.perf_counter()
                tty = sys.stdout.isatty()
                say(f"{label} ...", end=" " if tty else "\n")
                say._open = tty and say.enabled
                return self

            def __exit__(self, kind, *_):
                dt = time.perf_counter() - self.t0
                say.times[key] = say.times.get(key, 0.0) + dt
                same_line, say._open = say._open, False
                if kind is None:  # the label again unless "done in" ends the phase's own line
                    say(f"{'' if same_line else label + ': '}done in {dt:.1f}s")
                elif same_line:
                    say("")
                return False

        return _Phase()


class Background:
    """``fn()`` in a daemon thread, started at once; `result` waits for it and returns its value or
    raises what it raised (KeyboardInterrupt included). Meant for work that runs without Python's
    GIL: XLA's compile of a program lowered on the main thread (tracing and lowering are Python, and
    two threads doing them only take turns), image encoding; it then runs on another core.

    A process must not end by interpreter shutdown while one of these is still inside XLA (a Ctrl-C
    during the background compile): the daemon thread is torn down in C++ code and the process
    aborts (``FATAL: exception not rethrown``, exit 134). `any_running` tells the command to leave
    with ``os._exit`` instead (`train.__main__`)."""

    _live: "set[Background]" = set()

    def __init__(self, fn, name: str = "jaxenvs-background"):
        self.started = time.perf_counter()
        self.duration: float | None = None
        self._value = self._error = None
        self._thread = threading.Thread(target=self._run, args=(fn,), name=name, daemon=True)
        Background._live.add(self)
        self._thread.start()

    @classmethod
    def any_running(cls) -> bool:
        """Whether a background job of this process is still running."""
        cls._live = {job for job in cls._live if job._thread.is_alive()}
        return bool(cls._live)

    def _run(self, fn):
        try:
            self._value = fn()
        except BaseException as e:  # re-raised by result(), in the thread that waits
            self._error = e
        finally:
            self.duration = time.perf_counter() - self.started

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def _progress_line(done, total, seeds, rate, log: MetricsLog, eta, progress: dict | None) -> str:
    from .evaluate import format_progress

    parts = [f"steps {done:,}/{total:,}" + (f" x{seeds} seeds" if seeds > 1 else ""), f"{rate:,.0f} steps/s"]
    if progress:
        parts.append(format_progress(progress))
    else:
        parts.append(f"return {log.latest('episode_return'):.4g} | length {log.latest('episode_length'):.3g}")
    parts.append(f"ETA {eta:.0f}s")
    return " | ".join(parts)


# ----------------------------------------------------------------------------------------------
# Devices and run directories


def choose_mesh(num_envs: int, devices: int | None = None, distributed: bool = False):
    """The env mesh ``jaxenvs-train`` trains over (None: one device, no mesh).

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
    k = _from_process_0(k)
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


def outputs_complete(run_dir: Path, no_eval: bool) -> list[str]:
    """The expected outputs of a finished run that are missing or older than its checkpoint
    (``[]``: complete): the metrics files (written with every checkpoint, just before it), then what
    is written after the last one (the learning curve, and the evaluation unless ``no_eval``).
    ``policy.gif`` is left out: it is optional (``--no-gif``, environments without a render)."""
    ckpt = (run_dir / CHECKPOINT).stat().st_mtime
    after = ["learning_curve.png"] + ([] if no_eval else ["evaluation.json"])
    missing = [n for n in ("metrics.json", "metrics.csv") if not (run_dir / n).exists()]
    return missing + [n for n in after if not (run_dir / n).exists() or (run_dir / n).stat().st_mtime < ckpt]


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
class Run:
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
        return get_config(env_id, algo=algo, **{**file_cfg, **overrides}), file_run.replace(**run_overrides)

    def start_new(self):
        out = check_out_dir(self.args.out)
        self.config, self.settings = config, settings = self.new_config()
        self.mesh = choose_mesh(config.num_envs, self.args.devices, self.args.distributed)
        with self.say.phase(f"building {config.env_id} and initialising {settings.num_seeds} seed(s)", "init"):
            self.trainer = trainer = make_trainer(config, mesh=self.mesh)
            num_seeds = settings.num_seeds

            def init_seeds(key, hp):  # the seeds' keys split inside: one program, nothing compiled outside it
                return jax.vmap(trainer.init, in_axes=(0, None))(jax.random.split(key, num_seeds), hp)

            shardings = None
            if self.mesh is not None:
                shardings = runner_shardings(runner_template(trainer, num_seeds), self.mesh)
            key, hp = jax.random.key(settings.seed), config.hparams()
            traced = jax.jit(init_seeds, out_shardings=shardings).trace(key, hp)
            # the training program needs only the runner's shapes: it compiles while init runs
            plan = chunk_plan(config.num_updates, settings.num_chunks)
            template = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), traced.out_info)
            lowered = self._lower_chunk_program(plan, template)  # Python's part here, XLA's in the background
            self.chunk_job = (plan, Background(lambda: self._chunk_runner(lowered.compile()), "jaxenvs-compile"))
            self.say(f"{self._compile_label(plan)} (in the background) ...")
            self.runner = traced.lower().compile()(key, hp)
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
    @staticmethod
    def _compile_label(plan: list[int]) -> str:
        return f"compiling the training program (chunks of {' or '.join(map(str, sorted(set(plan), reverse=True)))} update(s))"

    def compile_chunks(self, plan: list[int]):
        """One compiled program for every chunk: ``(runner, hparams, n) -> (runner, metrics)``
        runs ``n <= plan[0]`` updates. When the chunks differ in length (``--chunks`` not dividing
        the updates), the program's scan skips its last ``plan[0] - n`` steps with a
        ``lax.cond`` whose predicate is the same for every seed, so no update is computed twice and
        nothing is compiled twice; the skipped steps' metrics are dropped on the host.

        A new run started compiling it in the background (`start_new`); this waits for that
        program (the ``compile`` phase is the time waited) or, on a resume, compiles it here."""
        label = self._compile_label(plan)
        job = self.chunk_job
        self.chunk_job = None
        if job is not None and job[0] == plan:
            t0 = time.perf_counter()
            run = job[1].result()
            waited = time.perf_counter() - t0
            self.say.times["compile"] = self.say.times.get("compile", 0.0) + waited
            self.say(f"{label}: done in {job[1].duration:.1f}s (in the background; {waited:.1f}s waited for it)")
            return run
        with self.say.phase(label, "compile"):
            return self._chunk_runner(self._lower_chunk_program(plan, self.runner).compile())

    def _lower_chunk_program(self, plan: list[int], runner):
        """`compile_chunks`'s program, traced and lowered for ``runner`` (arrays, or their shapes)."""
        import jax.numpy as jnp

        trainer, mesh, hp, length = self.trainer, self.mesh, self.hparams, plan[0]
        if len(set(plan)) == 1:
            def one_seed(r, h, n):
                return trainer.run_updates(r, h, num_updates=length)
        else:
            def one_seed(r, h, n):
                def update(r):
                    r, m = trainer.run_updates(r, h, num_updates=1)
                    return r, jax.tree.map(lambda x: x[0], m)

                shapes = jax.eval_shape(update, r)[1]

                def step(r, i):
                    skip = lambda r: (r, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes))  # noqa: E731
                    return jax.lax.cond(i < n, update, skip, r)

                return jax.lax.scan(step, r, jnp.arange(length))

        body = jax.vmap(one_seed, in_axes=(0, None, None))
        if mesh is None:
            chunk = jax.jit(body)
        else:  # the runner keeps its layout; metrics come back whole on every device
            shardings = runner_shardings(runner, mesh)
            chunk = jax.jit(body, in_shardings=(shardings, replicated(mesh), replicated(mesh)),
                            out_shardings=(shardings, replicated(mesh)))
        n = np.int32(length) if mesh is None else put_global(np.int32(length), replicated(mesh))
        return chunk.lower(runner, hp, n)

    def _chunk_runner(self, compiled):
        """``run(runner, hparams, n)``: calls the compiled chunk program with ``n`` as its array."""
        mesh = self.mesh

        def run(runner, hp, k):
            k_arr = np.int32(k) if mesh is None else put_global(np.int32(k), replicated(mesh))
            return compiled(runner, hp, k_arr)

        return run

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
        from .evaluate import progress_metrics

        total = config.num_updates * config.steps_per_update
        if done_updates == 0 and not self.args.no_eval:  # the untrained policy: where each curve starts
            params = to_host(self.runner.params)  # a collective in a multi-process run
            if self.main_process:
                with say.phase("evaluating the untrained policy", "progress evaluation"):
                    self.log.progress = [{"env_steps": 0, **progress_metrics(self.trainer, params)}]
        if self.chunk_job is not None and self.main_process:
            self.warm_up_outputs()
        run_chunk = self.compile_chunks(plan)
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
                line = _progress_line(done_updates * config.steps_per_update, total, num_seeds, rate, self.log, eta, progress)
                line = f"chunk {i + 1}/{len(plan)} | " + line
                print(line.ljust(110), end="\r" if sys.stdout.isatty() and not last else "\n", flush=True)
                last_print = time.perf_counter()
            if not last and _from_process_0(time.perf_counter() - last_save > self.args.checkpoint_every):
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

    def warm_up_outputs(self) -> None:
        """While the training program compiles in the background: compile the programs of the
        final evaluation and the GIF by running them once on the untrained policy (results
        dropped), so after training they only run. On this 2-core CPU the compiles share the
        cores; on a busy machine nothing is lost but the runs themselves (a few ms)."""
        from .evaluate import evaluate
        from .plotting import gif_frames

        if self.args.no_eval and self.args.no_gif:
            return
        with self.say.phase("compiling the evaluation and GIF programs", "evaluation warm-up"):
            params = to_host(self.runner.params)
            if not self.args.no_eval:
                evaluate(self.trainer, params)
            if not self.args.no_gif:
                gif_frames(self.trainer, jax.tree.map(lambda x: x[0], params), jax.random.key(self.settings.seed))

    # -- after training ------------------------------------------------------------------------
    def finish(self) -> None:
        config, trainer, run_dir, say = self.config, self.trainer, self.run_dir, self.say
        if jax.process_count() > 1:
            print(f"process {jax.process_index()} of {jax.process_count()}: parameters {params_digest(self.runner.params)}", flush=True)
        if not self.main_process:
            return
        from .evaluate import evaluate, format_table, solved_hint, what_is_counted
        from .plotting import plot_learning_curve, policy_gif

        params = to_host(self.runner.params)  # replicated: this process's own copy
        result = None
        if not self.args.no_eval:  # first: evaluation.json is the run's verdict, the pictures come after it
            with say.phase(f"evaluating {what_is_counted(config.env_id)}", "evaluate"):
                result = evaluate(trainer, params)
            self._write("evaluation.json", json.dumps(result, indent=2) + "\n")

        def plot():  # in a thread: matplotlib's drawing beside the GIF's rollouts, rendering and encoding
            return plot_learning_curve(
                self.log.env_steps, self.log.array("episode_return"), self.log.array("episode_length"),
                run_dir / "learning_curve.png", config.env_id, progress=self.log.progress, env_id=config.env_id,
                training={n: self.log.array(n) for n in tuned.entry(config.env_id).curves},
            )

        plotting = Background(plot, "jaxenvs-plot")
        say("plotting learning_curve.png (in the background) ...")
        gif, gif_note = None, "(not written: --no-gif)"
        if not self.args.no_gif:
            with say.phase("writing policy.gif (seed 0, greedy)", "gif"):
                params0 = jax.tree.map(lambda x: x[0], params)
                try:
                    gif = policy_gif(trainer, params0, run_dir / "policy.gif", jax.random.key(self.settings.seed))
                except OSError as e:
                    raise StorageError(f"cannot write {run_dir / 'policy.gif'}: {e.strerror or e}") from None
            gif_note = f"(not written: {config.env_id} has no render)"
        t0 = time.perf_counter()
        try:
            curve = plotting.result()
        except OSError as e:
            raise StorageError(f"cannot write {run_dir / 'learning_curve.png'}: {e.strerror or e}") from None
        say.times["plot"] = time.perf_counter() - t0
        say(f"plotting learning_curve.png: done in {plotting.duration:.1f}s ({say.times['plot']:.1f}s waited for it)")
        if result is not None:
            print(format_table(result))
            hint = solved_hint(result, config)
            if hint:
                print(f"hint: {hint}")
        print(f"learning curve: {curve.resolve()}")
        print(f"policy GIF:     {gif.resolve() if gif else gif_note}")
        print(f"checkpoint:     {(run_dir / CHECKPOINT).resolve()}")
        print(f"evaluate again: {from_here(config.env_id, f'{EVALUATE} {run_dir.resolve()}')}")
        print(f"play it:        {from_here(config.env_id, f'jaxenvs play {run_dir.resolve()}')}")
        if trainer.turns.turn_based and trainer.num_agents == 2:  # a person's seat against it
            print(f"play against it: {from_here(config.env_id, f'jaxenvs play {run_dir.resolve()} --human')}")

    def _write(self, name: str, text: str) -> None:
        try:
            write_text_atomic(self.run_dir / name, text)
        except OSError as e:
            raise StorageError(f"cannot write {self.run_dir / name}: {e.strerror or e}") from None

    def timings(self, started: float, imported: float) -> dict:
        """``timings.json``: this command's wall seconds, its phases (as in its last line; on
        several threads: ``compile`` and ``plot`` are the time waited for the background), what
        JAX traced, lowered and compiled (`train.xla.CompileLog`), and the cache in use."""
        import platform

        return {
            "wall_s": time.perf_counter() - started,
            "phases_s": {"imports": imported - started, **self.say.times},
            "jax": self.compile_log.summary() if self.compile_log is not None else None,
            "compilation_cache": str(self.cache_dir) if self.cache_dir is not None else None,
            "env_id": self.config.env_id, "algo": self.config.ALGO,
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "jax": jax.__version__,
                        "backend": jax.default_backend(), "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None},
        }

    def write_timings(self, started: float, imported: float) -> None:
        """Write `timings` to ``<run dir>/timings.json`` (process 0; a failure to write it is only
        reported: every output that matters is written already)."""
        if not self.main_process or self.run_dir is None:
            return
        try:
            write_text_atomic(self.run_dir / "timings.json", json.dumps(self.timings(started, imported), indent=1) + "\n")
        except OSError as e:
            print(f"warning: cannot write {self.run_dir / 'timings.json'}: {e.strerror or e}", file=sys.stderr)

    def wall_summary(self, started: float, imported: float) -> str:
        """The command's wall time from ``started`` (``time.perf_counter()`` when it began), with
        the imports (until ``imported``) and every phase."""
        t = {"imports": imported - started, **self.say.times}
        parts = ", ".join(f"{k} {v:.1f}s" for k, v in t.items() if v >= 0.05)
        return f"wall time {time.perf_counter() - started:.1f}s of this command ({parts}; the rest: writing files)"


