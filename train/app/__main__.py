"""``jaxenvs-train`` (also ``python -m jaxenvs.train``): train PPO (or TRPO, ``--algo trpo``)
on a jaxenvs environment and write a run directory.

    jaxenvs-train                                     # GridWorld-v0 with its tuned defaults
    jaxenvs-train --env PointEnv-v0 --seeds 4         # 4 seeds in one compiled program
    jaxenvs-train --algo trpo --env PointEnv-v0       # TRPO instead of PPO
    jaxenvs-train --env my_module:MyEnv-v0            # an env that ./my_module.py registers
    jaxenvs-train --resume runs/GridWorld-v0-20250101-120000 --total-timesteps 400000
    srun jaxenvs-train --distributed                  # one process per host (SLURM), all their devices

The run is split into ``--chunks N`` chunks of updates (exactly N calls, lengths differing by at
most one update; ``config.json`` records the count used); each chunk is one call of one compiled
program (all seeds vmapped). Between chunks the policy is
evaluated on what measures progress in its environment (see `train.grading`) and a
progress line (steps, steps/s, that measure, ETA) is printed (after every chunk on a terminal, at
most every 2 s in a log), so printing costs nothing inside the compiled program. Every phase
(initialisation, compilation, evaluation, GIF) says what it does and how long it took, and the
last line gives the wall time of the whole command. The initial state's program compiles in a
background thread (XLA compiles without Python's GIL; with XLA's cheapest compile: it runs once)
while the training program is traced; the training program then compiles in the background while
the progress evaluation's and the final evaluation's and GIF's programs compile on the main thread
(the GIF's also with the cheapest compile); the learning curve is drawn by a helper process
(`train.app.curve_drawing`, which imported matplotlib at a lower priority while the run started) while
the GIF is written.

Every config field has a flag (``--help`` lists them with their defaults and each environment's
tuned values; ``--show-config`` prints the resolved config). Config values are checked before
anything runs; training that produces a non-finite loss, gradient or parameter stops with an
error (exit status 1), keeping the last good checkpoint. Usage errors exit with status 2
(`train.app.exits` lists every status).
Compiled programs are cached on disk (``$JAXENVS_CACHE_DIR``, default ``~/.cache/jaxenvs/jax``;
``off`` or empty turns it off; `jaxenvs._cache`). A run directory ``<out>/<env>-<YYYYmmdd-HHMMSS>/`` receives:

* ``config.json``: the full config, `train.configs.PPOConfig` or
  `train.configs.TRPOConfig`, with its ``"algo"`` and the run settings
  (`train.configs.RunSettings`: ``--seeds``, ``--seed``, ``--chunks``) as its ``"run"``
  object (``--config FILE`` reads one back);
* ``metrics.csv`` (one row per update: env steps, return/length mean and std over seeds, losses)
  and ``metrics.json`` (the same per seed, ``null`` where no episode ended; and the progress
  evaluations after every chunk);
* ``learning_curve.png``, ``policy.gif`` (seed 0, greedy), ``evaluation.json``;
* ``timings.json``: the command's wall time and phases, and what JAX traced, lowered and compiled
  (programs compiled, or loaded from the cache, with their seconds: `train.xla.CompileLog`);
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

The command lives in `train.app.command` (exit statuses), `train.app.parser` (flags), `train.app.run` (the
steps of a run) and `train.app.metrics_log` (metrics files); this file is its entry point.
"""

import os
import sys
import time

from jaxenvs._optional import MissingExtraError, require
from ..xla import use_safe_cpu_scheduler
from .curve_drawing import CurveProcess
from .timing import Background


def _process_started() -> float:
    """``time.perf_counter()``'s reading when this process began (Python's own start and the imports
    that ran before this module, jax's among them, included): from Linux's ``/proc``, to its clock
    tick (10 ms); elsewhere the time this module was imported."""
    now = time.perf_counter()
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime, in clock ticks
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return now - max(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return now


_STARTED = _process_started()  # the command's wall time is measured from the process's start, as `time` does


def main(argv=None) -> int:
    """``jaxenvs-train``'s entry point (see the module docstring)."""
    curve = None
    if argv is None:  # the command owns the process: matplotlib is imported by a helper, from now on
        curve = CurveProcess.start()
    use_safe_cpu_scheduler()  # the command owns its process: XLA:CPU's safe scheduler (train.xla) costs nothing

    try:
        for module in ("flax", "optax"):
            require(module, extra="train", purpose="jaxenvs-train")
    except MissingExtraError as e:
        if curve is not None:
            curve.close()
        print(f"jaxenvs-train: error: {e}", file=sys.stderr)
        return 2
    from .command import main as run_command  # lazy: imported here, so the imports count in the wall time

    code = run_command(argv, started=_STARTED if argv is None else None, curve=curve)  # in-process calls: from now
    if argv is None:  # the command owns the process
        if Background.any_running():  # interrupted during the background compile: see train.app.timing.Background
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
