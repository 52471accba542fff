"""``jaxenvs evaluate RUN_DIR``: a trained run's policy graded on what its environment measures.

RUN_DIR (relative or absolute) is a run directory of ``jaxenvs-train``. The command prints a table
(one column per seed, what each metric means, the criterion and the verdict; ``--json`` for
machines; `jaxenvs.train.grading`) and exits 0 when solved (or when the environment has no
criterion), 1 when not, 2 on a usage error (e.g. a directory that is not a run). For a two-player
zero-sum game, ``--opponent NAME|RUN_DIR`` (repeatable) adds a head-to-head table: win / draw /
loss of the greedy policy in each seat against a named opponent of the game (``random`` (legal),
``perfect`` (Tic-Tac-Toe's minimax player), ``heuristic`` (Connect Four's win / block / no
blunder / centre player), ``win-block``) or the greedy policy of another run directory;
``--search N`` and ``--lookahead N`` (the flags of ``jaxenvs play``, `jaxenvs.cli.players`) let
the policy search or look ahead (both default to the run's own).
"""

from __future__ import annotations

import argparse
import json

from jaxenvs.games.search import check_budget, supports_search
from jaxenvs.prng import key_on_host
from .args import TRAIN_EXTRA, Command, Failure, UsageError, positive_int, seed_arg
from .envs import message
from .players import add_opponent_args, named_opponent

__all__ = ["COMMAND", "arguments", "run"]

GAMES = 1000  # per seat and seed against each --opponent (the evaluation's episodes)


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory written by jaxenvs-train (holds "
                                                      "checkpoint.msgpack); relative to the current directory or absolute")
    p.add_argument("--seed", type=seed_arg, default=12345, metavar="S",
                   help="PRNG seed of the evaluation episodes, in [0, 2**63)")
    p.add_argument("--json", action="store_true", help="print the result as JSON (for machines) instead of a table")
    add_opponent_args(p, "play the greedy policy in each seat against it and report win / draw / loss per seat; "
                         "repeatable", many=True)
    p.add_argument("--games", type=positive_int, default=GAMES, metavar="N",
                   help="games per seat and seed against each --opponent")


def run(args) -> int:
    for flag, value in (("--search", args.search), ("--lookahead", args.lookahead)):
        if value and not args.opponent:
            raise UsageError(f"{flag} N plays the head-to-head games of --opponent NAME|RUN_DIR; give --opponent too")
    try:
        from jaxenvs.train.app.envids import cwd_on_import_path  # lazy: the trainer (the train extra) is optional for jaxenvs
        from jaxenvs.train.checkpoint import load_run  # lazy: the trainer (the train extra) is optional for jaxenvs
        from jaxenvs.train.curricula import HeldOutOverlap, heldout_check  # lazy: the trainer (the train extra) is optional for jaxenvs
        from jaxenvs.train.episodes import eval_env  # lazy: the trainer (the train extra) is optional for jaxenvs
        from jaxenvs.train.grading import evaluate, format_head_to_head, format_table, head_to_head_runs  # lazy: the trainer (the train extra) is optional for jaxenvs
        from jaxenvs.train.policy import run_lookahead, run_search  # lazy: the trainer (the train extra) is optional for jaxenvs
        from jaxenvs.train.xla import enable_compilation_cache  # lazy: the trainer (the train extra) is optional for jaxenvs
    except ImportError as e:
        raise Failure(f"evaluating a trained run needs the train extra ({message(e)}): {TRAIN_EXTRA}") from e
    cwd_on_import_path()  # a run of a module:id env imports its module again
    enable_compilation_cache()
    try:
        trainer, runner, _ = load_run(args.run_dir)
    except (ValueError, TypeError, KeyError, OSError, ImportError) as e:  # not a run, a corrupt checkpoint
        raise UsageError(e.args[0] if isinstance(e, KeyError) and e.args else message(e)) from e
    # the run's own play_search and play_lookahead: for the head-to-head games only
    search = (run_search(trainer.config) if args.search is None else args.search) if args.opponent else 0
    lookahead = (run_lookahead(trainer.config) if args.lookahead is None else args.lookahead) if args.opponent else 0
    opponents = []
    if args.opponent:
        env = eval_env(trainer)
        for flag, wanted in (("--search", search), ("--lookahead", lookahead)):
            if wanted and not supports_search(env):
                raise UsageError(f"{flag}: look-ahead and tree search play TicTacToe-v0 and ConnectFour-v0 "
                                 f"(two-player games of perfect information), not {trainer.config.env_id}")
        try:  # what the game or this machine cannot hold, before any game is played
            check_budget(env, search, lookahead)
        except ValueError as e:
            raise UsageError(f"--{'lookahead' if str(e).startswith('lookahead') else 'search'}: {message(e)}") from e
        opponents = [named_opponent(env, spec) for spec in args.opponent]
    result = evaluate(trainer, runner.params, key_on_host(args.seed))
    try:  # a curriculum run: its held-out set checked disjoint from the levels it trained on
        result.update(heldout_check(trainer, runner))
    except HeldOutOverlap as e:
        raise Failure(message(e)) from e
    if opponents:
        try:
            result["head_to_head"] = head_to_head_runs(trainer, runner.params, opponents, key_on_host(args.seed),
                                                       args.games, search, lookahead)
        except ImportError as e:
            raise Failure(message(e)) from e
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_table(result))
        if opponents:
            print(format_head_to_head(result["env_id"], result["head_to_head"], args.games, search, lookahead))
    return 0 if result["solved"] in (True, None) else 1


COMMAND = Command(
    "evaluate", run=run, arguments=arguments,
    help="grade a trained run (jaxenvs-train) on what its environment measures, and against opponents",
    description="Evaluate every seed of a trained run: its environment's metrics, criterion and verdict; with "
                "--opponent, win / draw / loss per seat. Exit status: 0 solved (or no criterion), 1 not, 2 usage error.",
)
