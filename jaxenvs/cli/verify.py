"""``jaxenvs verify ID --reference REF``: `jaxenvs.testing.verify_port` on a registered port
(exit 0 pass, 1 fail, 2 a mistake, a bad reference or a missing extra, 3 inconclusive)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .args import Command, UsageError, add_env_args, int_arg, json_object, positive_float, probability, seed_arg
from .envs import import_path_for, make_env, message


def reference_factory(text: str, kwargs: dict):
    """The reference `--reference` names: a zero-argument factory (`gymnasium:ID`,
    `module:callable`) or, for `pyspiel:GAME` or a factory returning one, the `pyspiel.Game`
    itself. Every failure to build it is a `UsageError` (exit 2)."""
    prefix, sep, name = text.partition(":")
    if not sep or not prefix or not name:
        raise UsageError(f"--reference: expected 'gymnasium:ID', 'pyspiel:GAME' or 'module:factory', got {text!r}")
    if prefix == "gymnasium":
        try:
            import gymnasium
        except ImportError as e:
            raise UsageError(f"--reference gymnasium:... needs gymnasium: pip install 'jaxenvs[verify,gymnasium]' "
                             f"({message(e)})") from e
        try:
            gymnasium.spec(name)
        except Exception as e:  # noqa: BLE001 -- gymnasium's own errors (NameNotFound, VersionNotFound, ...)
            raise UsageError(f"--reference {text!r}: {message(e)}") from e

        def factory():
            return gymnasium.make(name, **kwargs)
    elif prefix == "pyspiel":
        try:
            import pyspiel
        except ImportError as e:
            raise UsageError(f"--reference pyspiel:... needs OpenSpiel: pip install 'jaxenvs[verify,games]' "
                             f"({message(e)})") from e

        def factory():
            return pyspiel.load_game(name, kwargs) if kwargs else pyspiel.load_game(name)
    else:
        import importlib

        try:
            module = importlib.import_module(prefix)
        except ImportError as e:
            raise UsageError(f"--reference {text!r}: cannot import {prefix!r}: {message(e)}") from e
        fn = getattr(module, name, None)
        if not callable(fn):
            raise UsageError(f"--reference {text!r}: {prefix!r} has no callable {name!r}")

        def factory():
            return fn(**kwargs)

    try:
        probe = factory()
    except Exception as e:  # noqa: BLE001 -- whatever the user's factory raises is a bad reference, not a failing port
        raise UsageError(f"--reference {text!r} with --reference-kwargs {kwargs!r} raised {type(e).__name__}: "
                         f"{message(e)}") from e
    if probe is None:
        raise UsageError(f"--reference {text!r} returned None; it must return a gymnasium.Env, a pettingzoo "
                         "ParallelEnv or AECEnv, or a pyspiel.Game")
    if type(probe).__module__ == "pyspiel" and hasattr(probe, "new_initial_state"):
        return probe  # an OpenSpiel game: verify_port takes the game itself
    close = getattr(probe, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # noqa: BLE001 -- a probe that cannot close is not the port's fault
            pass
    return factory


def run(args) -> int:
    import_path_for(args.reference)
    if args.save is not None:
        parent = Path(args.save).resolve().parent
        if not parent.is_dir():
            raise UsageError(f"--save {args.save!r}: the folder {str(parent)!r} does not exist")
    env = make_env(args.env_id, args.kwarg, autoreset=False)
    factory = reference_factory(args.reference, args.reference_kwargs)
    try:
        from jaxenvs.testing import PortMismatch, verify_port
    except ImportError as e:
        raise UsageError(f"jaxenvs verify needs the verify extra: pip install 'jaxenvs[verify]' ({message(e)})") from e

    options = {k: getattr(args, k) for k in ("alpha", "detect", "power", "max_episodes") if getattr(args, k) is not None}
    if args.budget is not None:
        options["budget_s"] = args.budget
    if options.get("max_episodes", args.episodes) < args.episodes:
        raise UsageError(f"--max-episodes {options['max_episodes']} is below --episodes {args.episodes}")
    try:
        report = verify_port(env, factory, num_episodes=args.episodes, seed=args.seed, raise_inconclusive=False, **options)
    except PortMismatch as e:
        if e.report is None:  # the spaces differ: nothing was run
            print(f"{env.spec.id}: verdict FAIL: {message(e)}")
            return 1
        report = e.report
    except ImportError as e:  # a missing extra (scipy, gymnasium, pettingzoo, ...)
        raise UsageError(message(e)) from e
    except (TypeError, ValueError, AttributeError) as e:  # a reference or an argument verify_port refuses
        raise UsageError(message(e)) from e
    print(report)
    if args.save is not None:
        try:
            print(f"saved the report to {report.save(args.save)}")
        except OSError as e:
            raise UsageError(f"--save {args.save!r}: {message(e)}") from e
    return {"pass": 0, "fail": 1, "inconclusive": 3}[report.verdict]



def arguments(p: argparse.ArgumentParser) -> None:
    add_env_args(p)
    p.add_argument(
        "--reference", required=True, metavar="REF",
        help="the original: 'gymnasium:ID' (gymnasium.make), 'pyspiel:GAME' (an OpenSpiel game, pyspiel.load_game) "
        "or 'module:factory' (a zero-argument callable returning a gymnasium.Env, a pettingzoo ParallelEnv or AECEnv, "
        "or a pyspiel.Game; e.g. pettingzoo.classic.tictactoe.tictactoe:env; modules are imported from the current "
        "directory too)",
    )
    p.add_argument("--reference-kwargs", type=json_object, default={}, metavar="JSON",
                   help="keyword arguments of the reference, as a JSON object")
    p.add_argument("--episodes", type=int_arg(10), default=1000, metavar="N", help="episodes per side to start with")
    p.add_argument("--max-episodes", type=int_arg(10), default=None, metavar="N",
                   help="episodes per side at most (default: verify_port's MAX_EPISODES)")
    p.add_argument("--budget", type=positive_float, default=None, metavar="SECONDS",
                   help="time to draw more episodes in until every statistic reaches --detect (default: verify_port's "
                   "BUDGET_S, 60)")
    p.add_argument("--seed", type=seed_arg, default=0, metavar="S", help="random seed, in [0, 2**63)")
    p.add_argument("--alpha", type=probability, default=None, help="false-alarm rate (default: verify_port's ALPHA)")
    p.add_argument("--detect", type=probability, default=None, help="effect a pass must detect (default: DETECT)")
    p.add_argument("--power", type=probability, default=None, help="probability of detecting it (default: POWER)")
    p.add_argument("--save", default=None, metavar="PATH", help="write the report as a JSON certificate")


COMMAND = Command(
    "verify", run=run, arguments=arguments,
    help="verify a port against the environment it was ported from (exit 0 pass, 1 fail, 3 inconclusive)",
    description="jaxenvs.testing.verify_port on a registered port: prints the report's table; exit status 0 for "
        "pass, 1 for fail, 2 for a mistake in the command line, a reference that cannot be built or a missing extra, "
        "3 for inconclusive.",
)
