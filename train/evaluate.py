"""Evaluate trained PPO policies: ``python -m train.evaluate RUN_DIR``.

Each environment kind has one evaluation function in ``EVALUATORS`` (keyed by the registered
name without version); it returns a dict of float metrics and ``solved`` (bool): whether the
policy meets the bar below. Policies act greedily (the mode of the policy) unless a metric is
about the mixed strategy itself.

* GridWorld: 1000 episodes; success rate (target reached within the time limit) must be 1.0 and
  mean episode length at most 1.1 x the mean Manhattan distance of the initial states (which is
  the optimal mean length).
* PointEnv: 1000 episodes; at least 95% reach the goal region within the time limit (the mean
  distance to the origin where episodes ended is reported too).
* HurdleRace: 1000 self-play episodes, the fraction of decisions (every agent, every step until
  the race ends) that JUMP exactly when a hurdle is ahead must be >= 0.95; and 1000 episodes with
  the policy as agent 0 against a uniformly random agent 1 must be won >= 90% of the time.
* Lottery: the greedy choice must be PowerRich (the highest expected value: 0.01 * 1e8 - 0.99 *
  10); the policy's probability of it is reported.
* RockPaperScissors: the exploitability of the learned mixed strategy, i.e. the expected payoff
  of the best response against it (payoffs read off the environment's step), must be <= 0.1.

Environments with no entry get the mean undiscounted return over 1000 episodes; ``solved`` is
whether it reaches the spec's ``reward_threshold`` (e.g. 475 for gymnax/CartPole-v1, -100 for
gymnax/Acrobot-v1), None where the spec has none. With several seeds in a run every seed is
evaluated; the run is solved when all are.

``python -m train.evaluate RUN_DIR`` prints a table (one column per seed, what each metric means,
the criterion and the verdict; ``--json`` for machines) and exits 0 when solved (or when the
environment has no criterion), 1 when not, 2 on a usage error (e.g. a directory that is not a
run). :data:`PROGRESS` names the metrics ``python -m train`` follows after every chunk of
training (on :data:`PROGRESS_EPISODES` episodes per seed) in its progress line and learning curve.
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
from .xla import jit

__all__ = [
    "EVALUATORS", "evaluate", "evaluate_params", "first_episodes", "progress_metrics", "format_table", "format_progress",
    "MEANINGS", "SOLVED_WHEN", "PROGRESS", "main",
]

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


_EPISODE_FNS: dict = {}


def _episode_fn(trainer: Trainer, versus_random: bool, num_episodes: int) -> Callable:
    """Jitted ``(params, key) -> Trajectory`` of ``num_episodes`` non-resetting episodes of the
    greedy policy (as agent 0 against a uniformly random agent 1 when ``versus_random``): params
    are an argument, so evaluating new params after every chunk compiles nothing again."""
    cache_key = (id(trainer), versus_random, num_episodes)
    if cache_key not in _EPISODE_FNS:
        env = _eval_env(trainer)
        steps = jaxenvs.spec(trainer.config.env_id).max_episode_steps or 1
        space = trainer.env.action_space(trainer.env_params)

        def run(params, key):
            greedy = _greedy_policy(trainer, params)
            if versus_random:
                def policy(key, obs):
                    return jnp.stack([greedy(key, obs)[0], space.sample(key)])
            else:
                policy = greedy
            return rollout(env, key, policy, steps, num_envs=num_episodes, record_states=False)

        _EPISODE_FNS[cache_key] = (trainer, jit(run))  # the trainer is kept so its id stays unique
    return _EPISODE_FNS[cache_key][1]


def _episodes(trainer, params, key, versus_random=False, num_episodes=NUM_EPISODES):
    traj = _episode_fn(trainer, versus_random, num_episodes)(params, key)
    return traj, first_episodes(traj)


def evaluate_grid_world(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    traj, ep = _episodes(trainer, params, key, num_episodes=num_episodes)
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


def evaluate_point_env(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    traj, ep = _episodes(trainer, params, key, num_episodes=num_episodes)
    success = float(ep["terminated"].mean())
    distance = np.asarray(traj.info["distance"])  # after each step
    final = distance[ep["length"] - 1, np.arange(distance.shape[1])]
    return dict(
        success_rate=success,
        mean_final_distance=float(final.mean()),
        mean_length=float(ep["length"].mean()),
        solved=success >= 0.95,
    )


def evaluate_hurdle_race(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    from jaxenvs.envs.hurdle_race import HURDLE, JUMP, NOHURDLE, RUN

    k_self, k_random = jax.random.split(key)
    traj, ep = _episodes(trainer, params, k_self, num_episodes=num_episodes)
    obs, action = np.asarray(traj.obs), np.asarray(traj.action)  # int32[T, n, 2]
    correct = action == np.where(obs == HURDLE, JUMP, RUN)
    decisions = ep["alive"][..., None] & np.ones_like(correct)
    accuracy = float(correct[decisions].mean())

    _, ep_r = _episodes(trainer, params, k_random, versus_random=True, num_episodes=num_episodes)
    win_rate = float((ep_r["returns"][:, 0] > 0).mean())
    # the policy itself (greedy play can be right from the start): runner 0 sees no hurdle, runner 1 one
    see = jnp.array([[NOHURDLE, HURDLE]], jnp.int32)
    out, _ = trainer.network.apply(params, trainer.flat_obs(see))
    probs = np.asarray(trainer.dist_fn(out).probs(), np.float64)  # [2 runners, 2 actions]
    return dict(
        decision_accuracy=accuracy,
        win_rate_vs_random=win_rate,
        mean_length_self_play=float(ep["length"].mean()),
        prob_right_action=float((probs[0, RUN] + probs[1, JUMP]) / 2),
        solved=accuracy >= 0.95 and win_rate >= 0.90,
    )


def _initial_probs(trainer, params, key) -> np.ndarray:
    """The policy's action probabilities in a freshly reset state: float[n] or float[agents, n]."""
    obs, _ = trainer.env.reset(key, trainer.env_params)
    out, _ = trainer.network.apply(params, trainer.flat_obs(jax.tree.map(lambda x: x[None], obs)))
    probs = np.asarray(trainer.dist_fn(out).probs(), np.float64)  # [rows, n]: one row per agent
    return probs if trainer.env.multi_agent else probs[0]


def evaluate_lottery(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    del num_episodes  # read off the policy itself
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


def evaluate_rock_paper_scissors(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    del num_episodes  # read off the policy itself
    probs = _initial_probs(trainer, params, key)  # [agents, 3]; both agents share the policy
    payoff = _payoff_matrix(_eval_env(trainer), key)
    exploitability = max(float((payoff @ p).max()) for p in probs)
    return dict(
        exploitability=exploitability,
        max_abs_deviation_from_uniform=float(np.abs(probs - 1.0 / probs.shape[-1]).max()),
        probs_agent0=probs[0].round(4).tolist(),
        solved=exploitability <= 0.1,
    )


def evaluate_generic(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    _, ep = _episodes(trainer, params, key, num_episodes=num_episodes)
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


# What each metric means, the bar each environment must meet, and the metrics that measure
# progress while training (shown in the progress line and on the learning curve).
MEANINGS = {
    "success_rate": "fraction of episodes that reach the goal within the time limit",
    "mean_length": "mean episode length (steps)",
    "mean_manhattan_distance": "mean Manhattan distance of the start to the target (optimal length)",
    "length_ratio": "mean length / optimal mean length (1 = optimal)",
    "mean_final_distance": "mean distance to the origin where the episode ended",
    "decision_accuracy": "fraction of decisions that jump exactly when a hurdle is ahead (self-play)",
    "win_rate_vs_random": "fraction of races won as agent 0 against a uniformly random agent 1",
    "prob_right_action": "the policy's mean probability of RUN with no hurdle ahead and of JUMP before one",
    "mean_length_self_play": "mean race length in self-play (steps)",
    "prob_power_rich": "probability of buying PowerRich (the best expected value)",
    "prob_mega_haul": "probability of buying MegaHaul",
    "prob_no_ticket": "probability of buying no ticket",
    "greedy_action": "the most probable action (0 NoTicket, 1 MegaHaul, 2 PowerRich)",
    "exploitability": "best response's expected payoff against the policy (0 at the uniform equilibrium)",
    "max_abs_deviation_from_uniform": "largest |probability - 1/3| of the mixed strategy",
    "probs_agent0": "rock, paper, scissors probabilities",
    "mean_return": "mean undiscounted return",
}
SOLVED_WHEN = {
    "GridWorld": "success_rate = 1 and length_ratio <= 1.1",
    "PointEnv": "success_rate >= 0.95",
    "HurdleRace": "decision_accuracy >= 0.95 and win_rate_vs_random >= 0.9",
    "Lottery": "greedy action is PowerRich",
    "RockPaperScissors": "exploitability <= 0.1",
}
PROGRESS = {
    "GridWorld": ("success_rate", "length_ratio"),
    "PointEnv": ("mean_final_distance", "success_rate"),
    "HurdleRace": ("win_rate_vs_random", "decision_accuracy", "prob_right_action"),
    "Lottery": ("prob_power_rich",),
    "RockPaperScissors": ("exploitability",),
}
PROGRESS_EPISODES = 200  # per seed, after every chunk of training


def _name(trainer: Trainer) -> str:
    return jaxenvs.spec(trainer.config.env_id).name


def progress_metrics(trainer: Trainer, params, key=None, num_episodes: int = PROGRESS_EPISODES) -> dict:
    """The metrics that measure progress in the trainer's environment (:data:`PROGRESS`;
    ``mean_return`` elsewhere) for params with a leading seed axis: ``{name: [value per seed]}``."""
    key = jax.random.key(54321) if key is None else key
    per_seed = evaluate(trainer, params, key, num_episodes=num_episodes)["seeds"]
    names = PROGRESS.get(_name(trainer), ("mean_return",))
    return {n: [float(m[n]) for m in per_seed] for n in names}


def format_progress(progress: dict) -> str:
    """``success_rate 0.93 | length_ratio 1.21`` (mean over seeds)."""
    return " | ".join(f"{k} {np.mean(v):.3g}" for k, v in progress.items() if k != "env_steps")


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return "/".join(f"{x:.3f}" for x in v)
    return str(v)


def format_table(result: dict) -> str:
    """A readable report of :func:`evaluate`'s result: one column per seed, each metric's
    meaning, the solved criterion and the verdict."""
    seeds = result["seeds"]
    names = [k for k in seeds[0] if k != "solved"]
    head = ["metric"] + [f"seed {i}" for i in range(len(seeds))] + ["meaning"]
    rows = [[k] + [_cell(m[k]) for m in seeds] + [MEANINGS.get(k, "")] for k in names]
    rows.append(["solved"] + [_cell(m["solved"]) for m in seeds] + [""])
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head) - 1)]
    lines = [
        f"evaluation: {result['env_id']}, {result.get('num_episodes', NUM_EPISODES)} episodes per seed, greedy policy"
        f" ({len(seeds)} seed{'s' if len(seeds) != 1 else ''})",
        f"solved when: {result.get('solved_when') or 'no criterion for this environment'}",
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in [head] + rows]
    if result["solved"] is None:
        verdict = "no verdict (no criterion for this environment)"
    elif result["solved"]:
        verdict = "SOLVED" + (" (every seed)" if len(seeds) > 1 else "")
    else:
        failed = [str(i) for i, m in enumerate(seeds) if not m["solved"]]
        verdict = f"NOT SOLVED (seed{'s' if len(failed) > 1 else ''} {', '.join(failed)} below the bar)"
    lines.append(f"verdict: {verdict}")
    return "\n".join(line.rstrip() for line in lines)


def evaluate_params(trainer: Trainer, params, key=None, num_episodes: int = NUM_EPISODES) -> dict:
    """Metrics of ONE set of network params (no seed axis) on the trainer's environment."""
    key = jax.random.key(12345) if key is None else key
    return EVALUATORS.get(_name(trainer), evaluate_generic)(trainer, params, key, num_episodes=num_episodes)


def evaluate(trainer: Trainer, params, key=None, num_episodes: int = NUM_EPISODES) -> dict:
    """Evaluate params with a leading seed axis: ``{"env_id", "num_episodes", "solved_when",
    "seeds": [metrics per seed], "solved": all seeds solved (None: no criterion)}``."""
    num_seeds = jax.tree.leaves(params)[0].shape[0]
    per_seed = [
        evaluate_params(trainer, jax.tree.map(lambda x: x[i], params), key, num_episodes) for i in range(num_seeds)
    ]
    flags = [m["solved"] for m in per_seed]
    solved = None if any(f is None for f in flags) else all(flags)
    return {
        "env_id": trainer.config.env_id,
        "num_episodes": num_episodes,
        "solved_when": SOLVED_WHEN.get(_name(trainer)),
        "seeds": per_seed,
        "solved": solved,
    }


def main(argv=None) -> int:
    """Exit status: 0 solved (or no criterion), 1 evaluated but not solved, 2 usage error."""
    parser = argparse.ArgumentParser(
        prog="python -m train.evaluate", description=__doc__.split("\n\n")[0],
        epilog="exit status: 0 solved (or no criterion), 1 evaluated but not solved, 2 usage error",
    )
    parser.add_argument("run_dir", help="a run directory written by `python -m train` (holds checkpoint.msgpack)")
    parser.add_argument("--seed", type=int, default=12345, help="PRNG seed of the evaluation episodes (default: 12345)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON (for machines) instead of a table")
    args = parser.parse_args(argv)
    if not 0 <= args.seed < 2**63:
        parser.error(f"--seed {args.seed}: must be an integer in [0, {2**63 - 1}]")
    from .__main__ import enable_compilation_cache
    from .checkpoint import load_run

    enable_compilation_cache()
    try:
        trainer, runner, _ = load_run(args.run_dir)
    except (ValueError, TypeError, KeyError, OSError) as e:
        parser.error(str(e))  # not a run directory, a corrupt checkpoint, a config that disagrees: exit 2
    result = evaluate(trainer, runner.params, jax.random.key(args.seed))
    print(json.dumps(result, indent=2) if args.json else format_table(result))
    return 0 if result["solved"] in (True, None) else 1


if __name__ == "__main__":
    sys.exit(main())
