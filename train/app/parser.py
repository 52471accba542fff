"""The command line of ``jaxenvs-train``: one flag per config field and run setting, generated
from the config classes (`train.configs`), with each flag's help from its field's metadata."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os

from jaxenvs.cli.args import refuse_repeats
from jaxenvs import _cache

from ..configs import ALGORITHMS, RUN_FIELDS, RunSettings
from .exits import EXIT_STATUSES
from ..fields import Bool, Choice, Float, Int, Mapping, Sizes, help_of, rule_of
from ..tuned import training_defaults

__all__ = ["PROG", "DESCRIPTION", "build_parser", "parse_args", "config_overrides", "split_run_settings", "flag_of",
           "config_fields"]

PROG = "jaxenvs-train"
DESCRIPTION = "jaxenvs-train: train PPO (or TRPO, --algo trpo) on a jaxenvs environment and write a run directory."
_FLAG_NAMES = {"env_id": ["--env", "--env-id"], "num_seeds": ["--seeds", "--num-seeds"], "num_chunks": ["--chunks", "--num-chunks"]}


def flag_of(name: str) -> str:
    """The main flag of config field or run setting ``name``."""
    return _FLAG_NAMES.get(name, ["--" + name.replace("_", "-")])[0]


def config_fields() -> dict[str, tuple]:
    """``{field: (rule, first algorithm's default, help, algos)}`` over the fields of every algorithm's config, then
    the run settings (`train.configs.RunSettings`, shared by every algorithm)."""
    fields: dict[str, tuple] = {}
    for algos, cls in [([name], a.config) for name, a in ALGORITHMS.items()] + [(list(ALGORITHMS), RunSettings)]:
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            if f.name in fields:
                fields[f.name][3].extend(algos)
            else:
                fields[f.name] = (rule_of(f), default, help_of(f), list(algos))
    return fields


def _default_text(name: str) -> str:
    per_algo = []
    for algo, a in ALGORITHMS.items():
        f = a.config.__dataclass_fields__.get(name)
        if f is not None:
            d = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            per_algo.append((algo, json.dumps(list(d) if isinstance(d, tuple) else d)))
    if len({d for _, d in per_algo}) == 1:
        return per_algo[0][1]
    return ", ".join(f"{algo} {d}" for algo, d in per_algo)


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"size\": 8}}', got {text!r}")
    return value


def _tuned_note(name: str) -> str:
    tuned = [f"{env} {cfg[name]:g}" if isinstance(cfg[name], float) else f"{env} {cfg[name]}"
             for env, cfg in training_defaults("ppo").items() if name in cfg]
    return f"; tuned: {', '.join(tuned)}" if tuned else ""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=_epilog())
    run = p.add_argument_group("run")
    run.add_argument("--algo", choices=sorted(ALGORITHMS), help="training algorithm (default ppo, or the --config file's \"algo\")")
    run.add_argument("--config", metavar="FILE", help="JSON object of config fields (a run's config.json works; flags override it)")
    run.add_argument("--out", default="runs", metavar="DIR", help="parent directory of run directories (default: runs)")
    run.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR (to its or a new --total-timesteps)")
    run.add_argument("--checkpoint-every", type=float, default=60.0, metavar="S", help="seconds between checkpoints (default: 60)")
    run.add_argument("--no-gif", action="store_true", help="skip policy.gif")
    run.add_argument(
        "--no-eval", action="store_true",
        help="skip the evaluations (the progress measures after every chunk, evaluation.json); "
        "jaxenvs evaluate RUN_DIR runs them later",
    )
    run.add_argument("--show-config", action="store_true", help="print the config the other flags resolve to (JSON) and exit")
    run.add_argument("--devices", type=int, metavar="N",
                     help="split the env batch over the first N devices (default: all whose count divides --num-envs)")
    run.add_argument(
        "--distributed", action="store_true",
        help="start jax.distributed (JAXENVS_COORDINATOR, JAXENVS_NUM_PROCESSES, JAXENVS_PROCESS_ID, or "
        "detected under SLURM / Open MPI / Cloud TPU) and train over every process's devices",
    )
    cfg = p.add_argument_group("config fields (default: the algorithm's default, or the env's tuned value shown)")
    for name, (rule, _, text, algos) in config_fields().items():
        flags = _FLAG_NAMES.get(name, ["--" + name.replace("_", "-")])
        only = "" if len(algos) == len(ALGORITHMS) else f" [{'/'.join(algos)} only]"
        help_text = f"{text} (default: {_default_text(name) if name not in RUN_FIELDS else _run_default(name)}{_tuned_note(name)}){only}"
        kw: dict = dict(dest=name, default=None, help=help_text.strip().replace("%", "%%"))
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
    return refuse_repeats(p)  # a flag given twice is a usage error, not "the last one wins"


def _run_default(name: str) -> str:
    return json.dumps(RunSettings.__dataclass_fields__[name].default)


def _epilog() -> str:
    defaults = training_defaults("ppo")
    names = sorted({k for cfg in defaults.values() for k in cfg})
    rows = [["env"] + names] + [[env] + [f"{cfg[n]:g}" if isinstance(cfg.get(n), float) else str(cfg.get(n, "-")) for n in names]
                                for env, cfg in defaults.items()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    table = "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
    cache = os.environ.get("JAXENVS_CACHE_DIR")
    return (
        "examples:\n"
        "  jaxenvs-train                                    # GridWorld-v0 with its tuned defaults\n"
        "  jaxenvs-train --env PointEnv-v0 --seeds 4        # 4 seeds in one compiled program\n"
        "  jaxenvs-train --algo trpo --env PointEnv-v0      # TRPO instead of PPO\n"
        "  jaxenvs-train --env my_module:MyEnv-v0           # an env ./my_module.py registers\n"
        "  jaxenvs-train --resume RUN_DIR --total-timesteps 400000\n"
        "  jaxenvs evaluate RUN_DIR         # evaluate a run again\n\n"
        f"tuned defaults per environment (ppo; '-' = the default above):\n{table}\n\n"
        "compiled programs are cached on disk (JAX's persistent compilation cache), so a second run of the\n"
        f"same shapes starts in well under a second: directory {_cache.cache_dir() or '(off)'}; set JAXENVS_CACHE_DIR to\n"
        "move it, or to 'off' (or an empty string) to turn it off" + (f" (now {cache!r})" if cache is not None else "") + ".\n"
        + EXIT_STATUSES
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
    return {name: getattr(args, name) for name in config_fields() if getattr(args, name, None) is not None}


def split_run_settings(overrides: dict) -> tuple[dict, dict]:
    """``(config fields, run settings)`` of a dict of both (`config_overrides`)."""
    return ({k: v for k, v in overrides.items() if k not in RUN_FIELDS},
            {k: v for k, v in overrides.items() if k in RUN_FIELDS})
