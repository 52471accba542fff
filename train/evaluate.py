"""Evaluate trained policies: ``python -m jaxenvs.train.evaluate RUN_DIR``.

What each environment measures, its bar ("solved when") and the metrics followed while training
come from its entry in `train.tuned` (environments without one, custom ones included, get the
generic entry: the mean undiscounted return over 1000 episodes, solved when it reaches the spec's
``reward_threshold``, no verdict without one). With several seeds in a run every seed is
evaluated; the run is solved when all are.

``python -m jaxenvs.train.evaluate RUN_DIR`` (a relative or absolute path) prints a table (one
column per seed, what each metric means, the criterion and the verdict; ``--json`` for machines)
and exits 0 when solved (or when the environment has no criterion), 1 when not, 2 on a usage
error (e.g. a directory that is not a run). `progress_metrics` gives the metrics
``jaxenvs-train`` follows after every chunk of training (on `PROGRESS_EPISODES` episodes per seed)
in its progress line and learning curve.
"""

from __future__ import annotations

import argparse
import json
import sys

import jax
import numpy as np

from . import tuned
from .episodes import NUM_EPISODES, first_episodes
from .xla import enable_compilation_cache

__all__ = [
    "evaluate", "evaluate_params", "first_episodes", "progress_metrics", "format_table", "format_progress",
    "solved_hint", "NUM_EPISODES", "PROGRESS_EPISODES", "PROG", "main",
]

PROG = "python -m jaxenvs.train.evaluate"
PROGRESS_EPISODES = 200  # per seed, after every chunk of training


def evaluate_params(trainer, params, key=None, num_episodes: int = NUM_EPISODES) -> dict:
    """Metrics of ONE set of network params (no seed axis) on the trainer's environment, with
    ``solved`` (bool, or None without a criterion)."""
    key = jax.random.key(12345) if key is None else key
    return tuned.entry(trainer.config.env_id).evaluate(trainer, params, key, num_episodes=num_episodes)


def evaluate(trainer, params, key=None, num_episodes: int = NUM_EPISODES) -> dict:
    """Evaluate params with a leading seed axis: ``{"env_id", "num_episodes", "solved_when",
    "seeds": [metrics per seed], "solved": all seeds solved (None: no criterion)}``."""
    num_seeds = jax.tree.leaves(params)[0].shape[0]
    per_seed = [
        evaluate_params(trainer, jax.tree.map(lambda x: x[i], params), key, num_episodes) for i in range(num_seeds)
    ]
    flags = [m["solved"] for m in per_seed]
    solved = None if any(f is None for f in flags) else all(flags)
    return {
        "env_id": trainer.config.env_id,
        "num_episodes": num_episodes,
        "solved_when": tuned.entry(trainer.config.env_id).solved_when,
        "seeds": per_seed,
        "solved": solved,
    }


def progress_metrics(trainer, params, key=None, num_episodes: int = PROGRESS_EPISODES) -> dict:
    """The metrics that measure progress in the trainer's environment (its entry's ``progress``)
    for params with a leading seed axis: ``{name: [value per seed]}``."""
    key = jax.random.key(54321) if key is None else key
    per_seed = evaluate(trainer, params, key, num_episodes=num_episodes)["seeds"]
    return {n: [float(m[n]) for m in per_seed] for n in tuned.entry(trainer.config.env_id).progress}


def format_progress(progress: dict) -> str:
    """``success_rate 0.93 | length_ratio 1.21`` (mean over seeds)."""
    return " | ".join(f"{k} {np.mean(v):.3g}" for k, v in progress.items() if k != "env_steps")


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return "/".join(f"{x:.3f}" for x in v)
    return str(v)


def format_table(result: dict) -> str:
    """A readable report of `evaluate`'s result: one column per seed, each metric's meaning, the
    solved criterion and the verdict (both from the environment's entry in `train.tuned`)."""
    seeds = result["seeds"]
    metrics = tuned.entry(result["env_id"]).metrics
    names = [k for k in seeds[0] if k != "solved"]
    head = ["metric"] + [f"seed {i}" for i in range(len(seeds))] + ["meaning"]
    rows = [[k] + [_cell(m[k]) for m in seeds] + [metrics[k].meaning if k in metrics else ""] for k in names]
    rows.append(["solved"] + [_cell(m["solved"]) for m in seeds] + [""])
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head) - 1)]
    lines = [
        f"evaluation: {result['env_id']}, {result.get('num_episodes', NUM_EPISODES)} episodes per seed, greedy policy"
        f" ({len(seeds)} seed{'s' if len(seeds) != 1 else ''})",
        f"solved when: {result.get('solved_when') or 'no criterion for this environment (its spec has no reward_threshold)'}",
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in [head] + rows]
    if result["solved"] is None:
        verdict = "no verdict (no criterion for this environment)"
    elif result["solved"]:
        verdict = "SOLVED" + (" (every seed)" if len(seeds) > 1 else "")
    else:
        failed = [str(i) for i, m in enumerate(seeds) if not m["solved"]]
        verdict = f"NOT SOLVED (seed{'s' if len(failed) > 1 else ''} {', '.join(failed)} below the bar)"
    lines.append(f"verdict: {verdict}")
    return "\n".join(line.rstrip() for line in lines)


def solved_hint(result: dict, config) -> str | None:
    """What to try when an environment without tuned training values (the generic defaults) ends
    unsolved or without a verdict; None when there is nothing to suggest."""
    if tuned.entry(config.env_id).training.get(config.ALGO) or result["solved"] is True:
        return None
    more = f"--total-timesteps {config.total_timesteps * 10:,}".replace(",", "")
    if result["solved"] is None:
        return (f"{config.env_id} has no tuned training values and its spec no reward_threshold, so there is no verdict; "
                f"register it with reward_threshold=... to get one, and compare mean_return against what an optimal "
                f"policy earns (sparse-reward envs often need {more} or more)")
    return (f"{config.env_id} has no tuned training values and the generic defaults "
            f"({config.total_timesteps:,} env steps) did not reach its bar; try {more} (sparse rewards need many more "
            f"steps), more seeds (--seeds 4), or another --lr / --ent-coef")


def main(argv=None) -> int:
    """Exit status: 0 solved (or no criterion), 1 evaluated but not solved, 2 usage error."""
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0],
        epilog="exit status: 0 solved (or no criterion), 1 evaluated but not solved, 2 usage error",
    )
    parser.add_argument("run_dir", help="a run directory written by jaxenvs-train (holds checkpoint.msgpack); "
                                        "relative to the current directory or absolute")
    parser.add_argument("--seed", type=int, default=12345, help="PRNG seed of the evaluation episodes (default: 12345)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON (for machines) instead of a table")
    args = parser.parse_args(argv)
    if not 0 <= args.seed < 2**63:
        parser.error(f"--seed {args.seed}: must be an integer in [0, {2**63 - 1}]")
    from .checkpoint import load_run
    from .envids import cwd_on_import_path

    cwd_on_import_path()  # a run of a module:id env imports its module again
    enable_compilation_cache()
    try:
        trainer, runner, _ = load_run(args.run_dir)
    except (ValueError, TypeError, KeyError, OSError, ImportError) as e:
        parser.error(e.args[0] if isinstance(e, KeyError) and e.args else str(e))  # not a run, a corrupt checkpoint: exit 2
    result = evaluate(trainer, runner.params, jax.random.key(args.seed))
    print(json.dumps(result, indent=2) if args.json else format_table(result))
    return 0 if result["solved"] in (True, None) else 1


if __name__ == "__main__":
    sys.exit(main())
