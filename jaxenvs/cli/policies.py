"""What ``jaxenvs play`` plays: a trained run's policy (`load_run_policy`), named opponents in
one seat of a game, and the episodes themselves (`play_episodes`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from .args import TRAIN_EXTRA, Failure, UsageError
from .envs import message

__all__ = ["load_run_policy", "play_episodes", "named_opponent", "against_opponent"]


def load_run_policy(run_dir: str | os.PathLike, run_seed: int = 0, sample: bool = False, search: int | None = None,
                    lookahead: int | None = None):
    """``(env_id, env_kwargs, policy)`` from a run directory of ``jaxenvs-train``, through
    `jaxenvs.train.load_policy` (the one loader), with its mistakes as command-line errors.

    ``policy(key, obs)`` acts for ONE environment with the parameters of seed ``run_seed`` of the
    run (greedy, or sampled with ``sample``; with ``search`` simulations of tree search per move, None:
    the run's own ``play_search``; ``policy.search`` says how many it plays with; with ``lookahead``
    plies of exact look-ahead, None: the run's own ``play_lookahead``; ``policy.lookahead``).
    In a multi-agent environment every agent plays it from its own observation row, and
    ``policy.agent`` is the one-agent policy. A run of a ``module:id`` environment imports its
    module from the current directory, as ``check`` does.
    """
    run_dir = Path(run_dir)
    try:
        from jaxenvs.train.checkpoint import CHECKPOINT, CONFIG
    except ImportError as e:
        raise Failure(f"playing a trained run needs the train extra ({message(e)}): {TRAIN_EXTRA}") from e
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
        agent = load_policy(run_dir, greedy=not sample, seed=run_seed, search=search, lookahead=lookahead)
    except ImportError as e:
        text = message(e)
        if "mctx" in text:
            raise Failure(text) from e
        raise Failure(
            f"cannot load the run in {str(run_dir)!r}: its environment's module cannot be imported ({text}); run "
            f"jaxenvs play from the folder that holds that module, or put it on PYTHONPATH"
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
    trainer = agent.trainer
    if not trainer.env.multi_agent:
        return trainer.config.env_id, dict(trainer.config.env_kwargs), agent
    n = trainer.num_agents

    def policy(key, obs):
        return jax.vmap(agent)(jax.random.split(key, n), obs)

    policy.agent = agent
    policy.search = agent.search
    policy.lookahead = agent.lookahead
    return trainer.config.env_id, dict(trainer.config.env_kwargs), policy


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


def say_cost(env, policy, episodes: int, horizon: int) -> None:
    """One line on stderr with the memory and time a policy's search or look-ahead will take over
    ``episodes`` episodes of ``horizon`` steps (every agent asked every step), when that is more
    than a few seconds (`jaxenvs.games.search.check_budget`)."""
    search, lookahead = getattr(policy, "search", 0) or 0, getattr(policy, "lookahead", 0) or 0
    if not (search or lookahead):
        return
    from jaxenvs.games.search import check_budget

    moves = episodes * horizon * getattr(env, "num_agents", 1)
    line = check_budget(env, search, lookahead, moves=moves)
    if line:
        print(f"estimate: {line}", file=sys.stderr, flush=True)


def play_episodes(env, policy, seed: int, episodes: int, max_steps: int, record_states: bool = True):
    """``(episodes, states)``: the first episode of each of ``episodes`` parallel non-resetting
    envs (`jaxenvs.rollout.Episode`), and per episode the host copies of its states from
    the first to the one it ended in (None unless ``record_states``)."""
    import jax

    from jaxenvs.rollout import episode_stats, rollout

    horizon = episode_horizon(env, max_steps)
    traj = rollout(env, jax.random.key(seed), policy, horizon, num_envs=episodes, record_states=record_states)
    firsts = [e for e in episode_stats(traj, include_unfinished=True) if e.start == 0]
    states = [_episode_states(traj, ep) for ep in firsts] if record_states else None
    return firsts, states


def named_opponent(env, opponent: str):
    """``(label, policy)`` of ``--opponent`` (`jaxenvs.games.make_opponent`: names need jax and
    numpy only; a run directory needs the train extra)."""
    from jaxenvs.games import OpponentError, make_opponent

    try:
        return make_opponent(opponent, env)
    except OpponentError as e:
        raise UsageError(f"--opponent {opponent}: {message(e)}") from e
    except ImportError as e:
        raise Failure(f"--opponent {opponent}: a run directory as opponent needs the train extra ({message(e)}): "
                      f"{TRAIN_EXTRA}") from e
    except ValueError as e:  # CheckpointError: a folder that is not a run
        raise UsageError(f"--opponent {opponent}: {message(e)}") from e


def against_opponent(env, policy, opponent: str, seat: int):
    """``(joint policy, opponent label)``: ``policy`` (a joint policy of `load_run_policy` or
    `jaxenvs.rollout.random_policy`) plays seat ``seat`` from its own observation row, the
    opponent (`jaxenvs.games.make_opponent`) the other seat."""
    import jax

    from jaxenvs.games import random_legal

    opponent_label, opp = named_opponent(env, opponent)
    me = getattr(policy, "agent", None) or random_legal  # a random policy: random-legal play in its seat

    def joint(key, obs):
        k_me, k_opp = jax.random.split(key)
        rows = [jax.tree.map(lambda x, i=i: x[i], obs) for i in range(2)]
        mine, theirs = me(k_me, rows[seat]), opp(k_opp, rows[1 - seat])
        return jax.numpy.stack([mine, theirs] if seat == 0 else [theirs, mine]).astype(jax.numpy.int32)

    return joint, opponent_label
