"""What ``jaxenvs-train`` writes and prints around training (`RunOutputs`, a part of
`train.app.run.Run`): the progress line, the warm-up of the output programs, and after training the
evaluation, the learning curve, the policy GIF, the closing lines, and the command's timings."""

from __future__ import annotations

import json
import os
import sys
import time

import jax

from jaxenvs._optional import MissingExtraError, install_hint
from jaxenvs.prng import key_on_host
from jaxenvs.sharding import to_host
from ..checkpoint import CHECKPOINT, OUTPUTS, write_text_atomic
from ..curricula import heldout_check
from ..distributed import params_digest
from .envids import from_here
from .exits import StorageError, UsageError
from .metrics_log import MetricsLog
from .timing import Background
from .. import tuned
from ..grading import evaluate, format_progress, format_table, solved_hint, what_is_counted
from . import plotting as plots

__all__ = ["EVALUATE", "RunOutputs", "progress_line", "missing_module"]

EVALUATE = "jaxenvs evaluate"


def missing_module(error: ImportError, purpose: str) -> str:
    """What a missing package keeps from being done, and what installs it: ``error`` is the
    ImportError of a missing optional package (`jaxenvs._optional.MissingExtraError` says so
    already; a bare ``No module named 'matplotlib'`` gets the trainer's extra)."""
    if isinstance(error, MissingExtraError):
        return f"{purpose}: {error}"
    name = getattr(error, "name", None) or "a package"
    return f"{purpose} needs {name!r}, which is not installed: {install_hint('train')}"


def progress_line(done, total, seeds, rate, log: MetricsLog, eta, progress: dict | None) -> str:
    parts = [f"steps {done:,}/{total:,}" + (f" x{seeds} seeds" if seeds > 1 else ""), f"{rate:,.0f} steps/s"]
    if progress:
        parts.append(format_progress(progress))
    else:
        parts.append(f"return {log.latest('episode_return'):.4g} | length {log.latest('episode_length'):.3g}")
    parts.append(f"ETA {eta:.0f}s")
    return " | ".join(parts)


class RunOutputs:
    """`train.app.run.Run`'s outputs (it holds the state these methods read)."""

    def warm_up_evaluation(self) -> None:
        """While the training program compiles in the background: compile the programs of the
        final evaluation, by running it once on the untrained policy (results dropped), so after
        training they only run."""
        if not self.args.no_eval:
            with self.say.phase("compiling the evaluation programs", "evaluation warm-up"):
                evaluate(self.trainer, to_host(self.runner.params))

    def start_gif_compile(self) -> None:
        """Compile the GIF's programs in the background while the training runs (`finish` waits
        for them). Not beside the training program's compile: that one already keeps two cores
        busy until it ends, while the training leaves one free (XLA:CPU runs a small batch's
        program on one thread)."""
        if self.args.no_gif:
            return
        params0 = jax.tree.map(lambda x: x[0], to_host(self.runner.params))
        key = key_on_host(self.settings.seed)
        self.gif_job = Background(lambda: plots.compile_gif_programs(self.trainer, params0, key), "jaxenvs-compile")

    def finish(self) -> None:
        config, trainer, run_dir, say = self.config, self.trainer, self.run_dir, self.say
        if jax.process_count() > 1:
            print(f"process {jax.process_index()} of {jax.process_count()}: parameters {params_digest(self.runner.params)}", flush=True)
        if not self.main_process:
            return

        params = to_host(self.runner.params)  # replicated: this process's own copy
        result = None
        if not self.args.no_eval:  # first: evaluation.json is the run's verdict, the pictures come after it
            with say.phase(f"evaluating {what_is_counted(config.env_id)}", "evaluate"):
                result = evaluate(trainer, params)
                result.update(heldout_check(trainer, self.runner))
            self._write("evaluation.json", json.dumps(result, indent=2) + "\n")

        curve_path = run_dir / "learning_curve.png"
        data = (self.log.env_steps, self.log.array("episode_return"), self.log.array("episode_length"))
        kwargs = dict(progress=self.log.progress, env_id=config.env_id,
                      training={n: self.log.array(n) for n in tuned.entry(config.env_id).curves})
        if self.curve is not None:  # drawn by the helper process (train.app.curve_drawing) beside the GIF's work
            plotting = self.curve.draw(plots.curve_figure(*data, config.env_id, **kwargs), curve_path)
        else:  # in a thread: matplotlib's drawing beside the GIF's rollouts, rendering and encoding
            plotting = Background(lambda: plots.plot_learning_curve(*data, curve_path, config.env_id, **kwargs), "jaxenvs-plot")
        say("plotting learning_curve.png (in the background) ...")
        gif, gif_note = None, "(not written: --no-gif)"
        not_installed = []  # outputs a missing package kept from being written: the run is not complete
        if not self.args.no_gif:
            with say.phase("writing policy.gif (seed 0, greedy)", "gif"):
                if self.gif_job is not None:  # compiled during the training (start_gif_compile)
                    self.gif_job.result()
                params0 = jax.tree.map(lambda x: x[0], params)
                try:
                    gif = plots.policy_gif(trainer, params0, run_dir / "policy.gif", key_on_host(self.settings.seed))
                    gif_note = f"(not written: {config.env_id} has no render)"
                except OSError as e:
                    raise StorageError(f"cannot write {run_dir / 'policy.gif'}: {e.strerror or e}") from None
                except ImportError as e:  # the GIF's writer is not installed: the other outputs still come
                    not_installed.append(missing_module(e, "writing policy.gif"))
                    gif_note = f"(not written: {not_installed[-1]})"
        t0 = time.perf_counter()
        curve = None
        try:
            curve = plotting.result()
        except OSError as e:
            raise StorageError(f"cannot write {run_dir / 'learning_curve.png'}: {e.strerror or e}") from None
        except ImportError as e:  # matplotlib is not installed: the other outputs still come
            not_installed.append(missing_module(e, "drawing learning_curve.png"))
        say.times["plot"] = time.perf_counter() - t0
        if curve is not None:
            say(f"plotting learning_curve.png: done in {plotting.duration:.1f}s ({say.times['plot']:.1f}s waited for it)")
        if not not_installed:
            written = (["evaluation.json"] if result is not None else []) + [curve.name] + ([gif.name] if gif else [])
            self.record_outputs(written)
        if result is not None:
            print(format_table(result))
            hint = solved_hint(result, config)
            if hint:
                print(f"hint: {hint}")
        print(f"learning curve: {curve.resolve() if curve else f'(not written: {not_installed[-1]})'}")
        print(f"policy GIF:     {gif.resolve() if gif else gif_note}")
        print(f"checkpoint:     {(run_dir / CHECKPOINT).resolve()}")
        print(f"evaluate again: {from_here(config.env_id, f'{EVALUATE} {run_dir.resolve()}')}")
        print(f"play it:        {from_here(config.env_id, f'jaxenvs play {run_dir.resolve()}')}")
        if trainer.turns.turn_based and trainer.num_agents == 2:  # a person's seat against it
            print(f"play against it: {from_here(config.env_id, f'jaxenvs play {run_dir.resolve()} --human')}")
        if not_installed:
            resume = from_here(config.env_id, f"jaxenvs-train --resume {run_dir.resolve()}")
            raise UsageError(f"{'; '.join(not_installed)}. Every other output is written; once it is installed, {resume} "
                             "writes what is missing")

    def record_outputs(self, written: list[str]) -> None:
        """Write the run directory's `train.checkpoint.OUTPUTS` record, last of all its outputs: the
        update they were written after and their names (``--resume`` calls the run complete only
        with this record and every file it names, `train.app.run.outputs_complete`)."""
        update = int(to_host(self.runner.update).reshape(-1)[0])
        self._write(OUTPUTS, json.dumps({"update": update, "outputs": written}) + "\n")

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
            "learning_curve_drawn_in": "this process" if self.curve is None else "a helper process",
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
        """The command's wall time from ``started`` (``time.perf_counter()`` when its process began,
        as ``time`` measures it), with Python's start-up and the imports (until ``imported``) and
        every phase."""
        t = {"imports": imported - started, **self.say.times}  # Python's start-up included
        parts = ", ".join(f"{k} {v:.1f}s" for k, v in t.items() if v >= 0.05)
        return f"wall time {time.perf_counter() - started:.1f}s of this command ({parts}; the rest: writing files)"

