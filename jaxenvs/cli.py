"""The ``jaxenvs`` command line (also ``python -m jaxenvs``).

    jaxenvs list                                   registered environments and their traits
    jaxenvs describe GridWorld-v0                  spaces, what the actions mean, params, traits, spec
    jaxenvs play GridWorld-v0 --episodes 3 --render gif --out out.gif
    jaxenvs play --policy runs/GridWorld-v0-... --render gif --out trained.gif
    jaxenvs play runs/GridWorld-v0-... --render human     the same: a run directory as ID
    jaxenvs play runs/TicTacToe-v0-... --opponent perfect --seat 1 --render text   a game against an opponent
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

Run from a shell, the command keeps JAX's compiled programs in a per-user cache (see
`jaxenvs._cache`; ``JAXENVS_CACHE_DIR`` moves it, ``JAXENVS_CACHE_DIR=off`` turns it off).
"""

from __future__ import annotations

import argparse
import ast
import math
import os
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["main", "build_parser", "describe_env", "play_episodes", "load_run_policy"]

PROG = "jaxenvs"
SEED_LIMIT = 2**63  # jax.random.key takes seeds that fit a signed 64-bit integer
RENDER_MODES = ("text", "human", "gif", "mp4")
TRAIN_EXTRA = "pip install 'jaxenvs[train]'"
VIDEO_EPISODES = 4  # episodes a --render gif/mp4 records by default


class UsageError(Exception):
    """A mistake in the command line (exit status 2)."""


class Failure(Exception):
    """A command that could not do its job for a reason outside the command line (exit status 1)."""


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, unless there is none to show (None, off, empty) or the help
    text already says it."""

    def _get_help_string(self, action):
        nothing = action.default is None or action.default is False or action.default == []
        if nothing or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)")


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


_positive_int = int_arg(1)
_non_negative_int = int_arg(0)
_seed = int_arg(0, SEED_LIMIT, "an integer in [0, 2**63)")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return value


def _json_object(text: str) -> dict:
    import json

    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r} ({e})") from e
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"is_slippery\": true}}', got {text!r}")
    return value


def _env_kwarg(text: str) -> tuple[str, Any]:
    name, sep, raw = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        value = raw
    return name, value


def _render_mode(text: str) -> str:
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


BENCH_DEFAULT_ENV = "GridWorld-v0"  # what `jaxenvs bench` times without an ID


def _out_of_memory(e: BaseException, num_envs) -> UsageError | None:
    """A clear command-line error for a batch that does not fit in the device's memory (XLA's
    RESOURCE_EXHAUSTED, or the host's MemoryError); None for any other error."""
    if isinstance(e, MemoryError) or "RESOURCE_EXHAUSTED" in str(e) or "Out of memory" in str(e):
        sizes = " ".join(map(str, num_envs)) if isinstance(num_envs, (list, tuple)) else str(num_envs)
        return UsageError(
            f"--num-envs {sizes}: the batch does not fit in the memory of {_device_words()}; "
            "give a smaller --num-envs (or --steps)"
        )
    return None


def _device_words() -> str:
    import jax

    d = jax.devices()[0]
    return f"the {d.platform} device ({getattr(d, 'device_kind', d.platform)})"


def _add_env_args(p: argparse.ArgumentParser, optional: bool = False, policy: bool = False) -> None:
    p.add_argument(
        "env_id", metavar="ID", nargs="?" if optional else None, default=None,
        help=ID_HELP
        + (" (with --policy RUN_DIR: the run's; a run directory here means --policy RUN_DIR)" if policy else ""),
    )
    p.add_argument(
        "--kwarg", "-k", type=_env_kwarg, action="append", default=[], metavar="NAME=VALUE",
        help="passed to jaxenvs.make (a params field or a constructor argument); repeatable",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Reinforcement-learning environments as pure JAX functions.",
        epilog=f"Training is its own command: {TRAIN_PROG} (e.g. {TRAIN_PROG} --env GridWorld-v0; {TRAIN_PROG} --help), "
        f"with the train extra ({TRAIN_EXTRA}); {PROG} play --policy RUN_DIR plays a trained run.",
    )
    from jaxenvs import __version__

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    sub.add_parser("list", help="list the registered environments with their traits")

    p = sub.add_parser("describe", help="spaces, actions, params with defaults, traits and spec of an environment")
    p.add_argument("env_id", metavar="ID", help=ID_HELP)

    p = sub.add_parser(
        "play", help="run episodes with a policy (random or a trained run) and show or save them",
        description="Run episodes and print return, length and outcome of each; --render shows or saves them.",
    )
    _add_env_args(p, optional=True, policy=True)
    p.add_argument(
        "--policy", default="random", metavar="POLICY",
        help="'random', or a run directory written by python -m jaxenvs.train (its checkpoint's policy)",
    )
    p.add_argument(
        "--sample", action="store_true",
        help="with a trained policy: sample actions from it instead of taking its most likely action",
    )
    p.add_argument(
        "--run-seed", type=_non_negative_int, default=0, metavar="I",
        help="with a trained policy: which of the run's seeds to play",
    )
    p.add_argument(
        "--opponent", default=None, metavar="NAME|RUN_DIR|human",
        help="two-player games: play the policy in one seat (--seat) against a named opponent of the game ('random' "
             "(legal moves) for every game, 'perfect' for TicTacToe-v0, 'heuristic' and 'win-block' for ConnectFour-v0: "
             "jaxenvs describe ID lists them), another run directory's greedy policy, or 'human' (you, at the terminal)",
    )
    p.add_argument(
        "--human", action="store_true",
        help="two-player games: you play seat --seat at the terminal (moves typed as numbers) against the run's policy, "
             "--opponent NAME, or another person (--opponent human)",
    )
    p.add_argument(
        "--seat", type=int_arg(0, 2, "0 or 1"), default=None, metavar="0|1",
        help="with --opponent: the policy's seat; with --human: yours; 0 moves first (default: 0)",
    )
    p.add_argument(
        "--search", type=_non_negative_int, default=None, metavar="N",
        help="with a trained policy of TicTacToe-v0 or ConnectFour-v0: play the move of N simulations of tree search "
             "guided by its network (mctx Gumbel MuZero, the game's own step as the model; needs the search extra); "
             "default: the run's own play_search (its config; ConnectFour-v0's tuned runs search), 0: the network alone",
    )
    p.add_argument("--episodes", type=_positive_int, default=None, metavar="N",
                   help=f"episodes to run (default: 1, or {VIDEO_EPISODES} with --render gif/mp4)")
    p.add_argument("--seed", type=_seed, default=0, metavar="S", help="random seed, in [0, 2**63)")
    p.add_argument(
        "--max-steps", type=_positive_int, default=1000, metavar="T",
        help="stop an episode after T steps when the environment has no time limit",
    )
    p.add_argument(
        "--render", type=_render_mode, default=None, metavar="MODE",
        help="'text' (print each state), 'human' (pygame window), 'gif' or 'mp4' (a file: --out)",
    )
    p.add_argument("--out", default=None, metavar="PATH", help="the file --render gif/mp4 writes")
    p.add_argument("--fps", type=_positive_float, default=None, help="frames per second (default: the env's)")
    p.add_argument("--no-legend", action="store_true", help="leave the legend out of the frames")

    p = sub.add_parser("check", help="run jaxenvs.check_env on an environment")
    _add_env_args(p, optional=True)
    p.add_argument("--num-envs", type=_positive_int, default=8, metavar="N", help="parallel envs")
    p.add_argument("--steps", type=_positive_int, default=100, metavar="T", help="random steps")
    p.add_argument("--list-rules", action="store_true", help="print the rules with what each checks, and exit")

    p = sub.add_parser(
        "bench", help="steps per second with jit + vmap + scan and random actions",
        description=f"Steps per second of jax.vmap(env.step) inside jit + lax.scan with random actions (compile "
        f"time excluded). Without an ID: {BENCH_DEFAULT_ENV}.",
    )
    _add_env_args(p, optional=True)
    p.add_argument("--num-envs", type=_positive_int, default=1024, metavar="N", help="parallel envs")
    p.add_argument("--steps", type=_positive_int, default=1000, metavar="T", help="steps per env")
    p.add_argument("--repeats", type=_positive_int, default=3, help="timed runs; the median counts")
    p.add_argument("--seed", type=_seed, default=0, metavar="S", help="random seed, in [0, 2**63)")

    p = sub.add_parser(
        "verify", help="verify a port against the environment it was ported from (exit 0 pass, 1 fail, 3 inconclusive)",
        description="jaxenvs.testing.verify_port on a registered port: prints the report's table; exit status 0 for "
        "pass, 1 for fail, 2 for a mistake in the command line, a reference that cannot be built or a missing extra, "
        "3 for inconclusive.",
    )
    _add_env_args(p)
    p.add_argument(
        "--reference", required=True, metavar="REF",
        help="the original: 'gymnasium:ID' (gymnasium.make), 'pyspiel:GAME' (an OpenSpiel game, pyspiel.load_game) "
        "or 'module:factory' (a zero-argument callable returning a gymnasium.Env, a pettingzoo ParallelEnv or AECEnv, "
        "or a pyspiel.Game; e.g. pettingzoo.classic.tictactoe_v3:env; modules are imported from the current "
        "directory too)",
    )
    p.add_argument("--reference-kwargs", type=_json_object, default={}, metavar="JSON",
                   help="keyword arguments of the reference, as a JSON object")
    p.add_argument("--episodes", type=int_arg(10), default=1000, metavar="N", help="episodes per side to start with")
    p.add_argument("--max-episodes", type=int_arg(10), default=None, metavar="N",
                   help="episodes per side at most (default: verify_port's MAX_EPISODES)")
    p.add_argument("--budget", type=_positive_float, default=None, metavar="SECONDS",
                   help="time to draw more episodes in until every statistic reaches --detect (default: verify_port's "
                   "BUDGET_S, 60)")
    p.add_argument("--seed", type=_seed, default=0, metavar="S", help="random seed, in [0, 2**63)")
    p.add_argument("--alpha", type=_probability, default=None, help="false-alarm rate (default: verify_port's ALPHA)")
    p.add_argument("--detect", type=_probability, default=None, help="effect a pass must detect (default: DETECT)")
    p.add_argument("--power", type=_probability, default=None, help="probability of detecting it (default: POWER)")
    p.add_argument("--save", default=None, metavar="PATH", help="write the report as a JSON certificate")
    from jaxenvs.profile import DEFAULT_NUM_ENVS

    p = sub.add_parser(
        "profile", help="compile time, steps/s against num_envs, memory and wrapper costs of an environment",
        description="Trace, lower and compile times of reset, step and a vmapped scan rollout; steps/s against "
        "num_envs for jax.vmap(env.step) and jaxenvs.VectorEnv; bytes per env state and XLA's planned peak "
        "memory; what each wrapper adds. Writes profile_<ID>.json and .png into --out and prints a one-line "
        "summary. A 'module:ns/Name-v0' ID imports module from the current directory first.",
    )
    _add_env_args(p)
    p.add_argument(
        "--num-envs", type=_positive_int, nargs="+", default=list(DEFAULT_NUM_ENVS), metavar="N",
        help="batch sizes of the sweep (default: 1 4 16 ... 65536)",
    )
    p.add_argument(
        "--steps", type=_positive_int, default=None, metavar="T",
        help="steps per timed run (default: 2**18 // num_envs, clipped to [16, 1000])",
    )
    p.add_argument("--repeats", type=_positive_int, default=3, help="timed runs per point; the median counts")
    p.add_argument("--out", default=".", metavar="DIR", help="folder for profile_<ID>.json and profile_<ID>.png (default: the current folder; the command says where it wrote)")
    p.add_argument("--no-plot", action="store_true", help="write the JSON file only (no matplotlib needed)")
    p.add_argument("--no-wrappers", action="store_true", help="skip profiling each wrapper layer")
    p.add_argument("--seed", type=_seed, default=0, metavar="S", help="random seed, in [0, 2**63)")
    return parser


# ---- environments ------------------------------------------------------------------------------
def _message(e: BaseException) -> str:
    text = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
    return " ".join(str(text).split())


def import_path_for(env_id: str) -> None:
    """For a ``module:id`` environment id, put the current directory first on ``sys.path`` (as
    ``python -m`` does), so that a module of one's own beside the shell is found."""
    if isinstance(env_id, str) and ":" in env_id and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())


def _spec_id(env_id: str) -> str:
    import jaxenvs

    import_path_for(env_id)
    try:
        return jaxenvs.spec(env_id).id
    except (KeyError, ValueError, TypeError, ImportError) as e:
        raise UsageError(_message(e)) from e


def _make(env_id: str, kwargs=(), autoreset: bool = True):
    import jaxenvs

    _spec_id(env_id)  # an unknown or malformed id, or a 'module:' prefix that cannot be imported
    try:
        return jaxenvs.make(env_id, autoreset=autoreset, **dict(kwargs))
    except ImportError as e:
        raise Failure(_message(e)) from e
    except (TypeError, ValueError, OverflowError) as e:
        raise UsageError(_message(e)) from e


def cmd_list(args) -> None:
    from jaxenvs.registration import pprint_registry

    pprint_registry()


def describe_env(env_id: str) -> str:
    """What ``jaxenvs describe`` prints (`jaxenvs.describe`), with a bad id as a usage error."""
    from jaxenvs.games import is_two_player_game, named_opponents
    from jaxenvs.registration import describe

    env = _make(env_id, autoreset=False)  # a bad id or an unimportable module: UsageError
    text = describe(env)
    key = getattr(env.unwrapped, "MOVE_KEY", None)
    if key:  # how the moves are numbered on the board (Tic-Tac-Toe's cells are column-major)
        text += "\n  move numbering: " + "\n    ".join(key.splitlines())
    if is_two_player_game(env):  # the opponents --opponent NAME accepts
        text += "\n  opponents (--opponent NAME):" + "".join(
            f"\n    {name}: {o.meaning}" for name, o in named_opponents(env).items())
    return text


def cmd_describe(args) -> None:
    print(describe_env(args.env_id))


# ---- play --------------------------------------------------------------------------------------
def _check_out(mode: str | None, out: str | None) -> Path | None:
    """The video path for --render gif/mp4, checked before anything is computed."""
    if mode in ("gif", "mp4"):
        if out is None:
            raise UsageError(f"--render {mode} needs --out PATH (a file ending in .{mode})")
        suffix = Path(out).suffix.lower()
        if suffix != f".{mode}":
            raise UsageError(f"--render {mode} needs a path ending in .{mode}, got --out {out!r}")
        from jaxenvs.rendering.io import check_video_path

        try:
            return check_video_path(out)
        except (OSError, ValueError) as e:
            raise UsageError(f"--out: {_message(e)}") from e
        except ImportError as e:
            raise Failure(_message(e)) from e
    if out is not None:
        raise UsageError("--out is for --render gif or --render mp4")
    return None


def load_run_policy(run_dir: str | os.PathLike, run_seed: int = 0, sample: bool = False, search: int | None = None):
    """``(env_id, env_kwargs, policy)`` from a run directory of ``jaxenvs-train``, through
    `jaxenvs.train.load_policy` (the one loader), with its mistakes as command-line errors.

    ``policy(key, obs)`` acts for ONE environment with the parameters of seed ``run_seed`` of the
    run (greedy, or sampled with ``sample``; with ``search`` simulations of tree search per move, None:
    the run's own ``play_search``; ``policy.search`` says how many it plays with).
    In a multi-agent environment every agent plays it from its own observation row, and
    ``policy.agent`` is the one-agent policy. A run of a ``module:id`` environment imports its
    module from the current directory, as ``check`` does.
    """
    run_dir = Path(run_dir)
    try:
        from jaxenvs.train.checkpoint import CHECKPOINT, CONFIG
    except ImportError as e:
        raise Failure(f"playing a trained run needs the train extra ({_message(e)}): {TRAIN_EXTRA}") from e
    missing = [name for name in (CONFIG, CHECKPOINT) if not (run_dir / name).is_file()]
    if not run_dir.is_dir() or missing:
        raise UsageError(
            f"--policy takes 'random' or a run directory of python -m jaxenvs.train; {str(run_dir)!r} "
            + ("is not a directory" if not run_dir.is_dir() else f"has no {' or '.join(missing)}")
        )
    import jax

    from jaxenvs.train.envids import cwd_on_import_path
    from jaxenvs.train.policy import load_policy

    cwd_on_import_path()  # a run of a module:id environment imports its module again
    try:
        agent = load_policy(run_dir, greedy=not sample, seed=run_seed, search=search)
    except ImportError as e:
        text = _message(e)
        if "mctx" in text:
            raise Failure(text) from e
        raise Failure(
            f"cannot load the run in {str(run_dir)!r}: its environment's module cannot be imported ({text}); run "
            f"jaxenvs play from the folder that holds that module, or put it on PYTHONPATH"
        ) from e
    except ValueError as e:
        text = _message(e)
        if text.startswith(("seed ", "search")) or "tree search" in text:
            raise UsageError(text.replace("seed ", "--run-seed ", 1) if text.startswith("seed ") else f"--search: {text}") from e
        raise Failure(f"cannot load the run in {str(run_dir)!r}: {text}") from e
    except (KeyError, TypeError, OSError) as e:
        raise Failure(f"cannot load the run in {str(run_dir)!r}: {_message(e)}") from e
    trainer = agent.trainer
    if not trainer.env.multi_agent:
        return trainer.config.env_id, dict(trainer.config.env_kwargs), agent
    n = trainer.num_agents

    def policy(key, obs):
        return jax.vmap(agent)(jax.random.split(key, n), obs)

    policy.agent = agent
    policy.search = agent.search
    return trainer.config.env_id, dict(trainer.config.env_kwargs), policy


def _format_returns(env, returns) -> str:
    if np.ndim(returns) == 0:
        return f"return {float(returns):.3f}"
    return "returns " + " ".join(f"{a}={r:+.3f}" for a, r in zip(env.agents, np.asarray(returns)))


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


def play_episodes(env, policy, seed: int, episodes: int, max_steps: int, record_states: bool = True):
    """``(episodes, states)``: the first episode of each of ``episodes`` parallel non-resetting
    envs (`jaxenvs.rollout.Episode`), and per episode the host copies of its states from
    the first to the one it ended in (None unless ``record_states``)."""
    import jax

    from jaxenvs.rollout import episode_stats, rollout

    horizon = env.spec.max_episode_steps or max_steps
    traj = rollout(env, jax.random.key(seed), policy, horizon, num_envs=episodes, record_states=record_states)
    firsts = [e for e in episode_stats(traj, include_unfinished=True) if e.start == 0]
    states = [_episode_states(traj, ep) for ep in firsts] if record_states else None
    return firsts, states


def _seat_result(r) -> str:
    return "win" if r > 0 else "loss" if r < 0 else "draw"


def _named_opponent(env, opponent: str):
    """``(label, policy)`` of ``--opponent`` (`jaxenvs.games.make_opponent`: names need jax and
    numpy only; a run directory needs the train extra)."""
    from jaxenvs.games import OpponentError, make_opponent

    try:
        return make_opponent(opponent, env)
    except OpponentError as e:
        raise UsageError(f"--opponent {opponent}: {_message(e)}") from e
    except ImportError as e:
        raise Failure(f"--opponent {opponent}: a run directory as opponent needs the train extra ({_message(e)}): "
                      f"{TRAIN_EXTRA}") from e
    except ValueError as e:  # CheckpointError: a folder that is not a run
        raise UsageError(f"--opponent {opponent}: {_message(e)}") from e


def _against_opponent(env, policy, opponent: str, seat: int):
    """``(joint policy, opponent label)``: ``policy`` (a joint policy of `load_run_policy` or
    `jaxenvs.rollout.random_policy`) plays seat ``seat`` from its own observation row, the
    opponent (`jaxenvs.games.make_opponent`) the other seat."""
    import jax

    from jaxenvs.games import random_legal

    opponent_label, opp = _named_opponent(env, opponent)
    me = getattr(policy, "agent", None) or random_legal  # a random policy: random-legal play in its seat

    def joint(key, obs):
        k_me, k_opp = jax.random.split(key)
        rows = [jax.tree.map(lambda x, i=i: x[i], obs) for i in range(2)]
        mine, theirs = me(k_me, rows[seat]), opp(k_opp, rows[1 - seat])
        return jax.numpy.stack([mine, theirs] if seat == 0 else [theirs, mine]).astype(jax.numpy.int32)

    return joint, opponent_label


def _run_dir_as_id(args) -> None:
    """``jaxenvs play RUN_DIR`` means ``jaxenvs play --policy RUN_DIR``: an ID that names a folder
    holding a run's config.json is taken as the run."""
    if args.env_id is not None and (Path(args.env_id) / "config.json").is_file():
        if args.policy != "random":
            raise UsageError(f"give the run either as ID or as --policy, not both ({args.env_id!r}, {args.policy!r})")
        args.policy, args.env_id = args.env_id, None


def _episode_captions(firsts, states, n: int) -> list[str]:
    """One caption per frame: ``episode i/n, step t``, and on an episode's last frame how it ended
    (so that a video shows where one episode ends and the next begins)."""
    import jax

    out = []
    for i, (ep, ep_states) in enumerate(zip(firsts, states), 1):
        frames = len(jax.tree.leaves(ep_states)[0])
        for t in range(frames):
            end = f": {ep.outcome}, {ep.length} steps" if t == frames - 1 else ""
            out.append(f"episode {i}/{n}, step {t}{end}")
    return out


def _human_game(args, env, policy, label: str) -> None:
    """``--human`` / ``--opponent human``: one or more games at the terminal (`jaxenvs.games.human`)."""
    import jax

    from jaxenvs.games import human

    if not human.supports_people(env):
        raise UsageError(f"--human / --opponent human: {env.spec.id} cannot be played at the terminal; a person plays "
                         "two-player turn-based games of perfect information (TicTacToe-v0, ConnectFour-v0)")
    if args.render is not None:
        raise UsageError("--render is for games between policies; a person's game is drawn in the terminal")
    seat = args.seat or 0
    me = getattr(policy, "agent", None)
    if me is not None:  # a short name for the board's lines; the header names the run
        print(f"policy: {label}")
        label = "policy" + (f", search {args.search}" if args.search else "")
    if args.human and args.opponent == "human":
        seats, labels = [None, None], ["person", "person"]
    elif args.human:  # the person in `seat`, against the opponent, else the policy
        if args.opponent is not None:
            other_label, other = _named_opponent(env, args.opponent)
            other_label = other_label.split(" (")[0]
        else:
            from jaxenvs.games import random_legal

            other_label, other = label, me or random_legal
        seats = [None, other] if seat == 0 else [other, None]
        labels = ["you", other_label] if seat == 0 else [other_label, "you"]
    else:  # --opponent human: the policy in `seat`, the person in the other
        from jaxenvs.games import random_legal

        seats = [me or random_legal, None] if seat == 0 else [None, me or random_legal]
        labels = [label, "you"] if seat == 0 else ["you", label]
    print(f"{env.spec.id}: agent 0 (moves first): {labels[0]}; agent 1: {labels[1]}")
    key = jax.random.key(args.seed)
    totals = np.zeros(2)
    games = args.episodes or 1
    for g in range(games):
        if games > 1:
            print(f"=== game {g + 1} of {games}")
        key, k = jax.random.split(key)
        try:
            returns = human.play_game(env, seats, k, labels=labels)
        except human.InputEnded as e:
            raise Failure(f"game stopped: {e}") from e
        except KeyboardInterrupt:  # Ctrl-C at the prompt: a clean line, exit status 130
            print("\ngame interrupted", file=sys.stderr)
            raise
        totals += np.sign(returns)
    if games > 1:
        print("after " + str(games) + " games: " + ", ".join(
            f"agent {i} ({labels[i]}) {int(np.sum(totals[i]))} net wins" for i in range(2)))


def cmd_play(args) -> None:
    from jaxenvs.rendering import io
    from jaxenvs.rendering.legend import status_captions
    from jaxenvs.rollout import random_policy

    mode = args.render
    path = _check_out(mode, args.out)
    _run_dir_as_id(args)
    people = args.human or args.opponent == "human"
    if args.seat is not None and args.opponent is None and not args.human:
        raise UsageError("--seat is the policy's seat against an --opponent (or yours with --human); give --opponent "
                         "NAME|RUN_DIR|human or --human too")
    if args.policy == "random":
        if args.env_id is None:
            raise UsageError("play needs an environment ID, or --policy RUN_DIR to play a trained run")
        if args.sample or args.run_seed:
            raise UsageError("--sample and --run-seed are for a trained policy (--policy RUN_DIR)")
        if args.search:
            raise UsageError("--search N is for a trained policy (--policy RUN_DIR): its network guides the search")
        env = _make(args.env_id, args.kwarg, autoreset=False)
        policy = random_policy(env)
        label = "random policy"
    else:
        env_id, env_kwargs, policy = load_run_policy(args.policy, args.run_seed, args.sample, args.search)
        args.search = int(getattr(policy, "search", 0) or 0)  # the run's own play_search when --search is not given
        if args.env_id is not None and _spec_id(args.env_id) != _spec_id(env_id):
            raise UsageError(f"the run in {args.policy!r} was trained on {env_id}, not {args.env_id}")
        # no auto-reset: each of the N parallel envs plays its first episode, and the state the
        # episode ended in stays in the trajectory (it is the state the following step starts from)
        env = _make(env_id, {**env_kwargs, **dict(args.kwarg)}, autoreset=False)
        label = f"{'sampled' if args.sample else 'greedy'} policy of {args.policy} (seed {args.run_seed})"
        if args.search:
            label += f" with {args.search} simulations of tree search per move"
    if people:
        return _human_game(args, env, policy, label)
    import jax

    if args.episodes is None:
        args.episodes = VIDEO_EPISODES if mode in ("gif", "mp4") else 1
    seat = None
    if args.opponent is not None:
        seat = args.seat or 0
        policy, opponent_label = _against_opponent(env, policy, args.opponent, seat)
        label += f" in seat {seat} (agent {env.agents[seat]}, {'first' if seat == 0 else 'second'} to move) vs {opponent_label}"
    print(f"{env.spec.id}: {label}")
    firsts, states = play_episodes(env, policy, args.seed, args.episodes, args.max_steps, mode is not None)
    horizon = env.spec.max_episode_steps or args.max_steps
    for i, ep in enumerate(firsts, 1):
        note = f" (stopped after {horizon} steps; raise --max-steps)" if ep.outcome == "unfinished" else ""
        result = f"  {_seat_result(ep.returns[seat])}" if seat is not None and ep.outcome != "unfinished" else ""
        print(f"episode {i}: {_format_returns(env, ep.returns)}  length {ep.length}  {ep.outcome}{result}{note}")
    n = len(firsts)
    print(
        f"{n} episode{'s' * (n != 1)}: mean {_format_returns(env, np.mean([e.returns for e in firsts], axis=0))}, "
        f"mean length {np.mean([e.length for e in firsts]):.1f}"
    )
    if seat is not None:
        counts = {k: sum(_seat_result(e.returns[seat]) == k for e in firsts) for k in ("win", "draw", "loss")}
        print(f"the policy in seat {seat}: {counts['win']} win, {counts['draw']} draw, {counts['loss']} loss")
    if mode is None:
        return
    try:
        if mode == "text":
            for i, (ep, ep_states) in enumerate(zip(firsts, states), 1):
                for t in range(len(jax.tree.leaves(ep_states)[0])):
                    print(f"--- episode {i}, t={t}")
                    print(env.render_text(jax.tree.map(lambda x: x[t], ep_states), env.default_params))
                print(f"--- episode {i} {'ends' if ep.outcome != 'unfinished' else 'stops'} after {ep.length} steps: "
                      f"{ep.outcome}, {_format_returns(env, ep.returns)}")
            return
        frames = io.render_frames(env, jax.tree.map(lambda *xs: np.concatenate(xs), *states))
        # a turn-based game: a caption under each frame says whose move it is, or how the game ended
        captions = None if args.no_legend else status_captions(env, states)
        if captions is None and not args.no_legend:  # other envs: which episode, which step, how it ended
            captions = _episode_captions(firsts, states, len(firsts))
    except NotImplementedError as e:
        raise Failure(_message(e)) from e
    fps = args.fps or env.render_fps
    try:
        if not args.no_legend:
            from jaxenvs.rendering.legend import add_captions, add_legend

            frames = add_legend(env, frames)
            if captions is not None:
                frames = add_captions(frames, captions)
        if mode == "human":
            io.play_human(env, frames, fps=fps)
        else:
            io.save_video(frames, path, fps=fps)
            print(f"saved {len(frames)} frames to {path}")
    except (ImportError, OSError) as e:
        raise Failure(_message(e)) from e


# ---- check -------------------------------------------------------------------------------------
def cmd_check(args) -> int:
    if args.list_rules:  # every rule of `jaxenvs.checker.RULEBOOK`: its id, then what it checks
        from jaxenvs.checker import RULEBOOK

        width = max(map(len, RULEBOOK))
        for rule in RULEBOOK.values():
            print(f"{rule.id:<{width}}  {rule.text}".rstrip())
        return 0
    if args.env_id is None:
        raise UsageError("check needs an environment ID (or --list-rules)")
    env = _make(args.env_id, args.kwarg)
    from jaxenvs.checker import RULES, EnvCheckError, check_env

    try:
        report = check_env(env, num_steps=args.steps, num_envs=args.num_envs)
    except EnvCheckError as e:
        print(f"{PROG} check: {env.spec.id} FAILED {_message(e)}", file=sys.stderr)
        return 1
    except ValueError as e:  # check_env's own argument checks (EnvCheckError is an AssertionError)
        raise UsageError(_message(e)) from e
    print(
        f"{env.spec.id}: passed {len(report.rules)} rules ({report.num_envs} envs x {report.num_steps} random "
        f"steps: {report.terminated} terminated, {report.truncated} truncated)"
    )
    print("  passed: " + ", ".join(report.rules))
    skipped = [r for r in RULES if r not in report.rules]
    if skipped:
        print("  not applicable: " + ", ".join(skipped))
    return 0


# ---- bench -------------------------------------------------------------------------------------
def cmd_bench(args) -> None:
    from jaxenvs.rollout import benchmark

    if args.env_id is None:
        args.env_id = BENCH_DEFAULT_ENV
        print(f"no ID given: timing {BENCH_DEFAULT_ENV} (jaxenvs list shows the others)")
    env = _make(args.env_id, args.kwarg)
    try:
        res = benchmark(env, num_envs=args.num_envs, num_steps=args.steps, seed=args.seed, repeats=args.repeats)
    except Exception as e:
        oom = _out_of_memory(e, args.num_envs)
        if oom is None:
            raise
        raise oom from None
    import jax

    print(
        f"{env.spec.id}: {res.num_envs} envs x {res.num_steps} steps, random actions, jit+vmap+scan "
        f"on {jax.devices()[0].platform}"
    )
    print(f"compile: {res.compile_s:.2f} s (excluded)")
    print(f"run: median {np.median(res.run_s):.4f} s of {len(res.run_s)}")
    print(f"{res.steps_per_s:,.0f} steps/s")


# ---- verify ------------------------------------------------------------------------------------
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
                             f"({_message(e)})") from e
        try:
            gymnasium.spec(name)
        except Exception as e:  # noqa: BLE001 -- gymnasium's own errors (NameNotFound, VersionNotFound, ...)
            raise UsageError(f"--reference {text!r}: {_message(e)}") from e

        def factory():
            return gymnasium.make(name, **kwargs)
    elif prefix == "pyspiel":
        try:
            import pyspiel
        except ImportError as e:
            raise UsageError(f"--reference pyspiel:... needs OpenSpiel: pip install 'jaxenvs[verify,games]' "
                             f"({_message(e)})") from e

        def factory():
            return pyspiel.load_game(name, kwargs) if kwargs else pyspiel.load_game(name)
    else:
        import importlib

        try:
            module = importlib.import_module(prefix)
        except ImportError as e:
            raise UsageError(f"--reference {text!r}: cannot import {prefix!r}: {_message(e)}") from e
        fn = getattr(module, name, None)
        if not callable(fn):
            raise UsageError(f"--reference {text!r}: {prefix!r} has no callable {name!r}")

        def factory():
            return fn(**kwargs)

    try:
        probe = factory()
    except Exception as e:  # noqa: BLE001 -- whatever the user's factory raises is a bad reference, not a failing port
        raise UsageError(f"--reference {text!r} with --reference-kwargs {kwargs!r} raised {type(e).__name__}: "
                         f"{_message(e)}") from e
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


def cmd_verify(args) -> int:
    import_path_for(args.reference)
    if args.save is not None:
        parent = Path(args.save).resolve().parent
        if not parent.is_dir():
            raise UsageError(f"--save {args.save!r}: the folder {str(parent)!r} does not exist")
    env = _make(args.env_id, args.kwarg, autoreset=False)
    factory = reference_factory(args.reference, args.reference_kwargs)
    try:
        from jaxenvs.testing import PortMismatch, verify_port
    except ImportError as e:
        raise UsageError(f"jaxenvs verify needs the verify extra: pip install 'jaxenvs[verify]' ({_message(e)})") from e

    options = {k: getattr(args, k) for k in ("alpha", "detect", "power", "max_episodes") if getattr(args, k) is not None}
    if args.budget is not None:
        options["budget_s"] = args.budget
    if options.get("max_episodes", args.episodes) < args.episodes:
        raise UsageError(f"--max-episodes {options['max_episodes']} is below --episodes {args.episodes}")
    try:
        report = verify_port(env, factory, num_episodes=args.episodes, seed=args.seed, raise_inconclusive=False, **options)
    except PortMismatch as e:
        if e.report is None:  # the spaces differ: nothing was run
            print(f"{env.spec.id}: verdict FAIL: {_message(e)}")
            return 1
        report = e.report
    except ImportError as e:  # a missing extra (scipy, gymnasium, pettingzoo, ...)
        raise UsageError(_message(e)) from e
    except (TypeError, ValueError, AttributeError) as e:  # a reference or an argument verify_port refuses
        raise UsageError(_message(e)) from e
    print(report)
    if args.save is not None:
        try:
            print(f"saved the report to {report.save(args.save)}")
        except OSError as e:
            raise UsageError(f"--save {args.save!r}: {_message(e)}") from e
    return {"pass": 0, "fail": 1, "inconclusive": 3}[report.verdict]


# ---- profile -----------------------------------------------------------------------------------
def cmd_profile(args) -> None:
    import_path_for(args.env_id)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {args.out!r} is a file; --out names the folder the profile files go into")
    if not args.no_plot:
        from jaxenvs._optional import require

        try:
            require("matplotlib", extra="train", purpose="jaxenvs profile's plot (or pass --no-plot)")
        except ImportError as e:
            raise Failure(_message(e)) from e
    env = _make(args.env_id, args.kwarg)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise Failure(f"--out {args.out!r}: cannot create it ({e.strerror})") from e
    from jaxenvs.profile import file_stem, profile

    stem = file_stem(env.spec.id if getattr(env, "spec", None) is not None else type(env.unwrapped).__name__)
    where = out.resolve()
    names = f"{stem}.json" + ("" if args.no_plot else f" and {stem}.png")
    print(f"writing {names} into {where}" + (" (the current folder; --out DIR puts them elsewhere)" if args.out == "." else ""))
    try:
        report = profile(
            env, num_envs=args.num_envs, num_steps=args.steps, repeats=args.repeats, layers=not args.no_wrappers,
            seed=args.seed, progress=lambda line: print(line, flush=True),
        )
    except Exception as e:
        oom = _out_of_memory(e, args.num_envs)
        if oom is None:
            raise
        raise oom from None
    stem = file_stem(report.env_id)
    print(f"wrote {Path(report.save_json(out / (stem + '.json'))).resolve()}")
    if not args.no_plot:
        print(f"wrote {Path(report.plot(out / (stem + '.png'))).resolve()}")
    print(report.summary())


COMMANDS = {
    "list": cmd_list, "describe": cmd_describe, "play": cmd_play, "check": cmd_check, "bench": cmd_bench,
    "verify": cmd_verify,
    "profile": cmd_profile,
}


TRAIN_PROG = "jaxenvs-train"
TRAIN_EXTRA = "pip install 'jaxenvs[train]'"


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
        from jaxenvs._cache import enable_compilation_cache

        argv = sys.argv[1:]
        enable_compilation_cache()
    if list(argv[:1]) == ["train"]:
        print(f"{PROG}: error: {_train_pointer(list(argv))}", file=sys.stderr)
        return 2
    try:
        args = build_parser().parse_args(list(argv))
        status = COMMANDS[args.command](args)
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


if __name__ == "__main__":
    sys.exit(main())
