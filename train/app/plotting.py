"""Learning curves and policy GIFs of a run (host side; matplotlib with the Agg backend)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import jax
import numpy as np

import jaxenvs
from jaxenvs.rendering.io import save_gif
from jaxenvs.rollout import rollout
from jaxenvs.rendering.legend import add_captions, add_legend, status_captions
from .curve_drawing import draw_learning_curve, log_axis, nan_fill_forward
from ..xla import AheadOfTime
from ..tuned import entry
from ..checkpoint import atomic_write
from ..policy import make_policy

__all__ = ["plot_learning_curve", "curve_figure", "curve_panels", "policy_gif", "gif_frames"]


def curve_panels(env_steps, returns, lengths, progress=None, env_id: str | None = None, training=None) -> list[dict]:
    """The data of each learning-curve panel: ``{"label", "x", "mean", "low", "high"}`` (the
    progress measures of the environment first, from the evaluations after every chunk, then its
    per-update ``training`` metrics, then the mean episodic return and length of the training
    episodes); ``"log"``: whether the panel's y axis is logarithmic (`train.app.curve_drawing.log_axis`)."""
    panels = []
    for name, x, values, unit_range, _ in _series(env_steps, returns, lengths, progress, env_id, training)[0]:
        v = nan_fill_forward(values)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            panels.append(dict(label=name, x=np.asarray(x), mean=np.nanmean(v, axis=1), low=np.nanmin(v, axis=1),
                               high=np.nanmax(v, axis=1), values=v, log=log_axis(values, unit_range)))
    return panels


def _label(name: str, env_id: str | None) -> str:
    """The plot axis of metric ``name`` (its `train.tuned.Metric`'s label, else its name with spaces)."""
    metric = entry(env_id).metrics.get(name) if env_id else None
    return (metric.label if metric is not None and metric.label else None) or name.replace("_", " ")


def _unit_range(name: str, env_id: str | None) -> bool:
    metric = entry(env_id).metrics.get(name) if env_id else None
    return bool(metric is not None and metric.unit_range)


def solved_bars(env_id: str | None) -> dict[str, tuple[str, float]]:
    """``{metric: (op, threshold)}``: the clauses ``metric <= x`` / ``metric >= x`` (also ``<``, ``>``,
    ``=``) of the environment's solved criterion (its `train.tuned` entry's ``solved_when``), the
    bars drawn on its panels."""
    import re

    text = entry(env_id).solved_when if env_id else None
    out = {}
    for name, op, value in re.findall(r"([A-Za-z_][A-Za-z_0-9]*)\s*(<=|>=|<|>|=)\s*([-+]?\d*\.?\d+(?:e[-+]?\d+)?)",
                                       text or ""):
        out[name] = (op, float(value))
    return out


def _constant(values) -> float | None:
    """The one value every finite entry of ``values`` has, or None (also when none is finite)."""
    v = np.asarray(values, np.float64)
    v = v[np.isfinite(v)]
    return float(v[0]) if v.size and np.all(v == v[0]) else None


def _series(env_steps, returns, lengths, progress, env_id=None, training=None):
    """``(label, x, float[points, seeds], unit range?)`` per panel, and notes on the training series left out
    (``training``: ``{metric: float[updates, seeds]}`` of the compiled update, e.g. a turn-based game's
    ``illegal_rate`` and win rates against random-legal play, drawn per update):
    with progress measures, a training series that is constant by construction (the return of
    zero-sum self-play, GridWorld's return of 1, one-step games' length of 1) says nothing; nor
    does a per-update series that never moves (a masked policy's illegal-move rate, 0 by
    construction): each is a note under the figure instead of a flat panel."""
    out, notes = [], []
    if progress:
        names = [k for k in progress[0] if k != "env_steps"]
        x = [row["env_steps"] for row in progress]
        for n in names:
            out.append((f"{_label(n, env_id)} (evaluation)", x, np.array([row[n] for row in progress], np.float64),
                        _unit_range(n, env_id), n))
    for n, values in (training or {}).items():
        values = np.asarray(values, np.float64)
        c = _constant(values) if values.size else None
        if c is not None:  # e.g. the illegal-move rate of a masked policy: 0 by construction
            notes.append(f"{_label(n, env_id).replace(' (training)', '')} of the training updates: {c:g} throughout (not shown)")
        elif values.size:
            out.append((_label(n, env_id), env_steps[: len(values)], values, _unit_range(n, env_id), n))
    for label, values in (("mean episodic return (training)", returns), ("mean episode length (training)", lengths)):
        c = _constant(values)
        if progress and c is not None:
            notes.append(f"{label.replace(' (training)', '')} of the training episodes: {c:g} throughout (not shown)")
        else:
            out.append((label, env_steps, values, False, None))
    return out, notes


def curve_figure(env_steps, returns, lengths, title: str = "", progress=None, env_id: str | None = None,
                 training: dict | None = None) -> dict:
    """What `plot_learning_curve` draws, as plain data (`train.app.curve_drawing`'s figure): its series,
    notes, solved bars, seed count, title and x range."""
    series, notes = _series(env_steps, returns, lengths, progress, env_id or title or None, training)
    return dict(
        series=[(label, np.asarray(x), np.asarray(values, np.float64), bool(unit_range), name)
                for label, x, values, unit_range, name in series],
        notes=notes,
        bars=solved_bars(env_id or title or None),
        num_seeds=int(np.shape(returns)[1]) if np.ndim(returns) == 2 else 1,
        title=title,
        xmax=float(np.max(env_steps)) * 1.03 if len(env_steps) else 1,
    )


def plot_learning_curve(env_steps, returns, lengths, path: str | os.PathLike, title: str = "", progress=None,
                        env_id: str | None = None, training: dict | None = None) -> Path:
    """Save the learning curve: one panel per progress measure of the environment (``progress``:
    rows ``{"env_steps": n, name: [value per seed]}`` from `train.grading.progress_metrics`; axis
    labels and ranges from ``env_id``'s entry in `train.tuned`, default ``title``),
    then the per-update metrics in ``training`` (``{name: float[num_updates, num_seeds]}``, the
    entry's ``curves``), then the mean episodic return and episode length of the training episodes,
    against env steps.

    ``returns``/``lengths`` are float[num_updates, num_seeds] (NaN where no episode ended); each
    line is the mean over seeds, with one labelled min-max band when there are several seeds.
    The file is written atomically. (`curve_figure` and `train.app.curve_drawing.draw_learning_curve`
    are its two halves: ``jaxenvs-train`` runs the second in a helper process.)
    """
    return draw_learning_curve(curve_figure(env_steps, returns, lengths, title, progress, env_id, training), path)



_GIF_FNS: dict = {}
_GIF_ENVS: dict = {}


def _gif_env(trainer):
    """The trainer's environment without auto-reset, one object per trainer: the rollouts' and the
    render's programs are cached per environment object, so a second GIF (the main job's, after its
    warm-up) compiles nothing."""
    if id(trainer) not in _GIF_ENVS:
        cfg = trainer.config
        _GIF_ENVS[id(trainer)] = (trainer, jaxenvs.make(cfg.env_id, autoreset=False, **cfg.env_kwargs))
    return _GIF_ENVS[id(trainer)][1]


def _gif_render(trainer, env, frames: int):
    """``render(states) -> uint8[frames, H, W, 3]`` of a flat batch of ``frames`` states: the
    env's ``render`` vmapped (`jaxenvs.rendering.render_frames`' program), one per trainer, kept in
    `AheadOfTime` like the rollouts."""
    cache_key = (id(trainer), "render", frames)
    if cache_key not in _GIF_FNS:
        params = env.default_params
        _GIF_FNS[cache_key] = (trainer, AheadOfTime(lambda states: jax.vmap(env.render, in_axes=(0, None))(states, params),
                                                     fast=True))
    return _GIF_FNS[cache_key][1]


def prefetch_matplotlib() -> None:
    """Import what `plot_learning_curve` draws with (matplotlib with its Agg backend, pyplot): the
    command starts this in a background thread, so the import overlaps the run instead of delaying
    the learning curve at its end."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401
    import matplotlib.ticker  # noqa: F401


def _gif_rollouts(trainer, env, steps: int, num_episodes: int):
    """Jitted ``(params, key) -> Trajectory`` (a leading episode axis): ``num_episodes`` greedy
    single-env episodes in one program (`jaxenvs.rollout.rollout` vmapped over
    ``jax.random.split(key, num_episodes)``, one key each), with
    params as an argument, so the program compiled for one set of params serves every other.
    In a multi-agent env every agent acts from its own row, among its legal actions (`train.policy`)."""
    cache_key = (id(trainer), steps, num_episodes)
    if cache_key not in _GIF_FNS:
        def run(params, key):
            keys = jax.random.split(key, num_episodes)

            def policy(key, obs):
                return trainer.act(params, jax.tree.map(lambda x: x[None], obs))[0]

            if trainer.env.multi_agent:
                agent = make_policy(trainer, params)

                def policy(key, obs):  # noqa: F811
                    return jax.vmap(agent)(jax.random.split(key, trainer.num_agents), obs)

            return jax.vmap(lambda k: rollout(env, k, policy, steps))(keys)

        # the trainer is kept so its id stays unique; the program runs once for a few milliseconds:
        # XLA's cheapest compile (the same frames, tested)
        _GIF_FNS[cache_key] = (trainer, AheadOfTime(run, fast=True))
    return _GIF_FNS[cache_key][1]


RENDER_BATCH = 16  # frames per call of the GIF's render program


def _gif_programs(trainer, num_episodes: int, max_frames: int):
    """``(env, steps, batch, rollouts, render)``: what `gif_frames` runs, with how many steps, and
    the frames the render program draws per call."""
    env = _gif_env(trainer)
    # an env without a time limit (the games) plays up to max_frames steps per episode, not one
    steps = min(jaxenvs.spec(trainer.config.env_id).max_episode_steps or max_frames, max_frames)
    # one render program whatever the episodes' lengths: a fixed batch of frames per call, as many
    # calls as the frames need (the last padded with its last state), so short episodes (GridWorld's
    # 3 take about 12 frames) are not drawn as the longest possible GIF
    batch = min(RENDER_BATCH, max_frames, num_episodes * (steps + 1))
    return env, steps, batch, _gif_rollouts(trainer, env, steps, num_episodes), _gif_render(trainer, env, batch)


def compile_gif_programs(trainer, params, key, num_episodes: int = 3, max_frames: int = 100) -> None:
    """Compile the programs `gif_frames` runs for params and a
    key of these shapes, without running them: a later `gif_frames` only runs them."""
    _, _, batch, rollouts, render = _gif_programs(trainer, num_episodes, max_frames)
    rollouts.compile(params, key)
    states = jax.eval_shape(rollouts.jitted, params, key).state  # [episodes, steps, ...]
    try:
        render.compile(jax.tree.map(lambda s: jax.ShapeDtypeStruct((batch,) + s.shape[2:], s.dtype), states))
    except NotImplementedError:  # no render: gif_frames returns None
        pass


def gif_frames(trainer, params, key, num_episodes: int = 3, max_frames: int = 100) -> np.ndarray | None:
    """The frames `policy_gif` writes (uint8[T, H, W, 3], legend and captions included), or None
    when the environment has no ``render``. The rollouts are one compiled program and the frames are
    rendered by another, `RENDER_BATCH` at a time (the last batch padded with the last state, then
    cut), so calling this once with any params of the same shapes compiles everything a later call
    needs (`compile_gif_programs` compiles them without running them)."""
    env, steps, batch, rollouts, render = _gif_programs(trainer, num_episodes, max_frames)
    traj = jax.device_get(rollouts(params, key))
    done = np.asarray(traj.terminated) | np.asarray(traj.truncated)  # [episodes, steps]
    states, endings = [], []
    for i in range(num_episodes):
        end = int(done[i].argmax()) if done[i].any() else steps - 1
        endings.append("reached its end (terminated)" if np.asarray(traj.terminated)[i, end] else
                       "cut by the time limit (truncated)" if np.asarray(traj.truncated)[i, end] else f"stopped after {steps} steps")
        # the states before each action up to the episode's last, then the state it led to
        after_end = jax.tree.map(lambda x: x[i], traj.last_state) if end == steps - 1 else \
            jax.tree.map(lambda x: x[i, end + 1], traj.state)
        states.append(jax.tree.map(lambda xs, last: np.concatenate([xs[i, : end + 1], last[None]]), traj.state, after_end))
    stacked = jax.tree.map(lambda *xs: np.concatenate(xs)[:max_frames], *states)
    count = int(np.shape(jax.tree.leaves(stacked)[0])[0])
    total = -(-count // batch) * batch
    padded = jax.tree.map(lambda x: np.concatenate([x, np.repeat(x[-1:], total - count, axis=0)]), stacked)
    try:
        frames = np.concatenate([np.asarray(render(jax.tree.map(lambda x: x[i:i + batch], padded)))
                                 for i in range(0, total, batch)])[:count]
    except NotImplementedError:
        return None

    frames = add_legend(env, frames)
    captions = status_captions(env, states)  # turn-based games: whose move, how each game ended
    if captions is None:  # the others: which episode and step (a new episode starts elsewhere)
        captions = _episode_captions([len(jax.tree.leaves(x)[0]) for x in states], endings)
    return add_captions(frames, captions[:max_frames])


def _episode_captions(lengths: list[int], endings: list[str]) -> list[str]:
    """One caption per frame: ``episode i of n: start`` on an episode's first frame (a new initial
    state: the agent and target may be anywhere), ``step t`` after, and how the episode ended on its
    last frame."""
    out = []
    for i, (length, ending) in enumerate(zip(lengths, endings), 1):
        for t in range(length):
            what = "start (a new initial state)" if t == 0 else f"step {t}" + (f": {ending}" if t == length - 1 else "")
            out.append(f"episode {i} of {len(lengths)}: {what}")
    return out


def policy_gif(trainer, params, path: str | os.PathLike, key, num_episodes: int = 3, max_frames: int = 100) -> Path | None:
    """Render ``num_episodes`` greedy episodes of ONE set of params into a GIF at ``path``.

    Each episode is a rollout without auto-reset (all of them one compiled program: `gif_frames`);
    its frames run from the initial state to the state the episode ended in, at most ``max_frames``
    frames in all. Environments that declare a ``legend`` (Lottery, Rock-Paper-Scissors) get it
    below each frame, as in ``jaxenvs play``. Returns None when the environment has no ``render``
    (nothing is written then).
    """
    frames = gif_frames(trainer, params, key, num_episodes, max_frames)
    if frames is None:
        return None

    env = _gif_env(trainer)
    with atomic_write(path) as tmp:
        save_gif(frames, tmp, fps=env.render_fps)
    return Path(path)
