"""Greedy evaluation episodes of a trained policy: the machinery every evaluation shares
(`train.tuned` holds what each environment measures with it).

Each evaluation runs ``num_episodes`` environments without auto-reset (``jaxenvs.make(...,
autoreset=False)``), one jitted `jaxenvs.rollout.rollout` with params as an argument, so evaluating
new params after every chunk of training compiles nothing again. A count that is a multiple of
`BLOCK` runs as that many blocks of `BLOCK` episodes (one key each, split from the evaluation's
key) through the one program of `BLOCK` episodes: the progress evaluations during training and the
final evaluation (1000 episodes) share one compiled program.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

import jaxenvs
from jaxenvs.prng import split_on_host
from jaxenvs.rollout import rollout
from .xla import AheadOfTime

__all__ = ["NUM_EPISODES", "BLOCK", "eval_env", "greedy_policy", "first_episodes", "episodes", "initial_probs", "payoff_matrix"]

from .tuned import NUM_EPISODES  # noqa: E402  (one number, kept with the entries)

BLOCK = 200  # episodes per call of the evaluation program (a progress evaluation is one block)


def eval_env(trainer):
    """The trainer's environment without auto-reset (episodes stop where they end)."""
    return jaxenvs.make(trainer.config.env_id, autoreset=False, **trainer.config.env_kwargs)


def greedy_policy(trainer, params) -> Callable:
    """``(key, obs) -> action`` for ONE environment (the form `jaxenvs.rollout.rollout` takes)."""

    def policy(key, obs):
        del key
        return trainer.act(params, jax.tree.map(lambda x: x[None], obs))[0]

    return policy


def first_episodes(traj) -> dict[str, np.ndarray]:
    """Per-environment summary of the first episode of a batched, non-resetting rollout.

    Returns ``alive`` bool[T, n] (steps up to and including the episode's last), ``length``
    int[n], ``terminated`` bool[n] (the MDP ended, even on the time limit's last step), ``finished``
    bool[n] and ``returns`` float[n(, agents)].
    """
    terminated = np.asarray(traj.terminated)  # host arrays first: no device op compiled for this
    done = terminated | np.asarray(traj.truncated)
    steps, n = done.shape
    ended_before = np.cumsum(done, axis=0) - done > 0
    alive = ~ended_before
    finished = done.any(axis=0)
    last = np.where(finished, done.argmax(axis=0), steps - 1)
    reward = np.asarray(traj.reward, np.float64)
    mask = alive.reshape(alive.shape + (1,) * (reward.ndim - 2))
    return dict(
        alive=alive,
        length=alive.sum(axis=0),
        finished=finished,
        terminated=terminated[last, np.arange(n)],
        returns=(reward * mask).sum(axis=0),
    )


_EPISODE_FNS: dict = {}


def _episode_fn(trainer, versus_random: bool, num_episodes: int) -> Callable:
    """Jitted ``(params, key) -> Trajectory`` of ``num_episodes`` non-resetting episodes of the
    greedy policy (as agent 0 against a uniformly random agent 1 when ``versus_random``)."""
    cache_key = (id(trainer), versus_random, num_episodes)
    if cache_key not in _EPISODE_FNS:
        env = eval_env(trainer)
        steps = jaxenvs.spec(trainer.config.env_id).max_episode_steps or 1
        space = trainer.env.action_space(trainer.env_params)

        def run(params, key):
            greedy = greedy_policy(trainer, params)
            if versus_random:
                def policy(key, obs):
                    return jnp.stack([greedy(key, obs)[0], space.sample(key)])
            else:
                policy = greedy
            return rollout(env, key, policy, steps, num_envs=num_episodes, record_states=False)

        _EPISODE_FNS[cache_key] = (trainer, AheadOfTime(run))  # the trainer is kept so its id stays unique
    return _EPISODE_FNS[cache_key][1]


def episodes(trainer, params, key, versus_random=False, num_episodes=NUM_EPISODES):
    """``(trajectory, first_episodes(trajectory))`` of ``num_episodes`` greedy episodes; the
    trajectory's arrays are on the host (numpy), so what the caller computes from them compiles
    nothing. A multiple of `BLOCK` runs as blocks of `BLOCK` episodes, block ``i`` from
    ``jax.random.split(key, blocks)[i]``, joined along the episode axis (the module docstring)."""
    blocks = num_episodes // BLOCK if num_episodes > BLOCK and num_episodes % BLOCK == 0 else 1
    run = _episode_fn(trainer, versus_random, num_episodes // blocks)
    if blocks == 1:
        traj = jax.device_get(run(params, key))
    else:
        parts = [jax.device_get(run(params, k)) for k in split_on_host(key, blocks)]  # the same keys, nothing compiled
        timed = lambda *xs: np.concatenate(xs, axis=1)  # noqa: E731  ([T, episodes, ...])
        last = lambda *xs: np.concatenate(xs, axis=0)  # noqa: E731  ([episodes, ...])
        traj = parts[0]._replace(**{
            name: jax.tree.map(last if name.startswith("last_") else timed, *[getattr(p, name) for p in parts])
            for name in parts[0]._fields
        })
    return traj, first_episodes(traj)


def initial_probs(trainer, params, key) -> np.ndarray:
    """The policy's action probabilities in a freshly reset state: float[n] or float[agents, n]."""
    obs, _ = trainer.env.reset(key, trainer.env_params)
    out, _ = trainer.network.apply(params, trainer.flat_obs(jax.tree.map(lambda x: x[None], obs)))
    probs = np.asarray(trainer.dist_fn(out).probs(), np.float64)  # [rows, n]: one row per agent
    return probs if trainer.env.multi_agent else probs[0]


def payoff_matrix(env, key) -> np.ndarray:
    """float[n, n]: agent 0's reward when agent 0 plays i and agent 1 plays j (one-shot game)."""
    n = env.action_space(env.default_params).n
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    actions = jnp.asarray(np.stack([i.ravel(), j.ravel()], axis=1), jnp.int32)

    def payoff(a):
        _, state = env.reset(key)
        return env.step(key, state, a)[2][0]

    return np.asarray(jax.vmap(payoff)(actions)).reshape(n, n)
