"""Learning curves and policy GIFs of a run (host side; matplotlib with the Agg backend)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import jax
import numpy as np

import jaxenvs
from jaxenvs.rendering.io import render_frames, save_gif
from jaxenvs.rollout import rollout

__all__ = ["plot_learning_curve", "policy_gif"]


def _nan_fill_forward(x: np.ndarray) -> np.ndarray:
    """Carry the last finite value forward along axis 0 (updates in which no episode ended)."""
    x = np.array(x, np.float64)
    for i in range(1, len(x)):
        x[i] = np.where(np.isfinite(x[i]), x[i], x[i - 1])
    return x


def plot_learning_curve(env_steps, returns, lengths, path: str | os.PathLike, title: str = "") -> Path:
    """Save a two-panel figure: mean episodic return and episode length against env steps.

    ``returns``/``lengths`` are float[num_updates, num_seeds] (NaN where no episode ended); the
    line is the mean over seeds, the band the min-max spread over seeds.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, values, label in zip(axes, (returns, lengths), ("mean episodic return", "mean episode length")):
        v = _nan_fill_forward(values)
        with warnings.catch_warnings():  # updates before any episode ended are all-NaN: left blank
            warnings.simplefilter("ignore", RuntimeWarning)
            mean, low, high = np.nanmean(v, axis=1), np.nanmin(v, axis=1), np.nanmax(v, axis=1)
        ax.plot(env_steps, mean, lw=1.5)
        ax.fill_between(env_steps, low, high, alpha=0.25, lw=0)
        ax.set_xlabel("env steps (per seed)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{title} ({np.shape(returns)[1]} seeds: mean, min-max band)")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def policy_gif(trainer, params, path: str | os.PathLike, key, num_episodes: int = 3, max_frames: int = 100) -> Path | None:
    """Render ``num_episodes`` greedy episodes of ONE set of params into a GIF at ``path``.

    Each episode is a jitted rollout without auto-reset; its frames run from the initial state to
    the state the episode ended in, at most ``max_frames`` frames in all. Returns None when the
    environment has no ``render``.
    """
    cfg = trainer.config
    env = jaxenvs.make(cfg.env_id, autoreset=False, **cfg.env_kwargs)
    steps = min(jaxenvs.spec(cfg.env_id).max_episode_steps or 1, max_frames)

    def policy(key, obs):
        return trainer.act(params, jax.tree.map(lambda x: x[None], obs))[0]

    states = []
    for k in jax.random.split(key, num_episodes):
        traj = rollout(env, k, policy, steps)
        done = np.asarray(traj.terminated | traj.truncated)
        end = int(done.argmax()) if done.any() else steps - 1
        # the states before each action up to the episode's last, then the state it led to
        after_end = traj.last_state if end == steps - 1 else jax.tree.map(lambda x: x[end + 1], traj.state)
        ep = jax.tree.map(
            lambda xs, last: np.concatenate([np.asarray(xs)[: end + 1], np.asarray(last)[None]]), traj.state, after_end
        )
        states.append(ep)
    stacked = jax.tree.map(lambda *xs: np.concatenate(xs)[:max_frames], *states)
    try:
        frames = render_frames(env, stacked)
    except NotImplementedError:
        return None
    return save_gif(frames, path, fps=env.render_fps)
