"""The ``jaxenvs`` command line (also ``python -m jaxenvs``).

    jaxenvs list                                   registered environments and their traits
    jaxenvs describe GridWorld-v0                  spaces, what the actions mean, params, traits, spec
    jaxenvs play GridWorld-v0 --episodes 3 --render gif --out out.gif
    jaxenvs play --policy runs/GridWorld-v0-... --render gif --out trained.gif
    jaxenvs play runs/GridWorld-v0-... --render human     the same: a run directory as ID
    jaxenvs play runs/TicTacToe-v0-... --opponent perfect --seat 1 --render text   a game against an opponent
    jaxenvs evaluate runs/TicTacToe-v0-... --opponent perfect    a trained run graded, and against an opponent
    jaxenvs check GridWorld-v0                     the conformance checks of jaxenvs.check_env
    jaxenvs check --list-rules                     what each of those checks means
    jaxenvs bench GridWorld-v0 --num-envs 4096 --steps 1000
    jaxenvs verify my_module:ns/FrozenLake-v1 --reference gymnasium:FrozenLake-v1 --reference-kwargs '{"is_slippery": true}'
    jaxenvs profile GridWorld-v0 --num-envs 1 64 4096    compile time, steps/s per num_envs, memory, wrappers
    jaxenvs profile my_module:ns/MyEnv-v0           an env registered by my_module (found from the cwd)

Exit status: 0 on success, 1 when a check fails (``verify``: 0 pass, 1 fail, 2 a mistake, a bad reference or a
missing extra, 3 inconclusive) or something outside the command line is
missing (an optional package, a display, a writable folder), 2 for a mistake in the command line
(unknown flag or environment id, bad value or path). Mistakes are reported as one line on stderr.

Each command is one module of this package declaring its arguments and its run function (its
`jaxenvs.cli.args.Command`); `COMMANDS` lists them in ``--help``'s order and `build_parser`
builds the parser from them.

Run from a shell, the command keeps JAX's compiled programs in a per-user cache (see `jaxenvs._cache`; ``JAXENVS_CACHE_DIR`` moves it, ``JAXENVS_CACHE_DIR=off`` turns it off).
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

from jaxenvs import __version__
from jaxenvs._cache import enable_compilation_cache
from . import bench, check, describe, evaluate, list_envs, play, profile, verify
from .args import PROG, TRAIN_EXTRA, TRAIN_PROG, Failure, Parser, UsageError
from .describe import describe_env
from .players import load_run_policy, play_episodes

__all__ = ["main", "build_parser", "describe_env", "play_episodes", "load_run_policy", "COMMANDS"]

COMMANDS = {c.name: c for c in (list_envs.COMMAND, describe.COMMAND, play.COMMAND, evaluate.COMMAND, check.COMMAND,
                                bench.COMMAND,
                                verify.COMMAND, profile.COMMAND)}


def build_parser() -> Parser:
    """The parser of every command in `COMMANDS`, each from its declaration."""
    parser = Parser(
        prog=PROG,
        description="Reinforcement-learning environments as pure JAX functions.",
        epilog=f"Training is its own command: {TRAIN_PROG} (e.g. {TRAIN_PROG} --env GridWorld-v0; {TRAIN_PROG} --help), "
        f"with the train extra ({TRAIN_EXTRA}); {PROG} play --policy RUN_DIR plays a trained run.",
    )

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for command in COMMANDS.values():
        command.add_to(sub)
    return parser


def _train_pointer(argv: list[str]) -> str:
    """The error for ``jaxenvs train ...``: training is the separate ``jaxenvs-train`` command; the
    same words as its command line (a leading environment id becomes ``--env ID``)."""
    import shlex

    rest = list(argv[1:])
    if rest and not rest[0].startswith("-"):
        rest = ["--env", rest[0]] + rest[1:]
    return (
        f"training is its own command, {TRAIN_PROG}: run {shlex.join([TRAIN_PROG] + rest)} "
        f"(see {TRAIN_PROG} --help; it needs the train extra: {TRAIN_EXTRA})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit status.

    Called without ``argv`` (from the shell) it first enables JAX's persistent compilation cache.
    """
    if argv is None:
        argv = sys.argv[1:]
        enable_compilation_cache()
    if list(argv[:1]) == ["train"]:
        print(f"{PROG}: error: {_train_pointer(list(argv))}", file=sys.stderr)
        return 2
    try:
        args = build_parser().parse_args(list(argv))
        status = COMMANDS[args.command].run(args)
    except UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except Failure as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # stdout closed early (e.g. piped into head): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except SystemExit as e:  # --help and --version
        return e.code if isinstance(e.code, int) else 0
    return int(status or 0)

