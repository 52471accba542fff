"""What ``jaxenvs play`` and ``jaxenvs evaluate`` play: a trained run's policy (`load_run_policy`),
opponents by name or run directory in one seat of a game (`named_opponent`), the flags the two
commands share (`add_opponent_args`), and the episodes themselves (`play_episodes`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from jaxenvs.games import OpponentError, make_opponent, random_legal
from jaxenvs.games.search import check_budget
from jaxenvs.rollout import episode_stats, rollout
from .args import TRAIN_EXTRA, Failure, UsageError, non_negative_int
from .envs import message, spec_id

__all__ = ["load_run_policy", "joint_policy", "play_episodes", "named_opponent", "against_opponent", "add_opponent_args"]


SEARCH_HELP = ("with a trained policy of TicTacToe-v0 or ConnectFour-v0: play the move of N simulations of tree search "
               "guided by its network (mctx Gumbel MuZero, the game's own step as the model; needs the search extra); "
               "default: the run's own play_search (its config), 0: the network alone")
LOOKAHEAD_HELP = ("with a trained policy of TicTacToe-v0 or ConnectFour-v0: choose among the moves whose every line of "
                  "play N plies deep scores best by the game's rewards (exact look-ahead: takes the wins and avoids the "
                  "losses it sees); default: the run's own play_lookahead (its config), 0: none")
OPPONENT_HELP = ("two-player games: a named opponent of the game ('random' (legal moves) for every game, 'perfect' for "
                 "TicTacToe-v0, 'heuristic' and 'win-block' for ConnectFour-v0: jaxenvs describe ID lists them) or "
                 "another run directory's greedy policy")


def add_opponent_args(p, opponent_help: str, many: bool = False, human: bool = False) -> None:
    """The flags ``play`` and ``evaluate`` share: ``--opponent`` (repeatable with ``many``; ``human``
    adds the person to its metavar), ``--search N`` and ``--lookahead N`` (non-negative integers,
    checked as they are parsed; None: the run's own)."""
    p.add_argument("--opponent", action="append" if many else "store", default=[] if many else None,
                   metavar="NAME|RUN_DIR" + ("|human" if human else ""), help=f"{OPPONENT_HELP}; {opponent_help}")
    p.add_argument("--search", type=non_negative_int, default=None, metavar="N", help=SEARCH_HELP)
    p.add_argument("--lookahead", type=non_negative_int, default=None, metavar="N", help=LOOKAHEAD_HELP)


def load_run_policy(run_dir: str | os.PathLike, run_seed: int = 0, sample: bool = False, search: int | None = None,
                    lookahead: int | None = None, flag: str = "--policy"):
    """The `jaxenvs.train.policy.TrainedPolicy` of a run directory of ``jaxenvs-train``, through
    `jaxenvs.train.load_policy` (the one loader), with its mistakes as command-line errors (``flag``
    names the flag that gave the run).

    It acts for ONE agent with the parameters of seed ``run_seed`` of the run (greedy, or sampled
    with ``sample``; with ``search`` simulations of tree search per move, None: the run's own
    ``play_search``; with ``lookahead`` plies of exact look-ahead, None: the run's own
    ``play_lookahead``; the record says what it plays with). A run of a ``module:id`` environment
    imports its module from the current directory, as ``check`` does.
    """
    run_dir = Path(run_dir)
    try:
        from jaxenvs.train.checkpoint import CHECKPOINT, CONFIG  # lazy: the trainer (the train extra) is optional for jaxenvs
    except ImportError as e:
        raise Failure(f"playing a trained run needs the train extra ({message(e)}): {TRAIN_EXTRA}") from e
    missing = [name for name in (CONFIG, CHECKPOINT) if not (run_dir / name).is_file()]
    if not run_dir.is_dir() or missing:
        raise UsageError(
            f"{flag} takes {'random' if flag == '--policy' else 'a name'} or a run directory of jaxenvs-train; "
            f"{str(run_dir)!r} " + ("is not a directory" if not run_dir.is_dir() else f"has no {' or '.join(missing)}")
        )
    from jaxenvs.train.app.envids import cwd_on_import_path  # lazy: the trainer (the train extra) is optional for jaxenvs
    from jaxenvs.train.policy import load_policy  # lazy: the trainer (the train extra) is optional for jaxenvs

    cwd_on_import_path()  # a run of a module:id environment imports its module again
    try:
        return load_policy(run_dir, greedy=not sample, seed=run_seed, search=search, lookahead=lookahead)
    except ImportError as e:
        text = message(e)
        if "mctx" in text:
            raise Failure(text) from e
        raise Failure(
            f"cannot load the run in {str(run_dir)!r}: its environment's module cannot be imported ({text}); run "
            f"jaxenvs from the folder that holds that module, or put it on PYTHONPATH"
        ) from e
    except ValueError as e:
        text = message(e)
        if text.startswith(("lookahead", "look-ahead")):
            raise UsageError(f"--lookahead: {text}") from e
        if text.startswith(("seed ", "search")) or "tree search" in text:
            raise UsageError(text.replace("seed ", "--run-seed ", 1) if text.startswith("seed ") else f"--search: {text}") from e
        raise Failure(f"cannot load the run in {str(run_dir)!r}: {text}") from e
    except (KeyError, TypeError, OSError) as e:
        raise Failure(f"cannot load the run in {str(run_dir)!r}: {message(e)}") from e


def joint_policy(record):
    """The policy `jaxenvs.rollout.rollout` plays for a trained run's `record`: the record itself
    in a single-agent environment; in a multi-agent one every agent plays it from its own
    observation row."""
    import jax

    trainer = record.trainer
    if not trainer.env.multi_agent:
        return record
    n = trainer.num_agents

    def policy(key, obs):
        return jax.vmap(record)(jax.random.split(key, n), obs)

    return policy


def _episode_states(traj, ep):
    """Host copies of the states of episode ``ep`` of a non-resetting rollout, its last included.

    The state an episode ended in is the state the next step started from, or the rollout's
    ``last_state`` when the episode took every step.
    """
    import jax

    def pick(stacked, last):
        stacked, last = np.asarray(stacked[:, ep.env_index]), np.asarray(last[ep.env_index])
        end = stacked[ep.length] if ep.length < len(stacked) else last
        return np.concatenate([stacked[: ep.length], end[None]])

    return jax.tree.map(pick, traj.state, traj.last_state)


def episode_horizon(env, max_steps: int) -> int:
    """The steps `play_episodes` runs: the env's time limit, else ``max_steps``, and never more than
    a game's longest game (its class's ``MAX_PLIES``: every step after it would only re-ask a
    policy, a search or a look-ahead, about a finished game)."""
    horizon = env.spec.max_episode_steps or max_steps
    longest = env.unwrapped.MAX_PLIES
    return min(horizon, longest) if longest else horizon


def say_cost(env, search: int, lookahead: int, episodes: int, horizon: int) -> None:
    """One line on stderr with the memory and time a policy's ``search`` or ``lookahead`` will take
    over ``episodes`` episodes of ``horizon`` steps (every agent asked every step), when that is
    more than a few seconds (`jaxenvs.games.search.check_budget`)."""
    if not (search or lookahead):
        return

    moves = episodes * horizon * getattr(env, "num_agents", 1)
    line = check_budget(env, search, lookahead, moves=moves)
    if line:
        print(f"estimate: {line}", file=sys.stderr, flush=True)


def play_episodes(env, policy, seed: int, episodes: int, max_steps: int, record_states: bool = True):
    """``(episodes, states)``: the first episode of each of ``episodes`` parallel non-resetting
    envs (`jaxenvs.rollout.Episode`), and per episode the host copies of its states from
    the first to the one it ended in (None unless ``record_states``)."""
    import jax

    horizon = episode_horizon(env, max_steps)
    traj = rollout(env, jax.random.key(seed), policy, horizon, num_envs=episodes, record_states=record_states)
    firsts = [e for e in episode_stats(traj, include_unfinished=True) if e.start == 0]
    states = [_episode_states(traj, ep) for ep in firsts] if record_states else None
    return firsts, states


def named_opponent(env, opponent: str):
    """``(label, policy)`` of ``--opponent``: a name of the game (`jaxenvs.games.make_opponent`:
    jax and numpy only), or a run directory trained on the same game (its greedy policy, seed 0,
    no search, its own look-ahead; needs the train extra)."""
    try:
        if not Path(opponent).is_dir():  # a name; a folder is loaded as a run (and refused if it is none)
            return make_opponent(opponent, env)
        record = load_run_policy(opponent, search=0, flag="--opponent")
        if spec_id(record.env_id) != spec_id(env.spec.id):
            raise UsageError(f"--opponent {opponent}: the run in {opponent!r} was trained on {record.env_id}, "
                             f"not {env.spec.id}")
        return make_opponent(record, env, label=f"run {opponent}")
    except OpponentError as e:
        raise UsageError(f"--opponent {opponent}: {message(e)}") from e


def against_opponent(env, policy, opponent: str, seat: int):
    """``(joint policy, opponent label)``: ``policy`` (a one-agent policy, such as a run's record;
    None: random-legal play) plays seat ``seat`` from its own observation row, the opponent
    (`named_opponent`) the other seat."""
    import jax

    opponent_label, opp = named_opponent(env, opponent)
    me = policy or random_legal

    def joint(key, obs):
        k_me, k_opp = jax.random.split(key)
        rows = [jax.tree.map(lambda x, i=i: x[i], obs) for i in range(2)]
        mine, theirs = me(k_me, rows[seat]), opp(k_opp, rows[1 - seat])
        return jax.numpy.stack([mine, theirs] if seat == 0 else [theirs, mine]).astype(jax.numpy.int32)

    return joint, opponent_label
