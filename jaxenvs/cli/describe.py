"""``jaxenvs describe ID``: spaces, what the actions mean, params, traits, spec (and a game's
move numbering and named opponents)."""

from __future__ import annotations

import argparse

from jaxenvs.games import is_two_player_game, named_opponents
from jaxenvs.registration import describe
from .args import ID_HELP, Command
from .envs import make_env


def describe_env(env_id: str) -> str:
    """What ``jaxenvs describe`` prints (`jaxenvs.describe`), with a bad id as a usage error."""
    env = make_env(env_id, autoreset=False)  # a bad id or an unimportable module: UsageError
    text = describe(env)
    key = env.unwrapped.MOVE_KEY
    if key:  # how the moves are numbered on the board (Tic-Tac-Toe's cells are column-major)
        text += "\n  move numbering: " + "\n    ".join(key.splitlines())
    if is_two_player_game(env):  # the opponents --opponent NAME accepts
        text += "\n  opponents (--opponent NAME):" + "".join(
            f"\n    {name}: {o.meaning}" for name, o in named_opponents(env).items())
    return text



def run(args) -> None:
    print(describe_env(args.env_id))


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("env_id", metavar="ID", help=ID_HELP)


COMMAND = Command(
    "describe", run=run, arguments=arguments,
    help="spaces, actions, params with defaults, traits and spec of an environment",
)
