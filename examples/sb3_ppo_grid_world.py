"""Train Stable-Baselines3's PPO on jaxenvs' GridWorld through the SB3 VecEnv adapter.

GridWorld (5 x 5) is stepped for all copies by one jitted, vmapped call (``SB3VecEnv``); the
episode limit is cut to ``MAX_EPISODE_STEPS`` steps so that a random walk often fails to reach
the target while the shortest path (at most 8 steps) always fits. The script prints the success
rate (= mean episode return: reward 1 on reaching the target, else 0) and the mean episode
length of the random policy and of the trained one::

    python examples/sb3_ppo_grid_world.py [total_timesteps]
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecMonitor

from jaxenvs.adapters.sb3 import SB3VecEnv

ENV_ID = "GridWorld-v0"
MAX_EPISODE_STEPS = 12
NUM_ENVS = 8


def make_venv(seed: int, num_envs: int = NUM_ENVS) -> SB3VecEnv:
    return SB3VecEnv(ENV_ID, num_envs, seed=seed, max_episode_steps=MAX_EPISODE_STEPS)


def evaluate(policy, venv, episodes_per_env: int) -> dict:
    """Success rate, mean return and mean length over the first ``episodes_per_env`` episodes of
    every copy (a fixed count per copy, so short episodes are not over-represented).

    ``policy(obs) -> actions`` maps a batch of observations to a batch of actions.
    """
    obs = venv.reset()
    n = venv.num_envs
    episodes = [[] for _ in range(n)]  # (return, length, success) per copy
    ep_return, ep_length = np.zeros(n), np.zeros(n, int)
    while min(len(e) for e in episodes) < episodes_per_env:
        obs, reward, done, infos = venv.step(policy(obs))
        ep_return += reward
        ep_length += 1
        for i in np.flatnonzero(done):
            episodes[i].append((ep_return[i], ep_length[i], not infos[i]["TimeLimit.truncated"]))
            ep_return[i], ep_length[i] = 0.0, 0
    data = np.array([ep for e in episodes for ep in e[:episodes_per_env]], dtype=float)
    return {
        "episodes": len(data),
        "mean_return": float(data[:, 0].mean()),
        "mean_length": float(data[:, 1].mean()),
        "success_rate": float(data[:, 2].mean()),
    }


def random_policy(seed: int, num_envs: int):
    rng = np.random.default_rng(seed)
    return lambda obs: rng.integers(0, 4, size=num_envs)


def train(total_timesteps: int, seed: int = 0) -> PPO:
    """PPO with a small MLP on 8 adapter copies; deterministic for a fixed seed on one thread."""
    torch.set_num_threads(1)
    venv = VecMonitor(make_venv(seed))
    model = PPO(
        "MultiInputPolicy",
        venv,
        n_steps=64,
        batch_size=128,
        n_epochs=4,
        learning_rate=1e-3,
        gamma=0.9,
        ent_coef=0.01,
        policy_kwargs={"net_arch": [64, 64]},
        seed=seed,
        device="cpu",
        verbose=0,
    )
    return model.learn(total_timesteps)


def main(total_timesteps: int = 12_000, seed: int = 0, episodes_per_env: int = 50) -> tuple[dict, dict]:
    before = evaluate(random_policy(seed + 1, NUM_ENVS), make_venv(seed + 1000), episodes_per_env)
    t0 = time.perf_counter()
    model = train(total_timesteps, seed)
    seconds = time.perf_counter() - t0
    after = evaluate(lambda obs: model.predict(obs, deterministic=True)[0], make_venv(seed + 1000), episodes_per_env)
    print(
        f"PPO on {ENV_ID} (max_episode_steps={MAX_EPISODE_STEPS}, {NUM_ENVS} envs): {total_timesteps} steps "
        f"in {seconds:.1f} s; {before['episodes']} evaluation episodes per policy"
    )
    print(f"{'policy':<8} {'success':>8} {'return':>8} {'length':>8}")
    for name, stats in (("random", before), ("PPO", after)):
        print(f"{name:<8} {stats['success_rate']:>8.3f} {stats['mean_return']:>8.3f} {stats['mean_length']:>8.2f}")
    return before, after


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 12_000)
