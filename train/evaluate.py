"""Evaluate trained PPO policies: ``python -m train.evaluate RUN_DIR``.

Each environment kind has one evaluation function in ``EVALUATORS`` (keyed by the registered
name without version); it returns a dict of float metrics and ``solved`` (bool): whether the
policy meets the bar below. Policies act greedily (the mode of the policy) unless a metric is
about the mixed strategy itself.

* GridWorld: 1000 episodes; success rate (target reached within the time limit) must be 1.0 and
  mean episode length at most 1.1 x the mean Manhattan distance of the initial states (which is
  the optimal mean length).
* PointEnv: 1000 episodes; at least 95% reach the goal region within the time limit.
* HurdleRace: 1000 self-play episodes, the fraction of decisions (every agent, every step until
  the race ends) that JUMP exactly when a hurdle is ahead must be >= 0.95; and 1000 episodes with
  the policy as agent 0 against a uniformly random agent 1 must be won >= 90% of the time.
* Lottery: the greedy choice must be PowerRich (the highest expected value: 0.01 * 1e8 - 0.99 *
  10); the policy's probability of it is reported.
* RockPaperScissors: the exploitability of the learned mixed strategy, i.e. the expected payoff
  of the best response against it (payoffs read off the environment's step), must be <= 0.1.

Environments with no entry get the mean undiscounted return over 1000 episodes; ``solved`` is
whether it reaches the spec's ``reward_threshold`` (e.g. 475 for gymnax/CartPole-v1, -100 for
gymnax/Acrobot-v1), None where the spec has none. With several seeds in a run every seed is evaluated; the run is solved when all are.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import jaxenvs
from jaxenvs.rollout import rollout
from .ppo import Trainer

__all__ = ["EVALUATORS", "evaluate", "evaluate_params", "first_episodes", "main"]

NUM_EPISODES = 1000


def _eval_env(trainer: Trainer):
    """The trainer's environment without auto-reset (episodes stop where they end)."""
    return jaxenvs.make(trainer.config.env_id, autoreset=False, **trainer.config.env_kwargs)


def _greedy_policy(trainer: Trainer, params) -> Callable:
    """``(key, obs) -> action`` for ONE environment (the form :func:`jaxenvs.rollout.rollout` takes)."""

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
    done = np.asarray(traj.terminated | traj.truncated)
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
        terminated=np.asarray(traj.terminated)[last, np.arange(n)],
        returns=(reward * mask).sum(axis=0),
    )


def _episodes(trainer, params, key, policy=None, num_episodes=NUM_EPISODES):
    env = _eval_env(trainer)
    steps = jaxenvs.spec(trainer.config.env_id).max_episode_steps or 1
    policy = _greedy_policy(trainer, params) if policy is None else policy
    traj = rollout(env, key, policy, steps, num_envs=num_episodes, record_states=False)
    return traj, first_episodes(traj)


def evaluate_grid_world(trainer, params, key) -> dict:
    traj, ep = _episodes(trainer, params, key)
    start = jax.tree.map(lambda x: np.asarray(x[0]), traj.obs)
    manhattan = np.abs(start["agent"] - start["target"]).sum(axis=-1)
    success = ep["terminated"].mean()
    ratio = ep["length"].mean() / manhattan.mean()
    return dict(
        success_rate=float(success),
        mean_length=float(ep["length"].mean()),
        mean_manhattan_distance=float(manhattan.mean()),
        length_ratio=float(ratio),
        solved=bool(success == 1.0 and ratio <= 1.1),
    )


def evaluate_point_env(trainer, params, key) -> dict:
    _, ep = _episodes(trainer, params, key)
    success = float(ep["terminated"].mean())
    return dict(success_rate=success, mean_length=float(ep["length"].mean()), solved=success >= 0.95)


def evaluate_hurdle_race(trainer, params, key) -> dict:
    from jaxenvs.envs.hurdle_race import HURDLE, JUMP, RUN

    k_self, k_random = jax.random.split(key)
    traj, ep = _episodes(trainer, params, k_self)
    obs, action = np.asarray(traj.obs), np.asarray(traj.action)  # int32[T, n, 2]
    correct = action == np.where(obs == HURDLE, JUMP, RUN)
    decisions = ep["alive"][..., None] & np.ones_like(correct)
    accuracy = float(correct[decisions].mean())

    greedy = _greedy_policy(trainer, params)
    space = trainer.env.action_space(trainer.env_params)

    def versus_random(key, obs):
        return jnp.stack([greedy(key, obs)[0], space.sample(key)])

    _, ep_r = _episodes(trainer, params, k_random, policy=versus_random)
    win_rate = float((ep_r["returns"][:, 0] > 0).mean())
    return dict(
        decision_accuracy=accuracy,
        win_rate_vs_random=win_rate,
        mean_length_self_play=float(ep["length"].mean()),
        solved=accuracy >= 0.95 and win_rate >= 0.90,
    )


def _initial_probs(trainer, params, key) -> np.ndarray:
    """The policy's action probabilities in a freshly reset state: float[n] or float[agents, n]."""
    obs, _ = trainer.env.reset(key, trainer.env_params)
    out, _ = trainer.network.apply(params, trainer.flat_obs(jax.tree.map(lambda x: x[None], obs)))
    probs = np.asarray(trainer.dist_fn(out).probs(), np.float64)  # [rows, n]: one row per agent
    return probs if trainer.env.multi_agent else probs[0]


def evaluate_lottery(trainer, params, key) -> dict:
    from jaxenvs.envs.lottery import ACTION_NAMES

    probs = _initial_probs(trainer, params, key)
    best = ACTION_NAMES.index("PowerRich")
    return dict(
        prob_power_rich=float(probs[best]),
        prob_mega_haul=float(probs[ACTION_NAMES.index("MegaHaul")]),
        prob_no_ticket=float(probs[ACTION_NAMES.index("NoTicket")]),
        greedy_action=int(probs.argmax()),
        solved=bool(probs.argmax() == best),
    )


def _payoff_matrix(env, key) -> np.ndarray:
    """float[n, n]: agent 0's reward when agent 0 plays i and agent 1 plays j (one-shot game)."""
    n = env.action_space(env.default_params).n
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    actions = jnp.asarray(np.stack([i.ravel(), j.ravel()], axis=1), jnp.int32)

    def payoff(a):
        _, state = env.reset(key)
        return env.step(key, state, a)[2][0]

    return np.asarray(jax.vmap(payoff)(actions)).reshape(n, n)


def evaluate_rock_paper_scissors(trainer, params, key) -> dict:
    probs = _initial_probs(trainer, params, key)  # [agents, 3]; both agents share the policy
    payoff = _payoff_matrix(_eval_env(trainer), key)
    exploitability = max(float((payoff @ p).max()) for p in probs)
    return dict(
        exploitability=exploitability,
        max_abs_deviation_from_uniform=float(np.abs(probs - 1.0 / probs.shape[-1]).max()),
        probs_agent0=probs[0].round(4).tolist(),
        solved=exploitability <= 0.1,
    )


def evaluate_generic(trainer, params, key) -> dict:
    _, ep = _episodes(trainer, params, key)
    mean_return = float(np.mean(ep["returns"]))
    threshold = jaxenvs.spec(trainer.config.env_id).reward_threshold
    solved = None if threshold is None else mean_return >= threshold
    return dict(mean_return=mean_return, mean_length=float(ep["length"].mean()), solved=solved)


EVALUATORS: dict[str, Callable[[Trainer, Any, jax.Array], dict]] = {
    "GridWorld": evaluate_grid_world,
    "PointEnv": evaluate_point_env,
    "HurdleRace": evaluate_hurdle_race,
    "Lottery": evaluate_lottery,
    "RockPaperScissors": evaluate_rock_paper_scissors,
}


def evaluate_params(trainer: Trainer, params, key=None) -> dict:
    """Metrics of ONE set of network params (no seed axis) on the trainer's environment."""
    key = jax.random.key(12345) if key is None else key
    name = jaxenvs.spec(trainer.config.env_id).name
    return EVALUATORS.get(name, evaluate_generic)(trainer, params, key)


def evaluate(trainer: Trainer, params, key=None) -> dict:
    """Evaluate params with a leading seed axis: ``{"seeds": [metrics per seed], "solved": all}``."""
    num_seeds = jax.tree.leaves(params)[0].shape[0]
    per_seed = [evaluate_params(trainer, jax.tree.map(lambda x: x[i], params), key) for i in range(num_seeds)]
    flags = [m["solved"] for m in per_seed]
    solved = None if any(f is None for f in flags) else all(flags)
    return {"env_id": trainer.config.env_id, "seeds": per_seed, "solved": solved}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m train.evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a run directory written by `python -m train` (holds checkpoint.msgpack)")
    parser.add_argument("--seed", type=int, default=12345, help="PRNG seed of the evaluation episodes")
    args = parser.parse_args(argv)
    from .checkpoint import load_run

    trainer, runner, _ = load_run(args.run_dir)
    result = evaluate(trainer, runner.params, jax.random.key(args.seed))
    print(json.dumps(result, indent=2))
    return 0 if result["solved"] in (True, None) else 1


if __name__ == "__main__":
    sys.exit(main())
