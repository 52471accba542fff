"""``jaxenvs check ID``: `jaxenvs.check_env` on an environment (``--list-rules``: the rulebook)."""

from __future__ import annotations

import argparse
import sys

from .args import PROG, Command, UsageError, add_env_args, positive_int
from .envs import make_env, message


def run(args) -> int:
    if args.list_rules:  # every rule of `jaxenvs.checker.RULEBOOK`: its id, then what it checks
        from jaxenvs.checker import RULEBOOK

        width = max(map(len, RULEBOOK))
        for rule in RULEBOOK.values():
            print(f"{rule.id:<{width}}  {rule.text}".rstrip())
        return 0
    if args.env_id is None:
        raise UsageError("check needs an environment ID (or --list-rules)")
    env = make_env(args.env_id, args.kwarg)
    from jaxenvs.checker import RULES, EnvCheckError, check_env

    try:
        report = check_env(env, num_steps=args.steps, num_envs=args.num_envs)
    except EnvCheckError as e:
        print(f"{PROG} check: {env.spec.id} FAILED {message(e)}", file=sys.stderr)
        return 1
    except ValueError as e:  # check_env's own argument checks (EnvCheckError is an AssertionError)
        raise UsageError(message(e)) from e
    print(
        f"{env.spec.id}: passed {len(report.rules)} rules ({report.num_envs} envs x {report.num_steps} random "
        f"steps: {report.terminated} terminated, {report.truncated} truncated)"
    )
    print("  passed: " + ", ".join(report.rules))
    skipped = [r for r in RULES if r not in report.rules]
    if skipped:
        print("  not applicable: " + ", ".join(skipped))
    return 0


def arguments(p: argparse.ArgumentParser) -> None:
    add_env_args(p, optional=True)
    p.add_argument("--num-envs", type=positive_int, default=8, metavar="N", help="parallel envs")
    p.add_argument("--steps", type=positive_int, default=100, metavar="T", help="random steps")
    p.add_argument("--list-rules", action="store_true", help="print the rules with what each checks, and exit")


COMMAND = Command(
    "check", run=run, arguments=arguments,
    help="run jaxenvs.check_env on an environment",
)
