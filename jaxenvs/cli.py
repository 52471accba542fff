"""The ``jaxenvs`` command line (also ``python -m jaxenvs``).

    jaxenvs list                                   registered environments and their traits
    jaxenvs describe GridWorld-v0                  spaces, params with defaults, traits, spec
    jaxenvs play GridWorld-v0 --episodes 3 --render gif out.gif
    jaxenvs check GridWorld-v0                     the conformance checks of jaxenvs.check_env
    jaxenvs bench GridWorld-v0 --num-envs 4096 --steps 1000

Exit status: 0 on success, 1 when a check fails or something outside the command line is
missing (an optional package, a display, a writable folder), 2 for a mistake in the command line
(unknown flag or environment id, bad value). Mistakes are reported as one line on stderr.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["main", "build_parser"]

PROG = "jaxenvs"


class UsageError(Exception):
    """A mistake in the command line (exit status 2)."""


class Failure(Exception):
    """A command that could not do its job for a reason outside the command line (exit status 1)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def _env_kwarg(text: str) -> tuple[str, Any]:
    name, sep, raw = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    return name, value


def _add_env_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("env_id", metavar="ID", help="registered environment id, e.g. GridWorld-v0")
    p.add_argument(
        "--kwarg", "-k", type=_env_kwarg, action="append", default=[], metavar="NAME=VALUE",
        help="passed to jaxenvs.make (a params field or a constructor argument); repeatable",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Reinforcement-learning environments as pure JAX functions.")
    from jaxenvs import __version__

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    sub.add_parser("list", help="list the registered environments with their traits")

    p = sub.add_parser("describe", help="spaces, params with defaults, traits and spec of an environment")
    p.add_argument("env_id", metavar="ID")

    p = sub.add_parser("play", help="run episodes with a policy and print return, length and outcome")
    _add_env_args(p)
    p.add_argument("--policy", choices=["random"], default="random", help="the policy (default: random)")
    p.add_argument("--episodes", type=_positive_int, default=1, metavar="N", help="episodes to run (default: 1)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default: 0)")
    p.add_argument(
        "--max-steps", type=_positive_int, default=1000, metavar="T",
        help="stop an episode after T steps when the environment has no time limit (default: 1000)",
    )
    p.add_argument(
        "--render", nargs="+", metavar="MODE", default=None,
        help="'text' (print each state), 'human' (pygame window), 'gif PATH' or 'mp4 PATH'",
    )
    p.add_argument("--fps", type=_positive_float, default=None, help="frames per second (default: the env's)")

    p = sub.add_parser("check", help="run jaxenvs.check_env on an environment")
    _add_env_args(p)
    p.add_argument("--num-envs", type=_positive_int, default=8, metavar="N", help="parallel envs (default: 8)")
    p.add_argument("--steps", type=_positive_int, default=100, metavar="T", help="random steps (default: 100)")

    p = sub.add_parser("bench", help="steps per second with jit + vmap + scan and random actions")
    _add_env_args(p)
    p.add_argument("--num-envs", type=_positive_int, default=1024, metavar="N", help="parallel envs (default: 1024)")
    p.add_argument("--steps", type=_positive_int, default=1000, metavar="T", help="steps per env (default: 1000)")
    p.add_argument("--repeats", type=_positive_int, default=3, help="timed runs; the median counts (default: 3)")
    p.add_argument("--seed", type=int, default=0, metavar="S")
    return parser


def _make(env_id: str, kwargs=(), autoreset: bool = True):
    import jaxenvs

    try:
        jaxenvs.spec(env_id)
    except (KeyError, ValueError, TypeError) as e:
        raise UsageError(_message(e)) from e
    try:
        return jaxenvs.make(env_id, autoreset=autoreset, **dict(kwargs))
    except ImportError as e:
        raise Failure(_message(e)) from e
    except (TypeError, ValueError) as e:
        raise UsageError(_message(e)) from e


def _message(e: BaseException) -> str:
    text = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
    return " ".join(str(text).split())


def cmd_list(args) -> None:
    import jaxenvs

    rows = []
    jaxenvs.registration.load_lazy_namespaces()  # e.g. gymnax/ ids, when gymnax is installed
    for env_id in sorted(jaxenvs.registry):
        spec = jaxenvs.registry[env_id]
        try:
            t = jaxenvs.make(env_id, autoreset=False).traits
            traits = (
                f"agents={t.num_agents} {t.dynamics} {t.chance} {t.information}-information "
                f"{t.utility} {t.reward_style}-reward {t.action_style}"
            )
        except Exception as e:  # an entry point that cannot be built must not hide the others
            traits = f"(cannot be built: {_message(e)})"
        rows.append((env_id, f"max_episode_steps={spec.max_episode_steps}", traits))
    width = max((len(r[0]) for r in rows), default=0)
    for env_id, steps, traits in rows:
        print(f"{env_id:<{width}}  {steps:<22}  {traits}")


def cmd_describe(args) -> None:
    import jaxenvs

    _make(args.env_id, autoreset=False)  # turns a bad id into a usage error
    print(jaxenvs.describe(args.env_id))


def _parse_render(parser_prog: str, render: list[str] | None):
    if render is None:
        return None, None
    mode, rest = render[0], render[1:]
    if mode in ("text", "human") and not rest:
        return mode, None
    if mode in ("gif", "mp4") and len(rest) == 1:
        from jaxenvs.rendering.io import VIDEO_SUFFIXES, check_video_path

        suffix = Path(rest[0]).suffix.lower()
        if suffix != f".{mode}" and suffix in VIDEO_SUFFIXES:
            raise UsageError(f"--render {mode} needs a path ending in .{mode}, got {rest[0]!r}")
        return mode, check_video_path(rest[0])
    raise UsageError(
        f"--render takes 'text', 'human', 'gif PATH' or 'mp4 PATH', got {' '.join(render)!r} "
        f"(see {parser_prog} --help)"
    )


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


def cmd_play(args) -> None:
    import jax

    from jaxenvs.rendering import io
    from jaxenvs.rollout import episode_stats, random_policy, rollout

    try:
        mode, path = _parse_render(f"{PROG} play", args.render)
    except ValueError as e:
        raise UsageError(_message(e)) from e
    except (ImportError, OSError) as e:
        raise Failure(_message(e)) from e
    # no auto-reset: each of the N parallel envs plays its first episode, and the state the
    # episode ended in stays in the trajectory (it is the state the following step starts from)
    env = _make(args.env_id, args.kwarg, autoreset=False)
    horizon = env.spec.max_episode_steps or args.max_steps
    traj = rollout(
        env, jax.random.key(args.seed), random_policy(env), horizon, num_envs=args.episodes,
        record_states=mode is not None,
    )
    firsts = [e for e in episode_stats(traj, include_unfinished=True) if e.start == 0]
    for i, ep in enumerate(firsts, 1):
        note = f" (stopped after {horizon} steps; raise --max-steps)" if ep.outcome == "unfinished" else ""
        print(f"episode {i}: {_format_returns(env, ep.returns)}  length {ep.length}  {ep.outcome}{note}")
    n = len(firsts)
    print(
        f"{n} episode{'s' * (n != 1)}: mean {_format_returns(env, np.mean([e.returns for e in firsts], axis=0))}, "
        f"mean length {np.mean([e.length for e in firsts]):.1f}"
    )
    if mode is None:
        return
    states = [_episode_states(traj, ep) for ep in firsts]
    try:
        if mode == "text":
            for i, ep_states in enumerate(states, 1):
                for t in range(len(jax.tree.leaves(ep_states)[0])):
                    print(f"--- episode {i}, t={t}")
                    print(env.render_text(jax.tree.map(lambda x: x[t], ep_states), env.default_params))
            return
        frames = io.render_frames(env, jax.tree.map(lambda *xs: np.concatenate(xs), *states))
    except NotImplementedError as e:
        raise Failure(_message(e)) from e
    fps = args.fps or env.render_fps
    try:
        if mode == "human":
            io.play_human(env, frames, fps=fps)
        else:
            io.save_video(frames, path, fps=fps)
            print(f"saved {len(frames)} frames to {path}")
    except (ImportError, OSError) as e:
        raise Failure(_message(e)) from e


def cmd_check(args) -> int:
    env = _make(args.env_id, args.kwarg)
    from jaxenvs.checker import EnvCheckError, check_env

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
    return 0


def cmd_bench(args) -> None:
    from jaxenvs.rollout import benchmark

    env = _make(args.env_id, args.kwarg)
    res = benchmark(env, num_envs=args.num_envs, num_steps=args.steps, seed=args.seed, repeats=args.repeats)
    import jax

    print(
        f"{env.spec.id}: {res.num_envs} envs x {res.num_steps} steps, random actions, jit+vmap+scan "
        f"on {jax.devices()[0].platform}"
    )
    print(f"compile: {res.compile_s:.2f} s (excluded)")
    print(f"run: median {np.median(res.run_s):.4f} s of {len(res.run_s)}")
    print(f"{res.steps_per_s:,.0f} steps/s")


COMMANDS = {"list": cmd_list, "describe": cmd_describe, "play": cmd_play, "check": cmd_check, "bench": cmd_bench}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
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
