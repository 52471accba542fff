"""The ``jaxenvs`` command line's grammar: a command's declaration (`Command`), the parser and its
help format, the argument types, the two errors a command raises (`UsageError`: exit 2,
`Failure`: exit 1), and the ID and ``--kwarg`` arguments most commands share."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import math
from pathlib import Path
from typing import Any, Callable

__all__ = ["Command", "UsageError", "Failure", "Parser", "int_arg", "add_env_args", "refuse_repeats"]

PROG = "jaxenvs"
SEED_LIMIT = 2**63  # jax.random.key takes seeds that fit a signed 64-bit integer
RENDER_MODES = ("text", "human", "gif", "mp4")
TRAIN_PROG = "jaxenvs-train"
TRAIN_EXTRA = "pip install 'jaxenvs[train]'"


class UsageError(Exception):
    """A mistake in the command line (exit status 2)."""


class Failure(Exception):
    """A command that could not do its job for a reason outside the command line (exit status 1)."""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, unless there is none to show (None, off, empty) or the help
    text already says it."""

    def _get_help_string(self, action):
        nothing = action.default is None or action.default is False or action.default == []
        if nothing or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


# actions that keep one value: given twice, the second would silently replace the first
_SINGLE_VALUED = (argparse._StoreAction, argparse._StoreConstAction, argparse.BooleanOptionalAction)
_ONCE_CLASSES: dict = {}


def _once(cls):
    """`cls` (an argparse action class) refusing a second occurrence of its destination in one
    command line (`--reference a --reference b`, `--env X --env-id Y`, `--gif --no-gif`)."""
    if cls not in _ONCE_CLASSES:
        def __call__(self, parser, namespace, values, option_string=None):
            given = parser.__dict__.setdefault("_given_once", {})
            if self.dest in given:
                first = given[self.dest]
                shown = "/".join(self.option_strings)
                message = (f"argument {shown}: given more than once ({first} and {_shown(option_string, values)}); "
                           "it takes one value: give it once")
                if isinstance(parser, Parser):
                    parser.error(message)
                parser.exit(2, f"{parser.prog}: error: {message} (see {parser.prog} --help)\n")
            given[self.dest] = _shown(option_string, values)
            cls.__call__(self, parser, namespace, values, option_string)

        _ONCE_CLASSES[cls] = type(cls.__name__, (cls,), {"__call__": __call__, "_once": True})
    return _ONCE_CLASSES[cls]


def _shown(option_string, values) -> str:
    if values is None or values == [] or isinstance(values, bool):
        return str(option_string)
    text = " ".join(map(str, values)) if isinstance(values, list) else str(values)
    return f"{option_string} {text}"


def refuse_repeats(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make every single-valued option of `parser` (and of its subcommands' parsers) refuse to be
    given twice in one command line, with a one-line usage error, instead of keeping the last
    value. Options meant to repeat (``action="append"``, ``"count"``) are left as they are."""
    for action in parser._actions:
        if action.option_strings and isinstance(action, _SINGLE_VALUED) and not getattr(type(action), "_once", False):
            action.__class__ = _once(type(action))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                refuse_repeats(sub)
    if not isinstance(parser, Parser) and "parse_known_args" not in parser.__dict__:
        parse = parser.parse_known_args

        def parse_known_args(args=None, namespace=None):
            parser._given_once = {}  # what this command line gave
            return parse(args, namespace)

        parser.parse_known_args = parse_known_args
    return parser


class Parser(argparse.ArgumentParser):
    """The ``jaxenvs`` parsers: defaults shown in ``--help``, a usage mistake raised as
    `UsageError` (one line, exit 2), and a single-valued option given twice refused
    (`refuse_repeats`)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)")

    def parse_known_args(self, args=None, namespace=None):
        refuse_repeats(self)
        self._given_once = {}
        return super().parse_known_args(args, namespace)


@dataclasses.dataclass(frozen=True)
class Command:
    """One ``jaxenvs`` command, declared in its own module (`jaxenvs.cli.COMMANDS` lists them in
    ``--help``'s order): its name, its help line and ``--help`` description, ``arguments(parser)``
    adding its arguments, and ``run(args)`` returning the exit status (None: 0)."""

    name: str
    run: Callable[[argparse.Namespace], Any]
    help: str
    arguments: Callable[[argparse.ArgumentParser], None] = lambda p: None
    description: str | None = None

    def add_to(self, subparsers) -> None:
        extra = {} if self.description is None else {"description": self.description}
        self.arguments(subparsers.add_parser(self.name, help=self.help, **extra))


# ---- argument types ----------------------------------------------------------------------------
def int_arg(lo: int, hi: int | None = None, allowed: str | None = None):
    """An argparse ``type``: an integer in ``[lo, hi)`` (no upper bound when ``hi`` is None), else
    ``expected <allowed>, got '<text>'`` (``allowed`` defaults to ``an integer >= lo``)."""
    allowed = allowed or f"an integer >= {lo}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < lo or (hi is not None and value >= hi):
            raise argparse.ArgumentTypeError(f"expected {allowed}, got {text!r}")
        return value

    return parse


positive_int = int_arg(1)
non_negative_int = int_arg(0)
seed_arg = int_arg(0, SEED_LIMIT, "an integer in [0, 2**63)")


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return value


def json_object(text: str) -> dict:
    import json

    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r} ({e})") from e
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"is_slippery\": true}}', got {text!r}")
    return value


def env_kwarg(text: str) -> tuple[str, Any]:
    name, sep, raw = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        value = raw
    return name, value


def render_mode(text: str) -> str:
    if text in RENDER_MODES:
        return text
    suffix = Path(text).suffix.lower()
    if suffix in (".gif", ".mp4"):
        raise argparse.ArgumentTypeError(
            f"expected one of {', '.join(RENDER_MODES)}, got {text!r}; write --render {suffix[1:]} --out {text}"
        )
    raise argparse.ArgumentTypeError(f"expected one of {', '.join(RENDER_MODES)}, got {text!r}")


ID_HELP = (
    "registered environment id, e.g. GridWorld-v0, or module:id for an environment of your own, e.g. "
    "my_envs:MyEnv-v0 (imports my_envs, from the current directory too, which registers MyEnv-v0)"
)



def add_env_args(p: argparse.ArgumentParser, optional: bool = False, policy: bool = False) -> None:
    p.add_argument(
        "env_id", metavar="ID", nargs="?" if optional else None, default=None,
        help=ID_HELP
        + (" (with --policy RUN_DIR: the run's; a run directory here means --policy RUN_DIR)" if policy else ""),
    )
    p.add_argument(
        "--kwarg", "-k", type=env_kwarg, action="append", default=[], metavar="NAME=VALUE",
        help="passed to jaxenvs.make (a params field or a constructor argument); repeatable",
    )
