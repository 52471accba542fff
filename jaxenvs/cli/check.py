"""``jaxenvs check ID``: `jaxenvs.check_env` on an environment (``--list-rules``: the rulebook);
``jaxenvs check --port module:factory`` on the environment a factory of one's own returns (a jaxenvs
Environment or a third-party one, adapted by `jaxenvs.adapters.functional.from_functional`).
`port_env` is what ``jaxenvs verify --port`` uses too."""

from __future__ import annotations

import argparse
import sys

from jaxenvs.adapters.functional import from_functional
from jaxenvs.checker import RULEBOOK, RULES, EnvCheckError, check_env
from jaxenvs.core import Environment
from jaxenvs.wrappers import AutoReset
from jaxenvs.wrappers.base import strip_autoreset
from .args import PROG, Command, UsageError, add_env_args, positive_int
from .envs import import_path_for, make_env, message


PORT_HELP = (
    "MODULE:FACTORY, instead of ID: the environment FACTORY(**kwargs) returns (kwargs from --kwarg): a jaxenvs "
    "Environment, a third-party functional env (Pgx, gymnax-style, Brax/MuJoCo Playground, Jumanji/dm_env-style "
    "TimeStep; adapted by jaxenvs.adapters.functional.from_functional) or an (env, params) pair as gymnax.make returns; "
    "modules are imported from the current directory too"
)


def port_env(text: str, kwargs=(), autoreset: bool = True):
    """The jaxenvs environment that ``--port MODULE:FACTORY`` names: ``FACTORY(**kwargs)``'s return
    value, adapted with `from_functional` unless it is a jaxenvs Environment already, with
    `jaxenvs.wrappers.AutoReset` outermost when ``autoreset``. Every failure (a malformed value, a
    module that cannot be imported, no such callable, a factory that raises, a return value no
    style fits) is a one-line `UsageError`."""
    module_name, sep, name = text.partition(":")
    if not sep or not module_name or not name:
        raise UsageError(f"--port: expected MODULE:FACTORY (e.g. my_ports:make_env), got {text!r}")
    import importlib

    import_path_for(text)
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 -- ImportError, or whatever the module raises while it is imported
        raise UsageError(f"--port {text!r}: cannot import {module_name!r}: {type(e).__name__}: {message(e)}") from e
    factory = getattr(module, name, None)
    if not callable(factory):
        raise UsageError(f"--port {text!r}: {module_name!r} has no callable {name!r}")
    try:
        made = factory(**dict(kwargs))
    except Exception as e:  # noqa: BLE001 -- the user's factory failing is a bad --port, not a failing env
        raise UsageError(f"--port {text!r} raised {type(e).__name__}: {message(e)}") from e

    params = None
    if isinstance(made, tuple) and len(made) == 2 and not isinstance(made[0], (tuple, Environment)):
        made, params = made  # gymnax.make's (env, params)
    try:
        env = from_functional(made, params)
    except (TypeError, ValueError) as e:
        raise UsageError(f"--port {text!r} returned {type(made).__name__}, not an environment: {message(e)}") from e
    env = strip_autoreset(env)
    return AutoReset(env) if autoreset else env


def run(args) -> int:
    if args.list_rules:  # every rule of `jaxenvs.checker.RULEBOOK`: its id, then what it checks

        width = max(map(len, RULEBOOK))
        for rule in RULEBOOK.values():
            print(f"{rule.id:<{width}}  {rule.text}".rstrip())
        return 0
    if args.env_id is None and args.port is None:
        raise UsageError("check needs an environment ID (or --list-rules) or --port MODULE:FACTORY")
    if args.env_id is not None and args.port is not None:
        raise UsageError(f"check takes an environment ID or --port, not both (got {args.env_id!r} and {args.port!r})")
    env = make_env(args.env_id, args.kwarg) if args.port is None else port_env(args.port, args.kwarg)
    label = args.env_id if args.port is None else args.port
    if env.spec is not None:
        label = env.spec.id

    try:
        report = check_env(env, num_steps=args.steps, num_envs=args.num_envs)
    except EnvCheckError as e:
        print(f"{PROG} check: {label} FAILED {message(e)}", file=sys.stderr)
        return 1
    except ValueError as e:  # check_env's own argument checks (EnvCheckError is an AssertionError)
        raise UsageError(message(e)) from e
    print(
        f"{label}: passed {len(report.rules)} rules ({report.num_envs} envs x {report.num_steps} random "
        f"steps: {report.terminated} terminated, {report.truncated} truncated)"
    )
    print("  passed: " + ", ".join(report.rules))
    skipped = [r for r in RULES if r not in report.rules]
    if skipped:
        print("  not applicable: " + ", ".join(skipped))
    return 0


def arguments(p: argparse.ArgumentParser) -> None:
    add_env_args(p, optional=True)
    p.add_argument("--port", default=None, metavar="MODULE:FACTORY", help=PORT_HELP)
    p.add_argument("--num-envs", type=positive_int, default=8, metavar="N", help="parallel envs")
    p.add_argument("--steps", type=positive_int, default=100, metavar="T", help="random steps")
    p.add_argument("--list-rules", action="store_true", help="print the rules with what each checks, and exit")


COMMAND = Command(
    "check", run=run, arguments=arguments,
    help="run jaxenvs.check_env on an environment",
)
