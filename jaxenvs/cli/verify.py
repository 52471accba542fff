"""``jaxenvs verify ID --reference REF``: `jaxenvs.testing.verify_port` on a registered port
(exit 0 pass, 1 fail, 2 a mistake, a bad reference or a missing extra, 3 inconclusive)."""

from __future__ import annotations

import argparse
from pathlib import Path

from jaxenvs.adapters.gymnax_states import STATE_TO_JAX
from .args import Command, UsageError, add_env_args, int_arg, json_object, positive_float, probability, seed_arg
from .check import PORT_HELP, port_env
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
    built = [probe]

    def once():
        """The env built above, then (should anything ask again) a new one: the factory runs once a run."""
        return built.pop() if built else factory()

    return once


def shipped_state_mapping(env_id: str, reference: str):
    """The shipped `state_to_jax` of a `gymnax/ID` port checked against `gymnasium:ID`
    (`jaxenvs.adapters.gymnax_states`: the exact tier), else None."""
    prefix, _, name = reference.partition(":")
    if prefix != "gymnasium" or env_id != f"gymnax/{name}":
        return None

    return STATE_TO_JAX.get(name)


def run(args) -> int:
    import_path_for(args.reference)
    if args.save is not None:
        parent = Path(args.save).resolve().parent
        if not parent.is_dir():
            raise UsageError(f"--save {args.save!r}: the folder {str(parent)!r} does not exist")
    if (args.env_id is None) == (args.port is None):
        raise UsageError("verify needs the port as an environment ID or as --port MODULE:FACTORY (one of the two)")
    if args.port is None:
        env = make_env(args.env_id, args.kwarg, autoreset=False)
    else:
        env = port_env(args.port, args.kwarg, autoreset=False)
    label = env.spec.id if env.spec is not None else args.port
    factory = reference_factory(args.reference, args.reference_kwargs)
    try:
        from jaxenvs.testing import PortMismatch, VerifySettings, verify_port  # lazy: the verify extra (scipy) is optional
    except ImportError as e:
        raise UsageError(f"jaxenvs verify needs the verify extra: pip install 'jaxenvs[verify]' ({message(e)})") from e

    try:  # the statistical settings, checked once (power > alpha)
        settings = VerifySettings(**{k: getattr(args, k) for k in ("alpha", "detect", "power", "coverage", "detect_local")
                                     if getattr(args, k) is not None})
    except ValueError as e:
        raise UsageError(message(e)) from e
    options = {"max_episodes": args.max_episodes} if args.max_episodes is not None else {}
    if args.budget is not None:
        options["budget_s"] = args.budget
    if options.get("max_episodes", args.episodes) < args.episodes:
        raise UsageError(f"--max-episodes {options['max_episodes']} is below --episodes {args.episodes}")
    mapping = shipped_state_mapping(args.env_id, args.reference)
    if mapping is not None:
        options["state_to_jax"] = mapping
    try:
        report = verify_port(env, factory, num_episodes=args.episodes, seed=args.seed, raise_inconclusive=False,
                             settings=settings, **options)
    except PortMismatch as e:
        if e.report is None:  # the spaces differ: nothing was run
            print(f"{label}: verdict FAIL: {message(e)}")
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
    add_env_args(p, optional=True)
    p.add_argument("--port", default=None, metavar="MODULE:FACTORY", help=PORT_HELP)
    p.add_argument(
        "--reference", required=True, metavar="REF",
        help="the original: 'gymnasium:ID' (gymnasium.make), 'pyspiel:GAME' (an OpenSpiel game, pyspiel.load_game) "
        "or 'module:factory' (a zero-argument callable returning a gymnasium.Env, a pettingzoo ParallelEnv or AECEnv, "
        "or a pyspiel.Game; e.g. pettingzoo.classic.tictactoe.tictactoe:env; modules are imported from the current "
        "directory too); called once. A gymnax/ID port against gymnasium:ID is checked with the shipped state "
        "mapping (jaxenvs.adapters.gymnax_states): the exact tier",
    )
    p.add_argument("--reference-kwargs", type=json_object, default={}, metavar="JSON",
                   help="keyword arguments of the reference, as a JSON object")
    p.add_argument("--episodes", type=int_arg(10), default=1000, metavar="N", help="episodes per side to start with")
    p.add_argument("--max-episodes", type=int_arg(10), default=None, metavar="N",
                   help="episodes per side at most (default: verify_port's MAX_EPISODES)")
    p.add_argument("--budget", type=positive_float, default=None, metavar="SECONDS",
                   help="CPU seconds of this process to draw episodes in until every statistic reaches --detect, not "
                   "wall-clock time, so a busy machine does not change the verdict; drawing also stops at 3 times as many "
                   "wall-clock seconds not spent waiting for a CPU, for a reference that sleeps (default: verify_port's "
                   "BUDGET_S, 60)")
    p.add_argument("--seed", type=seed_arg, default=0, metavar="S", help="random seed, in [0, 2**63)")
    p.add_argument("--alpha", type=probability, default=None, help="false-alarm rate (default: verify_port's ALPHA)")
    p.add_argument("--detect", type=probability, default=None, help="effect a pass must detect (default: DETECT)")
    p.add_argument("--power", type=probability, default=None, help="probability of detecting it (default: POWER)")
    p.add_argument("--coverage", type=probability, default=None, metavar="SHARE",
                   help="the local guarantee covers every (observation, action) stratum holding at least this share of "
                   "the visits (default: COVERAGE, 0.01)")
    p.add_argument("--detect-local", type=probability, default=None, metavar="TV",
                   help="total variation a pass must detect at every covered stratum, whatever --detect is (default: "
                   "DETECT_LOCAL, 0.1)")
    p.add_argument("--save", default=None, metavar="PATH", help="write the report as a JSON certificate")


COMMAND = Command(
    "verify", run=run, arguments=arguments,
    help="verify a port against the environment it was ported from (exit 0 pass, 1 fail, 3 inconclusive)",
    description="jaxenvs.testing.verify_port on a registered port: prints the report's table; exit status 0 for "
        "pass, 1 for fail, 2 for a mistake in the command line, a reference that cannot be built or a missing extra, "
        "3 for inconclusive.",
)
