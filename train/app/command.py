"""``jaxenvs-train``: parse the command line, run (`train.app.run.Run`) and turn every way it can end
into an exit status and one line (`train.app.exits`).
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import threading
import time

import jax

from jaxenvs._optional import MissingExtraError
from jaxenvs.sharding import initialize_distributed, to_host
from ..checkpoint import CHECKPOINT, CONFIG, check_run_dir, load_config_file
from ..configs import config_from_dict, run_record, run_settings_from_dict
from ..distributed import is_main_process
from .envids import ENV_ID_FORMS, cwd_on_import_path, from_here
from .exits import EXIT_DIVERGED, EXIT_INTERRUPTED, EXIT_STORAGE, EXIT_USAGE, Diverged, StorageError, UsageError
from .parser import PROG, config_overrides, parse_args, split_run_settings
from .outputs import EVALUATE, missing_module
from .timing import Background, Say
from .run import Run, outputs_complete
from ..xla import CompileLog, enable_compilation_cache
from .stdout_filter import drop_gloo_banner
from .plotting import prefetch_matplotlib

__all__ = ["main"]


def main(argv=None, started: float | None = None, curve=None) -> int:
    """Run ``jaxenvs-train`` with ``argv``; ``started``: ``time.perf_counter()`` when the command began
    (its wall time is counted from there); ``curve``: the `train.app.curve_drawing.CurveProcess` that
    draws the learning curve (None: drawn in this process), ended when the command ends."""
    try:
        return _main(argv, started, curve)
    finally:
        if curve is not None:
            curve.close()


def _main(argv, started, curve) -> int:
    started = time.perf_counter() if started is None else started
    imported = time.perf_counter()
    args = parse_args(argv)  # argparse's own errors exit 2
    cwd_on_import_path()  # --env module:id finds ./module.py, as under python -m
    if args.distributed:
        drop_gloo_banner()  # Gloo prints a connection banner into stdout: keep it out of this command's output
        initialize_distributed()  # before anything else asks JAX for its devices
    cache = enable_compilation_cache()
    main_process = is_main_process()
    run = Run(args, Say(main_process), main_process)
    run.curve = curve
    run.compile_log = CompileLog().start()
    run.cache_dir = cache
    in_main_thread = threading.current_thread() is threading.main_thread()  # where Python runs signal handlers
    previous = {s: signal.signal(s, _interrupt) for s in _SIGNALS} if in_main_thread else {}  # SIGTERM/SIGHUP as Ctrl-C
    try:
        return _run(run, started, imported)
    except UsageError as e:
        return _fail(run, str(e), EXIT_USAGE)
    except StorageError as e:
        return _fail(run, str(e), EXIT_STORAGE)
    except ImportError as e:  # --env module:id whose module cannot be imported, or a missing package
        message = str(e)
        if message.startswith("could not import module"):  # the id's module (jaxenvs.registration)
            message += f"; --env takes {ENV_ID_FORMS}"
        elif not isinstance(e, MissingExtraError) and e.name and e.name.split(".")[0] in TRAIN_PACKAGES:
            message = missing_module(e, "jaxenvs-train")
        return _fail(run, message, EXIT_USAGE)
    except KeyError as e:  # an unknown id
        message = e.args[0] if e.args else str(e)
        if isinstance(message, str) and message.startswith("no environment registered"):
            message += f"; --env takes {ENV_ID_FORMS}"
        return _fail(run, message, EXIT_USAGE)
    except (ValueError, TypeError, FileNotFoundError, IsADirectoryError, NotADirectoryError) as e:
        # bad config fields, paths and checkpoints: one line naming what was wrong, no traceback
        return _fail(run, str(e), EXIT_USAGE)
    except OSError as e:  # reading or writing files: permissions, a full or read-only file system
        where = f"{e.filename}: " if e.filename else ""
        return _fail(run, f"{where}{e.strerror or e}", EXIT_STORAGE)
    except Diverged as e:
        return _fail(run, str(e), EXIT_DIVERGED)
    except KeyboardInterrupt as e:
        return _interrupted(run, e)
    finally:
        run.compile_log.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)


TRAIN_PACKAGES = ("flax", "optax", "matplotlib", "imageio", "PIL")  # what the train extra installs


_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP (``kill``, ``timeout``, ``docker stop``, SLURM preemption, a closed
    terminal), handled like Ctrl-C: the run saves its checkpoint and stops."""


def _interrupt(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def _run(run: Run, started: float, imported: float) -> int:
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
        missing = outputs_complete(run.run_dir, run.resumed_at, run.args.no_eval, run.args.no_gif)
        steps = f"{run.resumed_at * run.config.steps_per_update:,} env steps"
        if run.resumed_at < run.config.num_updates:
            run.say(f"resuming {run.run_dir} at update {run.resumed_at} ({steps})")
        elif missing:  # stopped after training, before every output was written
            run.say(f"{run.run_dir} is trained to the end ({steps}) but {', '.join(missing)} "
                    f"{'is' if len(missing) == 1 else 'are'} missing or older than its checkpoint; writing the outputs")
            if {"metrics.json", "metrics.csv"} & set(missing):  # no training follows to write them: now
                try:
                    run.log.write()
                except OSError as e:
                    raise StorageError(f"cannot write {e.filename or run.run_dir}: {e.strerror or e}") from None
        else:
            run.say(
                f"{run.run_dir} is complete: {run.resumed_at} updates ({steps} per seed) trained; nothing to do. "
                f"Pass a larger --total-timesteps to train on, or evaluate it with  "
                f"{from_here(run.config.env_id, f'{EVALUATE} {run.run_dir.resolve()}')}"
            )
            return 0
    else:
        run.start_new(after_tracing=lambda: _prefetch_plotting(run))
    if run.config.num_updates > int(to_host(run.runner.update).reshape(-1)[0]):
        run.train()
    run.finish()
    run.say(run.wall_summary(started, imported))
    run.write_timings(started, imported)
    return 0


def _prefetch_plotting(run: Run) -> None:
    """Import matplotlib in the background while the run starts (process 0 draws the learning
    curve at the end; the import is about a second of Python that would otherwise come then), unless
    a helper process draws it (`train.app.curve_drawing`). Started once the training program is traced:
    an import beside the tracing (both Python, taking turns on the GIL) slowed the tracing, and with
    it the start of the training program's compile."""
    if run.main_process and run.curve is None:
        Background(prefetch_matplotlib, "jaxenvs-import")


def _fail(run: Run, message: str, status: int) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    _remove_unusable(run)
    return status


def _remove_unusable(run: Run) -> None:
    """A run directory this command created that holds no checkpoint is removed (nothing to resume)."""
    if run.created and run.main_process and run.run_dir is not None and not (run.run_dir / CHECKPOINT).exists():
        shutil.rmtree(run.run_dir, ignore_errors=True)


def _interrupted(run: Run, why: BaseException | None = None) -> int:
    if run.run_dir is None or run.runner is None or run.log is None:
        _remove_unusable(run)
        print(f"\ninterrupted{_by(why)} before the run directory was written; nothing to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    if jax.process_count() > 1:  # the other processes cannot join a gather now
        run.say(f"\ninterrupted: continue from the last checkpoint with  {PROG} --distributed --resume {run.run_dir.resolve()}")
        return EXIT_INTERRUPTED
    try:
        run.save()
    except KeyboardInterrupt:
        pass  # a second Ctrl-C: the last checkpoint written stays (every write is atomic)
    except StorageError as e:
        print(f"\ninterrupted{_by(why)}; the checkpoint could not be saved: {e}", file=sys.stderr, flush=True)
        return EXIT_STORAGE
    resume = from_here(run.config.env_id, f"{PROG} --resume {run.run_dir.resolve()}")
    print(f"\ninterrupted{_by(why)}: checkpoint saved; continue with  {resume}", flush=True)
    return EXIT_INTERRUPTED


def _by(why: BaseException | None) -> str:
    return f" by {why.args[0]}" if isinstance(why, Interrupted) and why.args else ""
