"""``jaxenvs-train`` (``python -m train`` from a checkout): train PPO (or TRPO, ``--algo trpo``)
on a jaxenvs environment and write a run directory.

    python -m train                                   # GridWorld-v0 with its tuned defaults
    python -m train --env PointEnv-v0 --seeds 4       # 4 seeds in one compiled program
    python -m train --algo trpo --env PointEnv-v0     # TRPO instead of PPO
    python -m train --resume runs/GridWorld-v0-20250101-120000 --total-timesteps 400000
    srun python -m train --distributed                # one process per host (SLURM), all their devices

The run is split into ``--chunks N`` chunks of updates (exactly N calls, lengths differing by at
most one update; ``config.json`` records the count used); each chunk is one call of one compiled
program (all seeds vmapped). Between chunks the policy is
evaluated on what measures progress in its environment (see :mod:`train.evaluate`) and a
progress line (steps, steps/s, that measure, ETA) is printed (after every chunk on a terminal, at
most every 2 s in a log), so printing costs nothing inside the compiled program. Every phase
(initialisation, compilation, evaluation, GIF) says what it does and how long it took, and the
last line gives the wall time of the whole command.

Every config field has a flag (``--help`` lists them with their defaults and each environment's
tuned values; ``--show-config`` prints the resolved config). Config values are checked before
anything runs; training that produces a non-finite loss, gradient or parameter stops with an
error (exit status 1), keeping the last good checkpoint. Usage errors exit with status 2.
Compiled programs are cached on disk (``$JAXENVS_CACHE_DIR``, default ``~/.cache/jaxenvs/jax``;
``off`` or empty turns it off; :mod:`jaxenvs._cache`). A run directory ``<out>/<env>-<YYYYmmdd-HHMMSS>/`` receives:

* ``config.json``: the full config, :class:`~train.configs.PPOConfig` or
  :class:`~train.configs.TRPOConfig`, with its ``"algo"`` and the run settings
  (:class:`~train.configs.RunSettings`: ``--seeds``, ``--seed``, ``--chunks``) as its ``"run"``
  object (``--config FILE`` reads one back);
* ``metrics.csv`` (one row per update: env steps, return/length mean and std over seeds, losses)
  and ``metrics.json`` (the same per seed, ``null`` where no episode ended; and the progress
  evaluations after every chunk);
* ``learning_curve.png``, ``policy.gif`` (seed 0, greedy), ``evaluation.json``;
* ``checkpoint.msgpack`` (params, optimizer and env states, keys, config, step count), written
  after every chunk that takes longer than ``--checkpoint-every`` seconds and at the end, and on
  Ctrl-C, so ``--resume`` continues from where the run stopped (a run directory holds a
  checkpoint from its first moment; a finished run is reported complete and left alone).

Every file is written atomically (a temporary file, then ``os.replace``); runs started in the
same second get distinct directories (``-2``, ``-3``, ... suffixes).

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

import time

_T_START = time.perf_counter()  # the command's wall time is measured from here (after Python's own start)

import argparse  # noqa: E402
import csv  # noqa: E402
import dataclasses  # noqa: E402
import datetime  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

from jaxenvs import _cache
from jaxenvs.parallel import env_mesh, initialize_distributed, to_host  # noqa: E402
from .checkpoint import (  # noqa: E402
    CHECKPOINT, CONFIG, check_run_dir, load_run, runner_template, save_checkpoint, write_text_atomic,
)
from .configs import (  # noqa: E402
    ALGOS, DEFAULT_ENV, DEFAULTS, RUN_FIELDS, RUN_KEY, Bool, Choice, Float, Int, Mapping, RunSettings, Sizes, config_from_dict,
    get_config, load_config_file, run_record, run_settings_from_dict,
)
from .distributed import is_main_process, params_digest, place_runner, put_global, replicated, runner_shardings  # noqa: E402
from .trainers import make_trainer  # noqa: E402
from .xla import jit  # noqa: E402

_T_IMPORTED = time.perf_counter()

PROG = "python -m train"
METRIC_KEYS = ("episode_return", "episode_length", "episodes", "pg_loss", "vf_loss", "entropy", "approx_kl", "clip_frac")
# Metrics that are never NaN in a healthy update (episode_return/length are NaN when no episode ended).
LOSS_KEYS = ("pg_loss", "vf_loss", "entropy", "approx_kl", "loss", "value_mean")
EXIT_USAGE, EXIT_DIVERGED, EXIT_INTERRUPTED = 2, 1, 130


class UsageError(Exception):
    """A mistake in what the user gave (flags, config file, run directory): message, exit status 2."""


class Diverged(Exception):
    """Training produced a non-finite loss, gradient or parameter: message, exit status 1."""


# ----------------------------------------------------------------------------------------------
# Chunks


def chunk_length(num_updates: int, num_chunks: int) -> int:
    """Updates per chunk when all chunks must have one length: the largest divisor of
    ``num_updates`` that is at most ``ceil(num_updates / num_chunks)`` (kept for scripts that
    need one compiled program; ``python -m train`` uses :func:`chunk_plan`)."""
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
# Command line: one flag per config field and run setting, generated from their classes


def _field_comments(cls) -> dict[str, str]:
    """``{field: comment}`` from the source of a config class: the comment on a field's line,
    or the block of comment lines just above it."""
    try:
        lines = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    out, block = {}, []
    for line in lines:
        text = line.strip()
        if text.startswith("#"):
            block.append(text.lstrip("# "))
            continue
        m = re.match(r"(\w+)\s*:[^=]*=.*?(?:\s#\s?(.*))?$", text)
        if m and not text.startswith(("def ", "return ")):
            out[m.group(1)] = m.group(2) or " ".join(block)
        block = []
    return out


_FLAG_NAMES = {"env_id": ["--env", "--env-id"], "num_seeds": ["--seeds", "--num-seeds"], "num_chunks": ["--chunks", "--num-chunks"]}


def _config_fields() -> dict[str, tuple]:
    """``{field: (rule, default, help, algos)}`` over the fields of every algorithm's config, then
    the run settings (:class:`~train.configs.RunSettings`, shared by every algorithm)."""
    fields: dict[str, tuple] = {}
    for algos, cls in [([algo], cls) for algo, cls in ALGOS.items()] + [(list(ALGOS), RunSettings)]:
        comments = _field_comments(cls)
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            if f.name in fields:
                fields[f.name][3].extend(algos)
            else:
                fields[f.name] = (cls.FIELD_RULES[f.name], default, comments.get(f.name, ""), list(algos))
    return fields


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"size\": 8}}', got {text!r}")
    return value


def _tuned_note(name: str) -> str:
    tuned = [f"{env} {cfg[name]:g}" if isinstance(cfg[name], float) else f"{env} {cfg[name]}" for env, cfg in DEFAULTS.items() if name in cfg]
    return f"; tuned: {', '.join(tuned)}" if tuned else ""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_epilog(),
    )
    run = p.add_argument_group("run")
    run.add_argument("--algo", choices=sorted(ALGOS), help="training algorithm (default ppo, or the --config file's \"algo\")")
    run.add_argument("--config", metavar="FILE", help="JSON object of config fields (a run's config.json works; flags override it)")
    run.add_argument("--out", default="runs", metavar="DIR", help="parent directory of run directories (default: runs)")
    run.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR (to its or a new --total-timesteps)")
    run.add_argument("--checkpoint-every", type=float, default=60.0, metavar="S", help="seconds between checkpoints (default: 60)")
    run.add_argument("--no-gif", action="store_true", help="skip policy.gif")
    run.add_argument(
        "--no-eval", action="store_true",
        help="skip the evaluations (the progress measures after every chunk, evaluation.json); "
        "python -m train.evaluate RUN_DIR runs them later",
    )
    run.add_argument("--show-config", action="store_true", help="print the config the other flags resolve to (JSON) and exit")
    run.add_argument(
        "--devices", type=int, metavar="N",
        help="split the env batch over the first N devices (default: all whose count divides --num-envs)",
    )
    run.add_argument(
        "--distributed", action="store_true",
        help="start jax.distributed (JAXENVS_COORDINATOR, JAXENVS_NUM_PROCESSES, JAXENVS_PROCESS_ID, or "
        "detected under SLURM / Open MPI / Cloud TPU) and train over every process's devices",
    )
    cfg = p.add_argument_group("config fields (default: the algorithm's default, or the env's tuned value shown)")
    for name, (rule, default, text, algos) in _config_fields().items():
        flags = _FLAG_NAMES.get(name, ["--" + name.replace("_", "-")])
        shown = json.dumps(list(default) if isinstance(default, tuple) else default)
        only = "" if len(algos) == len(ALGOS) else f" [{'/'.join(algos)} only]"
        help_text = f"{text} (default: {shown}{_tuned_note(name)}){only}".strip().replace("%", "%%")
        kw: dict = dict(dest=name, default=None, help=help_text)
        if isinstance(rule, Bool):
            kw["action"] = argparse.BooleanOptionalAction
        elif isinstance(rule, Int):
            kw.update(type=int, metavar="INT")
        elif isinstance(rule, Float):
            kw.update(type=float, metavar="X")
        elif isinstance(rule, Sizes):
            kw.update(type=int, nargs="+", metavar="N")
        elif isinstance(rule, Choice):
            kw.update(choices=rule.options)
        elif isinstance(rule, Mapping):
            kw.update(type=_json_object, metavar="JSON")
        cfg.add_argument(*flags, **kw)
    return p


def _epilog() -> str:
    names = sorted({k for cfg in DEFAULTS.values() for k in cfg})
    rows = [["env"] + names] + [[env] + [f"{cfg[n]:g}" if isinstance(cfg.get(n), float) else str(cfg.get(n, "-")) for n in names] for env, cfg in DEFAULTS.items()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    table = "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
    cache = os.environ.get("JAXENVS_CACHE_DIR")
    return (
        f"tuned defaults per environment (ppo; '-' = the default above):\n{table}\n\n"
        "compiled programs are cached on disk (JAX's persistent compilation cache), so a second run of the\n"
        f"same shapes starts in well under a second: directory {_cache.cache_dir() or '(off)'}; set JAXENVS_CACHE_DIR to\n"
        "move it, or to 'off' (or an empty string) to turn it off" + (f" (now {cache!r})" if cache is not None else "") + ".\n"
        "exit status: 0 done, 1 training diverged (non-finite numbers), 2 usage error, 130 interrupted."
    )


def parse_args(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not (math.isfinite(args.checkpoint_every) and args.checkpoint_every >= 0):
        parser.error(f"--checkpoint-every {args.checkpoint_every}: must be a finite number of seconds >= 0")
    if args.devices is not None and args.devices < 1:
        parser.error(f"--devices {args.devices}: must be an integer >= 1")
    return args


def config_overrides(args) -> dict:
    """The config fields and run settings given as flags (``None``: not given)."""
    return {name: getattr(args, name) for name in _config_fields() if getattr(args, name, None) is not None}


def split_run_settings(overrides: dict) -> tuple[dict, dict]:
    """``(config fields, run settings)`` of a dict of both (:func:`config_overrides`)."""
    return ({k: v for k, v in overrides.items() if k not in RUN_FIELDS},
            {k: v for k, v in overrides.items() if k in RUN_FIELDS})


# ----------------------------------------------------------------------------------------------
# Compilation cache


def enable_compilation_cache():
    """JAX's persistent compilation cache for the trainer's commands (:mod:`jaxenvs._cache`),
    keeping every program however quick to compile: a warm start then compiles nothing."""
    return _cache.enable_compilation_cache(min_compile_s=0.0)


# ----------------------------------------------------------------------------------------------
# Metrics


class MetricsLog:
    """Per-update metrics of all seeds (float[num_updates, num_seeds] per name), the progress
    evaluations (one row per chunk) and their files."""

    def __init__(self, run_dir: Path, steps_per_update: int, owner: bool = True, updates_done: int = 0):
        self.run_dir, self.steps_per_update, self.owner = run_dir, steps_per_update, owner  # owner: reads/writes files
        self.data: dict[str, list] = {k: [] for k in METRIC_KEYS}
        self.progress: list[dict] = []  # {"env_steps": n, name: [per seed]}
        old = run_dir / "metrics.json"
        if owner and updates_done and old.exists():
            stored = json.loads(old.read_text())
            for k, rows in stored["per_seed"].items():  # null = no episode ended in that update
                self.data[k] = [[math.nan if x is None else float(x) for x in row] for row in rows][:updates_done]
            self.progress = [r for r in stored.get("progress", []) if r["env_steps"] <= updates_done * steps_per_update]
            short = updates_done - len(self.data["episode_return"])
            if short > 0:  # metrics written before the checkpoint they belong to was lost: mark the gap
                for k in self.data:
                    width = len(self.data[k][0]) if self.data[k] else 1
                    self.data[k].extend([[math.nan] * width for _ in range(short)])

    def append(self, metrics: dict):
        for k, v in metrics.items():
            if k == "nonfinite":
                continue
            rows = np.asarray(v, np.float64).T.tolist()  # [seeds, L] -> L rows of seeds
            self.data.setdefault(k, [[math.nan] * len(rows[0]) for _ in range(self.updates - len(rows))] if rows else [])
            self.data[k].extend(rows)

    @property
    def updates(self) -> int:
        return max((len(v) for v in self.data.values()), default=0)

    def array(self, k) -> np.ndarray:
        return np.array(self.data.get(k, []), np.float64)

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
        keys = [k for k in self.data if self.data[k]]
        json_data = {k: [[x if math.isfinite(x) else None for x in row] for row in self.data[k]] for k in keys}
        write_text_atomic(
            self.run_dir / "metrics.json",
            json.dumps({"env_steps": steps.tolist(), "per_seed": json_data, "progress": self.progress}),
        )
        lines = []
        header = ["update", "env_steps"] + [f"{k}_{s}" for k in keys for s in ("mean", "std")]
        arrays = {k: self.array(k) for k in keys}
        for i, n in enumerate(steps):
            row = [str(i + 1), str(int(n))]
            for k in keys:
                v = arrays[k][i] if i < len(arrays[k]) else np.array([])
                v = v[np.isfinite(v)]
                row += [f"{v.mean():.6g}", f"{v.std():.6g}"] if v.size else ["", ""]
            lines.append(row)
        import io

        buf = io.StringIO()
        csv.writer(buf).writerows([header] + lines)
        write_text_atomic(self.run_dir / "metrics.csv", buf.getvalue())


def first_nonfinite_update(metrics: dict) -> int | None:
    """Index (within a chunk) of the first update whose ``nonfinite`` flag is set, or, for a
    trainer without that flag, whose losses are not finite; None when every update is finite."""
    flag = metrics.get("nonfinite")
    if flag is not None:
        bad = np.asarray(flag, bool)
    else:
        present = [np.asarray(metrics[k], np.float64) for k in LOSS_KEYS if k in metrics]
        if not present:
            return None
        bad = np.zeros(present[0].shape, bool)
        for a in present:
            bad |= ~np.isfinite(a)
    bad = bad.reshape(bad.shape[0], -1).any(axis=1) if bad.ndim > 1 else bad.reshape(-1)
    return int(np.argmax(bad)) if bad.any() else None


# ----------------------------------------------------------------------------------------------
# Output


class Say:
    """Printing of process 0, with phases: ``with say.phase("compiling"):`` prints what runs
    and, when it ends, how long it took (so no phase longer than a second is silent)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.times: dict[str, float] = {}

    def __call__(self, *a, **k):
        if self.enabled:
            print(*a, **k, flush=True)

    def phase(self, label: str, key: str):
        say = self

        class _Phase:
            def __enter__(self):
                self.t0 = time.perf_counter()
                say(f"{label} ...", end=" " if sys.stdout.isatty() else "\n")
                return self

            def __exit__(self, kind, *_):
                dt = time.perf_counter() - self.t0
                say.times[key] = say.times.get(key, 0.0) + dt
                if kind is None:
                    say(f"{'' if sys.stdout.isatty() else label + ': '}done in {dt:.1f}s")
                return False

        return _Phase()


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


def check_out_dir(out: str) -> Path:
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out {out!r} is a file; --out names the directory that run directories go into")
    return path


def make_run_dir(out: Path, env_id: str, main_process: bool = True) -> Path:
    """A new, empty ``<out>/<env>-<YYYYmmdd-HHMMSS>[-k]`` (``-2``, ``-3``, ... when runs start in
    the same second): ``mkdir`` without ``exist_ok`` claims the name atomically."""
    base = f"{env_id.replace('/', '_')}-{_run_stamp()}"
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
        cls = ALGOS[algo]
        foreign = sorted(k for k in overrides if k not in {f.name for f in dataclasses.fields(cls)})
        if foreign:
            raise UsageError(f"--algo {algo} has no field(s) {foreign}; leave those flags out")
        return get_config(env_id, algo=algo, **{**file_cfg, **overrides}), file_run.replace(**run_overrides)

    def start_new(self):
        out = check_out_dir(self.args.out)
        self.config, self.settings = config, settings = self.new_config()
        self.mesh = choose_mesh(config.num_envs, self.args.devices, self.args.distributed)
        with self.say.phase(f"building {config.env_id} and initialising {settings.num_seeds} seed(s)", "init"):
            self.trainer = make_trainer(config, mesh=self.mesh)
            keys = jax.random.split(jax.random.key(settings.seed), settings.num_seeds)
            template = runner_template(self.trainer, settings.num_seeds)
            shardings = runner_shardings(template, self.mesh) if self.mesh is not None else None
            init = jit(jax.vmap(self.trainer.init, in_axes=(0, None)), out_shardings=shardings)
            self.runner = init(keys, config.hparams())
        self.run_dir = make_run_dir(out, config.env_id, self.main_process)
        self.created = True
        self.log = MetricsLog(self.run_dir, config.steps_per_update, owner=self.main_process)
        self.save()  # a run directory --resume can use from the start (update 0)

    def start_resume(self):
        args = self.args
        overrides = config_overrides(args)
        extra = sorted(k for k in overrides if k not in ("total_timesteps", "num_chunks"))
        if args.config or args.algo or extra:
            given = (["--config"] if args.config else []) + (["--algo"] if args.algo else []) + [_FLAG_NAMES.get(k, ["--" + k.replace("_", "-")])[0] for k in extra]
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
        self.log = MetricsLog(self.run_dir, self.config.steps_per_update, owner=self.main_process, updates_done=meta["update"])

    def save(self):
        """Metrics, then checkpoint, then config: each file atomic; a resume truncates the
        metrics to the checkpoint's update, so a crash between them loses nothing that matters."""
        self.log.write()
        save_checkpoint(self.run_dir / CHECKPOINT, self.config, self.runner, self.settings)
        if self.main_process:
            write_text_atomic(self.run_dir / CONFIG, json.dumps(run_record(self.config, self.settings), indent=2) + "\n")

    # -- training ------------------------------------------------------------------------------
    def compile_chunks(self, plan: list[int]):
        """One compiled program for every chunk: ``(runner, hparams, n) -> (runner, metrics)``
        runs ``n <= plan[0]`` updates. When the chunks differ in length (``--chunks`` not dividing
        the updates), the program's scan skips its last ``plan[0] - n`` steps with a
        ``lax.cond`` whose predicate is the same for every seed, so no update is computed twice and
        nothing is compiled twice; the skipped steps' metrics are dropped on the host."""
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
            chunk = jit(body)
        else:  # the runner keeps its layout; metrics come back whole on every device
            shardings = runner_shardings(self.runner, mesh)
            chunk = jit(body, in_shardings=(shardings, replicated(mesh), replicated(mesh)),
                            out_shardings=(shardings, replicated(mesh)))
        n = jnp.int32(length) if mesh is None else put_global(np.int32(length), replicated(mesh))
        label = f"compiling the training program (chunks of {' or '.join(map(str, sorted(set(plan), reverse=True)))} update(s))"
        with self.say.phase(label, "compile"):
            compiled = chunk.lower(self.runner, hp, n).compile()

        def run(runner, hp, k):
            k_arr = jnp.int32(k) if mesh is None else put_global(np.int32(k), replicated(mesh))
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
        run_chunk = self.compile_chunks(plan)
        from .evaluate import progress_metrics

        total = config.num_updates * config.steps_per_update
        if done_updates == 0 and not self.args.no_eval:  # the untrained policy: where each curve starts
            params = to_host(self.runner.params)  # a collective in a multi-process run
            if self.main_process:
                self.log.progress = [{"env_steps": 0, **progress_metrics(self.trainer, params)}]
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
        say.times["train"], say.times["progress evaluation"] = train_s, eval_s
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

    # -- after training ------------------------------------------------------------------------
    def finish(self) -> None:
        config, trainer, run_dir, say = self.config, self.trainer, self.run_dir, self.say
        if jax.process_count() > 1:
            print(f"process {jax.process_index()} of {jax.process_count()}: parameters {params_digest(self.runner.params)}", flush=True)
        if not self.main_process:
            return
        from .evaluate import NUM_EPISODES, evaluate, format_table
        from .plotting import plot_learning_curve, policy_gif

        with say.phase("plotting learning_curve.png", "plot"):
            curve = plot_learning_curve(
                self.log.env_steps, self.log.array("episode_return"), self.log.array("episode_length"),
                run_dir / "learning_curve.png", config.env_id, progress=self.log.progress,
            )
        params = to_host(self.runner.params)  # replicated: this process's own copy
        result = None
        if not self.args.no_eval:
            with say.phase(f"evaluating {NUM_EPISODES} episodes per seed", "evaluate"):
                result = evaluate(trainer, params)
        gif = None
        if not self.args.no_gif:
            with say.phase("writing policy.gif (seed 0, greedy)", "gif"):
                params0 = jax.tree.map(lambda x: x[0], params)
                gif = policy_gif(trainer, params0, run_dir / "policy.gif", jax.random.key(self.settings.seed))
        if result is not None:
            write_text_atomic(run_dir / "evaluation.json", json.dumps(result, indent=2) + "\n")
            print(format_table(result))
        print(f"learning curve: {curve}")
        print(f"policy GIF:     {gif if gif else '(not written)'}")
        print(f"checkpoint:     {run_dir / CHECKPOINT}")
        print(f"evaluate again: python -m train.evaluate {run_dir}")

    def wall_summary(self) -> str:
        t = {"imports": _T_IMPORTED - _T_START, **self.say.times}
        parts = ", ".join(f"{k} {v:.1f}s" for k, v in t.items() if v >= 0.05)
        return f"wall time {time.perf_counter() - _T_START:.1f}s of this command ({parts}; the rest: writing files)"


def main(argv=None) -> int:
    args = parse_args(argv)  # argparse's own errors exit 2
    if args.distributed:
        initialize_distributed()  # before anything else asks JAX for its devices
    enable_compilation_cache()
    main_process = is_main_process()
    run = Run(args, Say(main_process), main_process)
    try:
        return _run(run)
    except UsageError as e:
        return _fail(run, str(e), EXIT_USAGE)
    except (KeyError, ValueError, TypeError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as e:
        # bad ids, config fields, paths and checkpoints: one line naming what was wrong, no traceback
        return _fail(run, e.args[0] if isinstance(e, KeyError) and e.args else str(e), EXIT_USAGE)
    except Diverged as e:
        return _fail(run, str(e), EXIT_DIVERGED)
    except KeyboardInterrupt:
        return _interrupted(run)


def _run(run: Run) -> int:
    args = run.args
    if args.show_config:
        if args.resume:
            stored = load_config_file(str(check_run_dir(args.resume) / CONFIG))
            overrides, run_overrides = split_run_settings(config_overrides(args))
            config = config_from_dict({**stored, **overrides})
            settings = run_settings_from_dict(stored).replace(**run_overrides)
        else:
            config, settings = run.new_config()
        print(json.dumps(run_record(config, settings), indent=2))
        return 0
    if args.resume:
        run.start_resume()
        curve, ckpt = run.run_dir / "learning_curve.png", run.run_dir / CHECKPOINT
        outputs_current = curve.exists() and curve.stat().st_mtime >= ckpt.stat().st_mtime
        steps = f"{run.resumed_at * run.config.steps_per_update:,} env steps"
        if run.resumed_at < run.config.num_updates:
            run.say(f"resuming {run.run_dir} at update {run.resumed_at} ({steps})")
        elif not outputs_current:  # stopped after training, before its curve (and evaluation, GIF) were written
            run.say(f"{run.run_dir} is trained to the end ({steps}) but its outputs are older than its checkpoint; writing them")
        else:
            run.say(
                f"{run.run_dir} is complete: {run.resumed_at} updates ({steps} per seed) trained; nothing to do. "
                f"Pass a larger --total-timesteps to train on, or evaluate it with  python -m train.evaluate {run.run_dir}"
            )
            return 0
    else:
        run.start_new()
    if run.config.num_updates > int(to_host(run.runner.update).reshape(-1)[0]):
        run.train()
    run.finish()
    run.say(run.wall_summary())
    return 0


def _fail(run: Run, message: str, status: int) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    _remove_unusable(run)
    return status


def _remove_unusable(run: Run) -> None:
    """A run directory this command created that holds no checkpoint is removed (nothing to resume)."""
    if run.created and run.main_process and run.run_dir is not None and not (run.run_dir / CHECKPOINT).exists():
        shutil.rmtree(run.run_dir, ignore_errors=True)


def _interrupted(run: Run) -> int:
    if run.run_dir is None or run.runner is None or run.log is None:
        _remove_unusable(run)
        print(f"\ninterrupted before the run directory was written; nothing to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    if jax.process_count() > 1:  # the other processes cannot join a gather now
        run.say(f"\ninterrupted: continue from the last checkpoint with  {PROG} --distributed --resume {run.run_dir}")
        return EXIT_INTERRUPTED
    try:
        run.save()
    except KeyboardInterrupt:
        pass  # a second Ctrl-C: the last checkpoint written stays (every write is atomic)
    print(f"\ninterrupted: checkpoint saved; continue with  {PROG} --resume {run.run_dir}", flush=True)
    return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
