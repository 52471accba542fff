"""Curricula over an environment's levels, inside the one compiled training program.

A *level* is one value of the env's params (`jaxenvs.levels`); a curriculum decides which level
each of the ``num_envs`` environments plays. The config's ``curriculum`` picks one:

* ``none`` (the default): every env plays ``env.default_params``. The trainer then has no
  curriculum at all (``trainer.curriculum is None``): the runner, the rollout and the update are
  the very program they were before curricula existed (``tests/test_curricula.py`` compares the
  lowered text).
* ``dr``, domain randomisation: every env draws a fresh level from the env's `ParamSpace`
  (``env.param_space()``, `jaxenvs.levels.param_space`) at reset and at every auto-reset.
* ``plr``, prioritised level replay (Jiang et al. 2021, "robust" PLR as JaxUED runs it): a buffer
  of ``plr_buffer_size`` levels with a score and a last-played update each lives in the carry. At
  the start of every update, with probability ``plr_replay_prob`` (once the buffer holds
  ``plr_min_fill`` of its size) the whole batch replays levels drawn from the buffer, else it plays
  fresh levels from the param space. Within the update's rollout an env that finishes restarts on
  its own level. After the rollout each env's level gets a score (``plr_score``):

  - ``pvl``, positive value loss: the mean over the rollout of ``max(advantage, 0)`` (GAE);
  - ``maxmc``: the mean over the rollout of ``max_t target_t - V(s_t)`` (the best value target
    seen on the level minus each value estimate);
  - ``regret``: the exact regret ``optimal_return(level) - mean return`` of the episodes the
    rollout completed on the level (0 completed: the whole optimal return), for an env that
    knows its optimum (a method ``optimal_return(params, max_episode_steps)`` on the unwrapped
    env, as `jaxenvs.envs.maze.Maze` has);
  - ``learnability``: ``p * (1 - p)`` with ``p`` the fraction of the rollout's episodes on the level
    that were solved (positive return); 0 when none completed.

  Replayed levels get their new score and their staleness reset. Fresh levels are inserted one by
  one: a level already in the buffer (every leaf equal) has its entry updated; otherwise it takes
  an empty slot, or replaces the lowest-scored entry when its score is higher. The replay
  distribution is ``(1 - plr_staleness) * P_score + plr_staleness * P_staleness`` over the filled
  slots: ``P_score`` by rank (``h_i = 1 / rank_i``, ``P ∝ h_i ** (1 / plr_temperature)``) or
  uniform over the ``plr_topk`` best (``plr_prioritization="topk"``); ``P_staleness ∝ update -
  last_played``.
* ``accel`` (Parker-Holder et al. 2022): PLR, and every replay update is followed by an update on
  the replayed levels after one `ParamSpace.mutate` edit each (a maze: one wall added or removed),
  which are then inserted like fresh levels.

Everything a curriculum keeps (the env batch's levels, the buffer, its clock) is part of the
runner's ``env_state`` (`CurriculumState`): it is vmapped over seeds with the rest of the runner,
written to the checkpoint and resumed with it. A curriculum other than ``none`` needs a
single-agent env with a declared param space; anything else is refused when the trainer is built.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

import jaxenvs
from jaxenvs import _backend, prng
from jaxenvs.levels import ParamSpaceError, level_hashes, num_levels, overlap, param_space

__all__ = [
    "CURRICULA", "SCORES", "PRIORITIZATIONS", "Curriculum", "CurriculumState", "LevelBuffer", "make_curriculum",
    "replay_probs", "insert_levels", "trained_levels", "check_disjoint", "HeldOutOverlap",
]

CURRICULA = ("none", "dr", "plr", "accel")
# a level's scores (``plr_score``), each with the meaning ``--help`` gives it: `Curriculum.scores` computes them
SCORES = {
    "pvl": "positive value loss",
    "maxmc": "the best value target seen on the level minus each value estimate",
    "regret": "exact; envs with optimal_return, e.g. Maze-v0",
    "learnability": "p(1-p), p the solved fraction of its episodes",
}
PRIORITIZATIONS = ("rank", "topk")


class HeldOutOverlap(ValueError):
    """A held-out set that shares levels with the levels a run trained on."""


@struct.dataclass
class LevelBuffer:
    """PLR's level buffer of ``K`` slots: ``levels`` (params, leading axis ``K``), ``scores``
    float32[K], ``last_played`` int32[K] (the curriculum update that last scored the slot),
    ``filled`` bool[K]."""

    levels: Any
    scores: jax.Array
    last_played: jax.Array
    filled: jax.Array


@struct.dataclass
class CurriculumState:
    """The trainer's ``env_state`` under a curriculum: the batch of env states, the level (params,
    leading ``num_envs`` axis) each env plays, and for ``plr``/``accel`` the buffer, the buffer
    slots the batch replays (``replayed``: whether it does), ACCEL's mutated levels for the next
    update (``mutate_next``: whether they are due), the curriculum's update count and the last
    update's curriculum metrics."""

    state: Any
    levels: Any
    buffer: Any = None
    slots: Any = None
    replayed: Any = None
    pending: Any = None
    mutate_next: Any = None
    clock: Any = None
    metrics: Any = None


def replay_probs(buffer: LevelBuffer, clock, prioritization: str, temperature: float, staleness: float,
                 topk: int = 1) -> jax.Array:
    """float32[K]: PLR's replay distribution over the buffer's slots (0 on empty slots): see the
    module docstring. Ranks break ties by slot index (the lower slot ranks first)."""
    k = buffer.scores.shape[0]
    filled = buffer.filled
    n = jnp.maximum(filled.sum(), 1)
    key = jnp.where(filled, buffer.scores, -jnp.inf)
    order = jnp.argsort(-key, stable=True)  # best first; empty slots last
    rank = jnp.zeros((k,), jnp.int32).at[order].set(jnp.arange(1, k + 1, dtype=jnp.int32))
    if prioritization == "rank":
        w = jnp.where(filled, (1.0 / rank.astype(jnp.float32)) ** (1.0 / temperature), 0.0)
    else:
        w = jnp.where(filled & (rank <= topk), 1.0, 0.0)
    p_score = w / jnp.maximum(w.sum(), 1e-30)
    age = jnp.where(filled, (clock - buffer.last_played).astype(jnp.float32), 0.0)
    uniform = jnp.where(filled, 1.0 / n, 0.0)
    p_stale = jnp.where(age.sum() > 0, age / jnp.maximum(age.sum(), 1e-30), uniform)
    return ((1.0 - staleness) * p_score + staleness * p_stale).astype(jnp.float32)


def _same_level(levels, level) -> jax.Array:
    """bool[K]: which of the batch ``levels`` equal ``level`` in every leaf."""
    eq = [jnp.all((a == b[None]).reshape(a.shape[0], -1), axis=1) for a, b in zip(jax.tree.leaves(levels), jax.tree.leaves(level))]
    return jnp.stack(eq).all(axis=0)


def insert_levels(buffer: LevelBuffer, levels, scores, clock) -> LevelBuffer:
    """``buffer`` after inserting each of ``levels`` (leading axis n) with its score, in order: a
    level already held (every leaf equal) updates that slot's score and last-played update; a new
    one takes the first empty slot, else replaces the lowest-scored slot (the lowest index among
    ties) when its score is higher."""

    def one(buf, item):
        level, score = item
        same = _same_level(buf.levels, level) & buf.filled
        held = same.any()
        lowest = jnp.argmin(jnp.where(buf.filled, buf.scores, -jnp.inf))  # an empty slot first
        slot = jnp.where(held, jnp.argmax(same), lowest)
        write = held | ~buf.filled[slot] | (score > buf.scores[slot])
        put = lambda full, new: full.at[slot].set(jnp.where(write, new, full[slot]))  # noqa: E731
        return LevelBuffer(
            levels=jax.tree.map(put, buf.levels, level),
            scores=put(buf.scores, score.astype(jnp.float32)),
            last_played=put(buf.last_played, jnp.asarray(clock, jnp.int32)),
            filled=put(buf.filled, jnp.ones((), bool)),
        ), None

    return jax.lax.scan(one, buffer, (levels, scores))[0]


def _where_env(mask, new, old):
    return jax.tree.map(lambda a, b: jnp.where(mask.reshape((-1,) + (1,) * (a.ndim - 1)), a, b), new, old)


class Curriculum:
    """A curriculum of a trainer (see the module docstring); built by `make_curriculum`."""

    def __init__(self, config, env):
        self.name = config.curriculum
        self.config = config
        inner = env.unwrapped
        try:
            self.space = param_space(env)
        except ParamSpaceError as e:
            raise ValueError(f"curriculum {self.name!r} draws levels from the env's param space: {e}") from None
        if env.multi_agent:
            raise ValueError(f"curriculum {self.name!r} trains single-agent envs; {config.env_id} has {env.num_agents} agents")
        self.num_envs = config.num_envs
        self.max_episode_steps = getattr(getattr(env, "spec", None), "max_episode_steps", None) or config.num_steps
        self.optimal_return = getattr(inner, "optimal_return", None)
        if self.name in ("plr", "accel"):
            if config.plr_score == "regret" and not callable(self.optimal_return):
                raise ValueError(
                    f"plr_score 'regret' needs an env that knows its optimum (a method optimal_return(params, max_episode_steps) "
                    f"on {type(inner).__name__}); use one of {', '.join(n for n in SCORES if n != 'regret')}"
                )
            if config.plr_prioritization == "topk" and config.plr_topk > config.plr_buffer_size:
                raise ValueError(f"plr_topk = {config.plr_topk} exceeds plr_buffer_size = {config.plr_buffer_size}")
        self.min_fill = max(1, math.ceil(config.plr_min_fill * config.plr_buffer_size))

    @property
    def replays(self) -> bool:
        return self.name in ("plr", "accel")

    # ---- the env batch ------------------------------------------------------------------------
    def _levels(self, keys):
        return jax.vmap(self.space.sample)(keys)

    def reset(self, trainer, keys) -> tuple[Any, CurriculumState]:
        """``(obs, CurriculumState)`` of ``num_envs`` envs reset on fresh levels (one key each)."""
        k_level = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
        levels = self._levels(k_level)
        obs, state = jax.vmap(trainer.env.reset)(keys, levels)
        cs = CurriculumState(state=state, levels=levels, clock=jnp.zeros((), jnp.int32))
        if self.replays:
            cfg = self.config
            size = cfg.plr_buffer_size
            template = jax.tree.map(lambda x: jnp.zeros((size,) + x.shape[1:], x.dtype), levels)
            cs = cs.replace(
                buffer=LevelBuffer(levels=template, scores=jnp.zeros((size,), jnp.float32),
                                   last_played=jnp.zeros((size,), jnp.int32), filled=jnp.zeros((size,), bool)),
                slots=jnp.zeros((self.num_envs,), jnp.int32), replayed=jnp.zeros((), bool),
                pending=levels, mutate_next=jnp.zeros((), bool),
                metrics=self._zero_metrics(),
            )
        return obs, cs

    def step(self, trainer, keys, cs: CurriculumState, actions):
        """Step every env on its own level; under ``dr`` an env that finishes restarts on a fresh
        level (the env's own auto-reset restarted it on the old one, and it is reset again here)."""
        out = jax.vmap(trainer.env.step)(keys, cs.state, actions, cs.levels)
        obs, state, reward, terminated, truncated, info = out
        levels = cs.levels
        if self.name == "dr":
            done = terminated | truncated

            def redraw(args):
                obs, state, levels = args
                k_level, k_reset = prng.split(jax.random.fold_in(keys[0], 2))
                fresh = _where_env(done, self._levels(prng.split(k_level, self.num_envs)), levels)
                reset_obs, reset_state = jax.vmap(trainer.env.reset)(prng.split(k_reset, self.num_envs), fresh)
                return _where_env(done, reset_obs, obs), _where_env(done, reset_state, state), fresh

            # a step in which no env finishes draws no level (off a CPU: both branches and a select)
            obs, state, levels = _backend.cond(done.any(), redraw, lambda args: args, (obs, state, levels))
        return obs, cs.replace(state=state, levels=levels), reward, terminated, truncated, info

    # ---- PLR / ACCEL, once per update -----------------------------------------------------------
    def _zero_metrics(self) -> dict:
        z = jnp.zeros((), jnp.float32)
        return dict(curriculum_replay=z, curriculum_mutation=z, curriculum_level_score=z,
                    curriculum_buffer_filled=z, curriculum_buffer_score=z)

    def replay_probs(self, buffer, clock):
        cfg = self.config
        return replay_probs(buffer, clock, cfg.plr_prioritization, cfg.plr_temperature, cfg.plr_staleness, cfg.plr_topk)

    def begin(self, trainer, runner):
        """The update's levels (replayed, fresh, or ACCEL's mutations) set and every env reset on
        its level; the runner's key advances."""
        if not self.replays:
            return runner
        cs = runner.env_state
        key, k_coin, k_pick, k_new, k_reset = prng.split(runner.key, 5)
        buf = cs.buffer
        can_replay = buf.filled.sum() >= self.min_fill
        replay = can_replay & (jax.random.uniform(k_coin) < self.config.plr_replay_prob)
        mutate = cs.mutate_next if self.name == "accel" else jnp.zeros((), bool)
        replay = replay & ~mutate
        slots = jax.random.choice(k_pick, buf.scores.shape[0], (self.num_envs,), p=self.replay_probs(buf, cs.clock))
        replayed_levels = jax.tree.map(lambda x: x[slots], buf.levels)
        fresh = self._levels(prng.split(k_new, self.num_envs))
        every = jnp.ones((self.num_envs,), bool)
        levels = _where_env(every & replay, replayed_levels, _where_env(every & mutate, cs.pending, fresh))
        obs, state = jax.vmap(trainer.env.reset)(prng.split(k_reset, self.num_envs), levels)
        cs = cs.replace(state=state, levels=levels, slots=slots.astype(jnp.int32), replayed=replay,
                        mutate_next=jnp.zeros((), bool),
                        metrics=dict(cs.metrics, curriculum_replay=replay.astype(jnp.float32),
                                     curriculum_mutation=mutate.astype(jnp.float32)))
        return runner.replace(env_state=cs, obs=obs, key=key)

    def scores(self, trainer, runner, traj, stats, hp) -> jax.Array:
        """float32[num_envs]: each env's level score from the update's rollout (``plr_score``)."""
        done, ep_return = stats[0], stats[1]
        name = self.config.plr_score
        if name in ("pvl", "maxmc"):
            next_values = trainer._next_values(runner.params, traj)
            adv, targets = trainer.advantages(traj, next_values, hp)
            if name == "pvl":
                return jnp.maximum(adv, 0.0).mean(axis=0)
            return (targets.max(axis=0)[None] - traj.value).mean(axis=0)
        count = done.sum(axis=0).astype(jnp.float32)
        if name == "regret":
            mean_return = jnp.where(done, ep_return, 0.0).sum(axis=0) / jnp.maximum(count, 1.0)
            optimum = jax.vmap(lambda lv: self.optimal_return(lv, self.max_episode_steps))(runner.env_state.levels)
            return (optimum - mean_return).astype(jnp.float32)
        p = (done & (ep_return > 0)).sum(axis=0).astype(jnp.float32) / jnp.maximum(count, 1.0)
        return jnp.where(count > 0, p * (1.0 - p), 0.0).astype(jnp.float32)

    def end(self, trainer, runner, traj, stats, hp):
        """The buffer after the update's rollout: replayed slots rescored, fresh or mutated levels
        inserted; under ACCEL a replay schedules its levels' mutations for the next update."""
        if not self.replays:
            return runner
        cs = runner.env_state
        score = self.scores(trainer, runner, traj, stats, hp)
        clock = cs.clock + 1
        buf = cs.buffer

        def rescore(buf):
            return buf.replace(scores=buf.scores.at[cs.slots].set(score), last_played=buf.last_played.at[cs.slots].set(clock))

        buf = _backend.cond(cs.replayed, rescore, lambda b: insert_levels(b, cs.levels, score, clock), buf)
        cs = cs.replace(buffer=buf, clock=clock)
        key = runner.key
        if self.name == "accel":
            key, k_mut = prng.split(key)
            mutated = jax.vmap(self.space.mutate)(prng.split(k_mut, self.num_envs), cs.levels)
            cs = cs.replace(pending=mutated, mutate_next=cs.replayed)
        filled = buf.filled.sum()
        cs = cs.replace(metrics=dict(
            cs.metrics, curriculum_level_score=score.mean(),
            curriculum_buffer_filled=filled.astype(jnp.float32) / buf.filled.shape[0],
            curriculum_buffer_score=jnp.where(buf.filled, buf.scores, 0.0).sum() / jnp.maximum(filled, 1).astype(jnp.float32),
        ))
        return runner.replace(env_state=cs, key=key)

    def metrics(self, runner) -> dict:
        """The update's curriculum metrics (``plr``/``accel``; none for ``dr``)."""
        return dict(runner.env_state.metrics) if self.replays else {}


def make_curriculum(config, env) -> Curriculum | None:
    """The curriculum ``config.curriculum`` names for ``env`` (None for ``none``: the plain trainer)."""
    name = getattr(config, "curriculum", "none")
    if name not in CURRICULA:
        raise ValueError(f"unknown curriculum {name!r}; available: {', '.join(CURRICULA)}")
    return None if name == "none" else Curriculum(config, env)


# ---- what a run trained on, and held-out sets -------------------------------------------------
def trained_levels(runner) -> Any | None:
    """The levels a runner holds (host arrays, one batch): every seed's current env levels and its
    PLR buffer's filled entries; None for a run without a curriculum."""
    cs = runner.env_state
    if not isinstance(cs, CurriculumState):
        return None
    seeds = np.ndim(cs.clock)  # the clock is one scalar per seed: its rank counts the seed axes
    rows = lambda x: np.asarray(x).reshape((-1,) + np.shape(x)[seeds + 1:])  # noqa: E731
    batches = [jax.tree.map(rows, cs.levels)]
    if cs.buffer is not None:
        filled = np.asarray(cs.buffer.filled).reshape(-1)
        batches.append(jax.tree.map(lambda x: rows(x)[filled], cs.buffer.levels))
    return jax.tree.map(lambda *xs: np.concatenate(xs), *batches)


def check_disjoint(heldout, trained, what: str = "held-out set") -> int:
    """Raise `HeldOutOverlap` when ``heldout`` and ``trained`` (level batches) share a level
    (by `jaxenvs.levels.level_hash`); returns the number of distinct trained levels checked."""
    if trained is None:
        return 0
    shared = overlap(heldout, trained)
    if shared:
        raise HeldOutOverlap(
            f"the {what} shares {len(shared)} level(s) with the levels the run trained on (first: {shared[0][:16]}...); "
            "held-out results would not measure generalisation"
        )
    return len(set(level_hashes(trained)))


def heldout_levels_of(env) -> Any | None:
    """The env's fixed held-out set (a batch of levels): what its ``heldout_levels()`` method
    returns (`jaxenvs.envs.maze.Maze` declares 500 generated and the hand-made hard mazes), else None."""
    inner = env.unwrapped
    fn = getattr(inner, "heldout_levels", None)
    return fn() if callable(fn) else None


HELDOUT_EPISODES_PER_LEVEL = 4
CVAR_FRACTION = 0.1


def _heldout_program(trainer, num_levels: int, episodes_per_level: int):
    """``run(params, key, levels) -> (returns, solved)`` float32[L, k], bool[L, k]: ``k`` episodes
    of the sampled policy on each held-out level (no auto-reset; the spec's time limit ends them)."""
    config = trainer.config
    env = jaxenvs.make(config.env_id, autoreset=False, **config.env_kwargs)
    spec = jaxenvs.spec(config.env_id)
    horizon = spec.max_episode_steps or config.num_steps
    n = num_levels * episodes_per_level

    @jax.jit
    def run(params, key, levels):
        rep = jax.tree.map(lambda x: jnp.repeat(jnp.asarray(x), episodes_per_level, axis=0), levels)
        k_reset, k_run = prng.split(key)
        obs, state = jax.vmap(env.reset)(prng.split(k_reset, n), rep)

        def step(carry, k):
            obs, state, ret, alive, solved = carry
            k_act, k_env = prng.split(k)
            dist, _ = trainer.policy(params, trainer.flat_obs(obs))
            action = trainer.to_env_action(dist.sample(k_act))
            obs, state, reward, term, trunc, _ = jax.vmap(env.step)(prng.split(k_env, n), state, action, rep)
            ret = ret + jnp.where(alive, reward, 0.0)
            solved = solved | (alive & term & (ret > 0))
            return (obs, state, ret, alive & ~(term | trunc), solved), None

        init = (obs, state, jnp.zeros((n,), jnp.float32), jnp.ones((n,), bool), jnp.zeros((n,), bool))
        (_, _, ret, _, solved), _ = jax.lax.scan(step, init, prng.split(k_run, horizon))
        return ret.reshape(num_levels, episodes_per_level), solved.reshape(num_levels, episodes_per_level)

    return run, env, horizon


def heldout_metrics(trainer, params, key, levels=None, episodes_per_level: int = HELDOUT_EPISODES_PER_LEVEL) -> dict:
    """Held-out metrics of ONE set of network params: ``heldout_success_rate`` (mean over the
    solvable levels (all, for an env without ``optimal_return``; else those of a positive optimal
    return, counted in ``heldout_solvable``) of the fraction of solved episodes: ended by
    termination with a positive return),
    ``heldout_mean_return``, ``heldout_cvar10_solve_rate`` (the mean solve rate of the worst 10% of
    solvable levels, at least one), and, for an env with ``optimal_return``, ``heldout_mean_regret``
    (optimal return minus the level's mean return, averaged over levels); ``episodes_per_level``
    episodes of the sampled policy on each level. ``levels``: the env's own held-out set by default."""
    levels = heldout_levels_of(trainer.env) if levels is None else levels
    if levels is None:
        raise ValueError(f"{trainer.config.env_id} declares no held-out levels (a heldout_levels() method on the env)")
    count = num_levels(levels)
    cache = trainer.__dict__.setdefault("_heldout_programs", {})
    if (count, episodes_per_level) not in cache:
        cache[(count, episodes_per_level)] = _heldout_program(trainer, count, episodes_per_level)
    run, env, horizon = cache[(count, episodes_per_level)]
    ret, solved = jax.device_get(run(params, key, levels))
    inner = env.unwrapped
    optimum = None
    solvable = np.ones((count,), bool)
    if callable(getattr(inner, "optimal_return", None)):
        optimum = np.asarray(jax.jit(jax.vmap(lambda lv: inner.optimal_return(lv, horizon)))(levels))
        solvable = optimum > 0  # a maze whose goal cannot be reached within the time limit counts in no solve rate
    if not solvable.any():
        raise ValueError(f"{trainer.config.env_id}: none of the {count} held-out levels can be solved")
    per_level = solved.mean(axis=1)[solvable]
    worst = max(1, math.ceil(CVAR_FRACTION * per_level.size))
    out = dict(
        heldout_levels=count,
        heldout_solvable=int(solvable.sum()),
        heldout_success_rate=float(per_level.mean()),
        heldout_mean_return=float(ret.mean()),
        heldout_cvar10_solve_rate=float(np.sort(per_level)[:worst].mean()),
    )
    if optimum is not None:
        out["heldout_mean_regret"] = float((optimum - ret.mean(axis=1)).mean())
    return out


def heldout_check(trainer, runner) -> dict:
    """For evaluation.json: ``{"heldout_disjoint_from": n}``, the number of distinct levels the run
    trained on (env levels and PLR buffer, every seed) that the env's held-out set was checked to
    share none of (`check_disjoint` raises otherwise); empty without a held-out set or a curriculum."""
    heldout = heldout_levels_of(trainer.env)
    if heldout is None or getattr(trainer, "curriculum", None) is None:  # before any fetch: a run over a mesh
        return {}  # has none (curricula refuse one), and its arrays span other processes' devices
    trained = trained_levels(jax.device_get(runner))
    if trained is None:
        return {}
    return {"heldout_disjoint_from": check_disjoint(heldout, trained)}
