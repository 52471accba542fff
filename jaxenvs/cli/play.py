"""``jaxenvs play [ID]``: episodes of a policy (random, a trained run, against an opponent or a
person), printed, or shown / saved with ``--render``. The command's arguments are declared in
`arguments` below, its steps in `run`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from jaxenvs.games import human, random_legal
from jaxenvs.games.window import open_screen
from jaxenvs.levels import ParamSpaceError, level_fields
from jaxenvs.rendering.io import check_video_path, play_human, render_frames, save_video
from jaxenvs.rendering.legend import add_captions, add_legend, status_captions
from jaxenvs.rollout import random_policy
from .args import (Command, Failure, UsageError, add_env_args, int_arg, non_negative_int, positive_float,
                   positive_int, render_mode, seed_arg)
from .envs import make_env, message, spec_id
from .players import (add_opponent_args, against_opponent, episode_horizon, joint_policy, load_run_policy, named_opponent,
                       play_episodes, say_cost)

VIDEO_EPISODES = 4  # episodes a --render gif/mp4 records by default


def arguments(p: argparse.ArgumentParser) -> None:
    add_env_args(p, optional=True, policy=True)
    p.add_argument(
        "--policy", default="random", metavar="POLICY",
        help="'random', or a run directory written by python -m jaxenvs.train (its checkpoint's policy)",
    )
    p.add_argument(
        "--sample", action="store_true",
        help="with a trained policy: sample actions from it instead of taking its most likely action",
    )
    p.add_argument(
        "--run-seed", type=non_negative_int, default=0, metavar="I",
        help="with a trained policy: which of the run's seeds to play",
    )
    add_opponent_args(p, "play the policy in one seat (--seat) against it, or 'human' (you: see --human)",
                      human=True)
    p.add_argument(
        "--human", action="store_true",
        help="two-player games: you play seat --seat against the run's policy, --opponent NAME, or another person "
             "(--opponent human), in a window where a display exists (a click plays a move), else at the terminal "
             "(moves typed); --render human / --render text to choose",
    )
    p.add_argument(
        "--seat", type=int_arg(0, 2, "0 or 1"), default=None, metavar="0|1",
        help="with --opponent: the policy's seat; with --human: yours; 0 moves first (default: 0)",
    )
    p.add_argument(
        "--level", default=None, metavar="FILE",
        help="play this level: a JSON file of one level as jaxenvs.levels writes it (level_to_json, or save_levels with one)",
    )
    p.add_argument("--episodes", type=positive_int, default=None, metavar="N",
                   help=f"episodes to run (default: 1, or {VIDEO_EPISODES} with --render gif/mp4)")
    p.add_argument("--seed", type=seed_arg, default=0, metavar="S", help="random seed, in [0, 2**63)")
    p.add_argument(
        "--max-steps", type=positive_int, default=1000, metavar="T",
        help="stop an episode after T steps when the environment has no time limit",
    )
    p.add_argument(
        "--render", type=render_mode, default=None, metavar="MODE",
        help="'text' (print each state), 'human' (pygame window), 'gif' or 'mp4' (a file: --out); with --human or "
             "--opponent human: 'human' the window, 'text' the terminal (default: the window where a display exists)",
    )
    p.add_argument("--out", default=None, metavar="PATH", help="the file --render gif/mp4 writes")
    p.add_argument("--fps", type=positive_float, default=None, help="frames per second (default: the env's)")
    p.add_argument("--no-legend", action="store_true", help="leave the legend out of the frames")


def _check_out(mode: str | None, out: str | None) -> Path | None:
    """The video path for --render gif/mp4, checked before anything is computed."""
    if mode in ("gif", "mp4"):
        if out is None:
            raise UsageError(f"--render {mode} needs --out PATH (a file ending in .{mode})")
        suffix = Path(out).suffix.lower()
        if suffix != f".{mode}":
            raise UsageError(f"--render {mode} needs a path ending in .{mode}, got --out {out!r}")

        try:
            return check_video_path(out)
        except (OSError, ValueError) as e:
            raise UsageError(f"--out: {message(e)}") from e
        except ImportError as e:
            raise Failure(message(e)) from e
    if out is not None:
        raise UsageError("--out is for --render gif or --render mp4")
    return None


def _format_returns(env, returns) -> str:
    if np.ndim(returns) == 0:
        return f"return {float(returns):.3f}"
    return "returns " + " ".join(f"{a}={r:+.3f}" for a, r in zip(env.agents, np.asarray(returns)))


def _seat_result(r) -> str:
    return "win" if r > 0 else "loss" if r < 0 else "draw"


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


def _human_game(args, env, record, label: str) -> None:
    """``--human`` / ``--opponent human``: one or more games in a window (`jaxenvs.games.window`) or at the
    terminal (`jaxenvs.games.human`): ``--render human`` the window, ``--render text`` the terminal, by default
    the window where a display exists (else the terminal, with a line saying why)."""
    import jax

    if not human.supports_people(env):
        raise UsageError(f"--human / --opponent human: a person cannot play {env.spec.id}; a person plays two-player "
                         "turn-based games with a text rendering (TicTacToe-v0, ConnectFour-v0, KuhnPoker-v0)")
    if args.render in ("gif", "mp4"):
        raise UsageError(f"--render {args.render} is for games between policies; a person plays in a window "
                         "(--render human) or in the terminal (--render text), by default the window where a display "
                         "exists")
    if args.human and args.opponent == "human" and human.hides_information(env):
        raise UsageError(f"--human --opponent human: {env.spec.id} hides each player's cards, so one person plays "
                         "against a policy (the run's, or --opponent NAME)")
    seat = args.seat or 0
    me = record
    if me is not None:  # a short name for the board's lines; the header names the run
        print(f"policy: {label}")
        label = "policy" + (f", search {record.search}" if record.search else "")
        label += f", look-ahead {record.lookahead}" if record.lookahead else ""
    if args.human and args.opponent == "human":
        seats, labels = [None, None], ["person", "person"]
    elif args.human:  # the person in `seat`, against the opponent, else the policy
        if args.opponent is not None:
            other_label, other = named_opponent(env, args.opponent)
            other_label = other_label.split(" (")[0]
        else:
            other_label, other = label, me or random_legal
        seats = [None, other] if seat == 0 else [other, None]
        labels = ["you", other_label] if seat == 0 else [other_label, "you"]
    else:  # --opponent human: the policy in `seat`, the person in the other

        seats = [me or random_legal, None] if seat == 0 else [None, me or random_legal]
        labels = [label, "you"] if seat == 0 else ["you", label]
    header = f"{env.spec.id}: agent 0 (moves first): {labels[0]}; agent 1: {labels[1]}"
    print(header)
    mode = {None: "auto", "human": "window", "text": "terminal"}[args.render]
    try:
        screen = open_screen(env, mode, title=f"jaxenvs play {env.spec.id}", header=header.split(": ", 1)[1])
    except (ImportError, OSError) as e:
        reason = message(e).split("; save a file")[0]  # the window's advice is for frames, not a game
        raise Failure(f"--render human: {reason}; --render text plays in the terminal") from e
    key = jax.random.key(args.seed)
    totals = np.zeros(2)
    games = args.episodes or 1
    for g in range(games):
        if games > 1:
            print(f"=== game {g + 1} of {games}")
        key, k = jax.random.split(key)
        try:
            returns = human.play_game(env, seats, k, labels=labels, screen=screen)
        except human.GameGivenUp as e:  # asked for: a plain line, not an error
            screen.close()
            print(f"game stopped: {e}")
            return
        except human.InputEnded as e:
            screen.close()
            raise Failure(f"game stopped: {e}") from e
        except KeyboardInterrupt:  # Ctrl-C at the prompt: a clean line, exit status 130
            screen.close()
            print("\ngame interrupted", file=sys.stderr)
            raise
        totals += np.sign(returns)
    screen.close()
    if games > 1:
        print("after " + str(games) + " games: " + ", ".join(
            f"agent {i} ({labels[i]}) {int(np.sum(totals[i]))} net wins" for i in range(2)))


def _policy(args):
    """``(env, joint policy, run's record or None, label)`` of ``--policy``: random play, or a
    trained run's policy on its own environment (``ID``, when given, must name the same one)."""
    if args.policy == "random":
        if args.env_id is None:
            raise UsageError("play needs an environment ID, or --policy RUN_DIR to play a trained run")
        if args.sample or args.run_seed:
            raise UsageError("--sample and --run-seed are for a trained policy (--policy RUN_DIR)")
        if args.search:
            raise UsageError("--search N is for a trained policy (--policy RUN_DIR): its network guides the search")
        if args.lookahead:
            raise UsageError("--lookahead N is for a trained policy (--policy RUN_DIR): its network chooses among the "
                             "moves the look-ahead keeps")
        env = _on_level(args, args.env_id, dict(args.kwarg))
        return env, random_policy(env), None, "random policy"
    record = load_run_policy(args.policy, args.run_seed, args.sample, args.search, args.lookahead)
    if args.env_id is not None and spec_id(args.env_id) != spec_id(record.env_id):
        raise UsageError(f"the run in {args.policy!r} was trained on {record.env_id}, not {args.env_id}")
    # no auto-reset: each of the N parallel envs plays its first episode, and the state the
    # episode ended in stays in the trajectory (it is the state the following step starts from)
    env = _on_level(args, record.env_id, {**record.env_kwargs, **dict(args.kwarg)})
    label = f"{'sampled' if args.sample else 'greedy'} policy of {args.policy} (seed {args.run_seed})"
    if record.search:
        label += f" with {record.search} simulations of tree search per move"
    if record.lookahead:
        label += f"{' and' if record.search else ' with'} {record.lookahead} plies of exact look-ahead"
    return env, joint_policy(record), record, label


def _on_level(args, env_id: str, kwargs: dict):
    """The env without auto-reset, on ``--level FILE`` when given (the level's fields become params)."""
    env = make_env(env_id, kwargs, autoreset=False)
    if args.level is None:
        return env
    try:
        fields = level_fields(args.level, env.default_params)
    except (ParamSpaceError, OSError, ValueError) as e:
        raise UsageError(f"--level {args.level}: {message(e)}") from e
    return make_env(env_id, {**kwargs, **fields}, autoreset=False)


def run(args) -> None:
    mode = args.render
    path = _check_out(mode, args.out)
    _run_dir_as_id(args)
    people = args.human or args.opponent == "human"
    if args.seat is not None and args.opponent is None and not args.human:
        raise UsageError("--seat is the policy's seat against an --opponent (or yours with --human); give --opponent "
                         "NAME|RUN_DIR|human or --human too")
    env, policy, record, label = _policy(args)
    if people:
        return _human_game(args, env, record, label)

    if args.episodes is None:
        args.episodes = VIDEO_EPISODES if mode in ("gif", "mp4") else 1
    horizon = episode_horizon(env, args.max_steps)
    if record is not None:
        say_cost(env, record.search, record.lookahead, args.episodes, horizon)
    seat = None
    if args.opponent is not None:
        seat = args.seat or 0
        policy, opponent_label = against_opponent(env, record, args.opponent, seat)
        label += f" in seat {seat} (agent {env.agents[seat]}, {'first' if seat == 0 else 'second'} to move) vs {opponent_label}"
    if mode is not None:
        _check_renders(env, mode)
    print(f"{env.spec.id}: {label}")
    firsts, states = play_episodes(env, policy, args.seed, args.episodes, args.max_steps, mode is not None)
    if mode == "text":  # the boards first, then what came of them
        _render(args, env, firsts, states, path)
    _print_results(env, firsts, seat, horizon)
    if mode not in (None, "text"):
        _render(args, env, firsts, states, path)


def _render_error(env, mode: str) -> NotImplementedError | None:
    """Why ``env`` cannot draw for ``--render MODE`` (None if it can): text draws one reset state on
    the host; frames trace reset and render for their shapes only, nothing compiled."""
    import jax

    try:
        if mode == "text":
            _, state = jax.jit(env.reset)(jax.random.key(0))
            env.render_text(state, env.default_params)
        else:
            jax.eval_shape(lambda k: env.render(env.reset(k)[1], env.default_params), jax.random.key(0))
    except NotImplementedError as e:
        return e
    return None


def _check_renders(env, mode: str) -> None:
    """Refuse ``--render MODE`` for an env that cannot draw that way before any episode is played,
    suggesting the other kind of drawing only where the env has it."""
    e = _render_error(env, mode)
    if e is None:
        return
    other = "text" if mode != "text" else "gif"
    hint = (f"try --render {'human, gif or mp4' if other == 'gif' else 'text'}, or leave --render out"
            if _render_error(env, other) is None else "leave --render out")
    raise Failure(f"--render {mode}: {env.spec.id} cannot draw that way ({message(e)}); {hint}") from e


def _print_results(env, firsts, seat, horizon: int) -> None:
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


def _render(args, env, firsts, states, path) -> None:
    """``--render``: each state printed (``text``), or the frames with their legend and captions
    shown (``human``) or saved (``gif``, ``mp4``)."""
    import jax

    mode = args.render
    try:
        if mode == "text":
            for i, (ep, ep_states) in enumerate(zip(firsts, states), 1):
                for t in range(len(jax.tree.leaves(ep_states)[0])):
                    print(f"--- episode {i}, t={t}")
                    print(env.render_text(jax.tree.map(lambda x: x[t], ep_states), env.default_params))
                print(f"--- episode {i} {'ends' if ep.outcome != 'unfinished' else 'stops'} after {ep.length} steps: "
                      f"{ep.outcome}, {_format_returns(env, ep.returns)}")
            return
        frames = render_frames(env, jax.tree.map(lambda *xs: np.concatenate(xs), *states))
        # a turn-based game: a caption under each frame says whose move it is, or how the game ended
        captions = None if args.no_legend else status_captions(env, states)
        if captions is None and not args.no_legend:  # other envs: which episode, which step, how it ended
            captions = _episode_captions(firsts, states, len(firsts))
    except NotImplementedError as e:
        raise Failure(message(e)) from e
    fps = args.fps or env.render_fps
    try:
        if not args.no_legend:
            frames = add_legend(env, frames)
            if captions is not None:
                frames = add_captions(frames, captions)
        if mode == "human":
            play_human(env, frames, fps=fps)
        else:
            save_video(frames, path, fps=fps)
            print(f"saved {len(frames)} frames to {path}")
    except (ImportError, OSError) as e:
        raise Failure(message(e)) from e




COMMAND = Command(
    "play", run=run, arguments=arguments,
    help="run episodes with a policy (random or a trained run) and show or save them",
    description="Run episodes and print return, length and outcome of each; --render shows or saves them.",
)
