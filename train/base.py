"""What every on-policy algorithm here shares: the trainer base class (environment interaction,
batching, the rollout, the jitted ``init``/``run_updates``/``train``), GAE, episode metrics,
finiteness checks and PRNG-key handling. An algorithm (`train.ppo`, `train.trpo`) subclasses
`Trainer` and writes only its own parts: its runner state (``_init``), its update (``_update``),
and, where it differs, its environment and network (``make_env``, ``make_network``).

    trainer = make_trainer(get_config("GridWorld-v0"))              # train.trainers.make_trainer
    runner, metrics = trainer.train(jax.random.key(0))               # one jitted call
    runner, metrics = jax.vmap(trainer.train)(jax.random.split(key, 8))   # 8 seeds at once

Details every algorithm inherits:

* **Truncation is not termination.** The environment comes from ``jaxenvs.make`` (AutoReset and
  TimeLimit). Every step records ``final_obs = info["final_obs"]``, the observation the step led to
  *before* any auto-reset, so `gae` bootstraps a truncated episode from where it was cut and a
  terminated one from 0, and cuts the trace at every episode end.
* **Multi-agent environments** train one shared policy (self-play): the agent axis folds into the
  batch, so a batch row is one agent in one environment. Rewards are per agent; episode boundaries
  are shared.
* **Observations** of any space (Dict, Tuple, Discrete, ...) are flattened with
  `jaxenvs.spaces.flatten`; bounded dimensions are rescaled to [-1, 1].
* **The policy** is read in one place, `Trainer.policy` (observation rows -> action distribution
  and value): the rollout, the losses and `Trainer.act` all call it.
* **Who acts, and how returns are credited**, is the trainer's turn strategy, `Trainer.turns`
  (`train.turns`): every row at every step (`train.turns.EveryRow`), or, in turn-based games,
  masked self-play (`train.turns.SelfPlay`: legal-action masks, acting rows, `gae_decisions`,
  opponent rows, per-update matches), the option PPO takes. The rollout, the losses and the
  metrics call the strategy; they carry no branch of their own.
* **Traced hyperparameters**: the config's ``HPARAMS`` are arguments of the compiled program, so
  ``jax.vmap`` over them sweeps e.g. the learning rate in one call (`stack_hparams`).
* **Chunks**: ``run_updates`` runs any number of updates from a runner state; ``jaxenvs-train``
  calls it repeatedly (one compiled program) and prints progress between calls.
* **Metrics without sentinels**: ``episodes`` counts the episodes that ended in an update and
  ``episode_return``/``episode_length`` are their means (0 when none ended: read them with
  ``episodes``); every update also carries ``nonfinite`` (bool), True when a loss, a gradient or a
  new parameter of that update was NaN or infinite, for the caller to check between chunks. No NaN
  is ever made on purpose, so training runs under ``JAX_DEBUG_NANS=1``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

import jaxenvs
from jaxenvs import _backend, prng, spaces
from jaxenvs._traces import TraceCounter
from jaxenvs.core import is_prng_key
from jaxenvs.prng import key_on_host
from jaxenvs.sharding import constrain_batch
from jaxenvs.wrappers import RecordEpisodeStatistics
from .curricula import make_curriculum
from .networks import ActorCritic, board_layout, policy_head_for
from .turns import EveryRow, has_action_mask


__all__ = [
    "Trainer", "RunnerState", "Transition", "all_finite", "as_typed_key", "episode_metrics", "stack_hparams",
    "observation_preprocessor",
]


def as_typed_key(key) -> jax.Array:
    """A typed PRNG key from a typed key or a raw ``jax.random.PRNGKey`` (uint32[..., 2])."""
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    if is_prng_key(key):
        return key
    return jax.random.wrap_key_data(key)


def all_finite(tree) -> jax.Array:
    """bool scalar: every element of every leaf of ``tree`` is finite."""
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]))


def episode_metrics(done, ep_return, ep_length) -> dict:
    """``episodes`` (count), ``episode_return`` and ``episode_length`` (means over the episodes that
    ended in a rollout; 0 when none did, which ``episodes == 0`` tells) from the rollout's statistics."""
    n_done = done.sum()
    denom = jnp.maximum(n_done, 1).astype(jnp.float32)
    return dict(
        episodes=n_done.astype(jnp.float32),
        episode_return=jnp.sum(jnp.where(done, ep_return, 0.0)) / denom,
        episode_length=jnp.sum(jnp.where(done, ep_length, 0)).astype(jnp.float32) / denom,
    )


def stack_hparams(config, n: int, **values):
    """The config's hyperparameters with a leading axis of ``n``: ``values`` (each of length ``n``)
    override its scalars, which are repeated, e.g. ``stack_hparams(cfg, 3, lr=[1e-4, 3e-4, 1e-3])``."""
    hp = jax.tree.map(lambda x: jnp.full((n,), x, jnp.float32), config.hparams())
    for name, v in values.items():
        v = jnp.asarray(v, jnp.float32)
        if v.shape != (n,):
            raise ValueError(f"stack_hparams: {name} has shape {v.shape}, expected ({n},)")
        hp = hp.replace(**{name: v})
    return hp


@struct.dataclass
class RunnerState:
    """Everything a run carries from one update to the next (one seed; vmap adds a seed axis):
    network params, optimizer state, the ``num_envs`` environments' states and observations, the
    PRNG key and ``update`` (int32, updates done so far). Algorithms that carry more subclass it."""

    params: Any
    opt_state: Any
    env_state: Any
    obs: Any
    key: jax.Array
    update: jax.Array


class Transition(NamedTuple):
    obs: jax.Array  # float32[B, obs_dim] (flattened)
    action: jax.Array  # the policy's sample (int32[B] or float32[B, d], before mapping to the env)
    log_prob: jax.Array  # float32[B]
    value: jax.Array  # float32[B]
    reward: jax.Array  # float32[B], scaled by reward_scale
    terminated: jax.Array  # bool[B]
    truncated: jax.Array  # bool[B]
    final_obs: jax.Array  # float32[B, obs_dim]: info["final_obs"], flattened
    # turn-based games only (None otherwise: every row acts, `train.turns.EveryRow`):
    mask: Any = None  # bool[B, n]: the legal actions of each row when it acted (all False: not its turn)
    acting: Any = None  # bool[B]: the row's agent had a legal action (made a decision)


def observation_preprocessor(space: spaces.Space) -> Callable:
    """``f(obs) -> float32[flatdim]`` for one agent's observation: flatten, then map each bounded
    dimension from ``[low, high]`` to ``[-1, 1]`` (unbounded ones pass unchanged)."""
    box = spaces.flatten_space(space)
    finite = np.isfinite(box.low) & np.isfinite(box.high) & (box.high > box.low)
    low = np.where(finite, box.low, 0.0).astype(np.float32)
    scale = np.where(finite, 2.0 / np.where(finite, box.high - box.low, 1.0), 1.0).astype(np.float32)
    shift = np.where(finite, -1.0, 0.0).astype(np.float32)

    def preprocess(obs):
        return (spaces.flatten(space, obs) - low) * scale + shift

    return preprocess


@dataclasses.dataclass
class Trainer:
    """The pure functions of one configuration (build it with `train.trainers.make_trainer`, or
    ``SomeTrainer.build(config)``). ``train``, ``init`` and ``run_updates`` are jitted (with the
    safe CPU scheduler, `train.xla`); ``traces["train"]`` counts how often ``train`` has been traced."""

    config: Any
    env: Any
    env_params: Any
    network: ActorCritic
    num_agents: int  # 1 for single-agent envs
    batch_size: int  # num_envs * num_agents rows per step
    preprocess: Callable  # one agent's raw observation -> float32[obs_dim]
    dist_fn: Callable
    to_env_action: Callable
    traces: TraceCounter = dataclasses.field(default_factory=TraceCounter)  # {"train": times traced}
    mesh: Any = None  # jaxenvs.sharding.env_mesh(...): split the env batch over devices
    turns: EveryRow = dataclasses.field(default_factory=EveryRow)  # who acts (`train.turns`): every row, or self-play
    curriculum: Any = None  # `train.curricula.Curriculum`, or None (curriculum "none": the plain program)

    # ---- building ---------------------------------------------------------------------------
    @classmethod
    def make_env(cls, config):
        """The environment the trainer steps (episode statistics recorded for the metrics)."""
        return RecordEpisodeStatistics(jaxenvs.make(config.env_id, **config.env_kwargs))

    @classmethod
    def make_network(cls, config, action_dim: int, continuous: bool, obs_space=None) -> ActorCritic:
        """The actor-critic: MLP trunks, or with the config's ``torso="board"`` a convolutional
        `train.networks.BoardTorso` over the board planes of ``obs_space`` (`board_layout`) first."""
        board = None
        if getattr(config, "torso", "mlp") == "board":
            board = board_layout(obs_space) if obs_space is not None else None
            if board is None:
                raise ValueError(f"torso 'board' reads a board (a 3-d Box: rows, cols, planes) in the observation; "
                                 f"{config.env_id}'s observation space {obs_space} has none; use torso 'mlp'")
        return ActorCritic(action_dim, continuous, config.hidden_sizes, config.activation, board=board)

    @classmethod
    def make_turns(cls, config, env, num_agents: int) -> EveryRow:
        """The turn strategy of a turn-based game (`train.turns`); an algorithm that trains them
        returns one (PPO: `train.turns.SelfPlay`), the others refuse the game here."""
        raise ValueError(f"{cls.__name__} does not train turn-based games with legal-action masks ({config.env_id})")

    @classmethod
    def build(cls, config, mesh: Any = None, **extra):
        """The trainer of ``config``: its environment, network and policy head. ``mesh``
        (`jaxenvs.sharding.env_mesh`) trains data-parallel over its devices, hosts included after
        `jaxenvs.sharding.initialize_distributed`; ``num_envs`` must be a multiple of its size. The
        updates equal the single-device ones up to float summation order."""
        env = cls.make_env(config)
        params = env.default_params
        num_agents = env.num_agents if env.multi_agent else 1
        act_dim, continuous, dist_fn, to_env_action = policy_head_for(env.action_space(params))
        if env.multi_agent:
            obs = jax.eval_shape(env.reset, key_on_host(0), params)[0]
            if {leaf.shape[:1] for leaf in jax.tree.leaves(obs)} != {(num_agents,)}:
                raise ValueError(f"{config.env_id}: multi-agent observations need a leading agent axis of {num_agents}")
        turns = cls.make_turns(config, env, num_agents) if has_action_mask(env, params, config.env_id) else EveryRow()
        trainer = cls(
            config=config, env=env, env_params=params, network=cls.make_network(config, act_dim, continuous, env.observation_space(params)),
            num_agents=num_agents, batch_size=config.num_envs * num_agents,
            preprocess=observation_preprocessor(env.observation_space(params)), dist_fn=dist_fn,
            to_env_action=to_env_action, mesh=mesh, turns=turns, curriculum=make_curriculum(config, env), **extra,
        )
        if trainer.curriculum is not None and (turns.turn_based or mesh is not None):
            raise ValueError(f"curriculum {config.curriculum!r} trains single-agent envs on one device; "
                             f"{config.env_id} is turn-based or a mesh was given")
        trainer.check()
        return trainer

    def check(self) -> None:
        """Host-side checks of the config against the environment (an algorithm adds its own)."""

    # ---- environment interaction (the one place that touches the env) ---------------------
    def env_reset(self, keys):
        """Reset ``num_envs`` environments, one key each (under a curriculum, each on its own level:
        the state is a `train.curricula.CurriculumState`)."""
        if self.curriculum is not None:
            return self.curriculum.reset(self, keys)
        out = jax.vmap(self.env.reset, in_axes=(0, None))(constrain_batch(keys, self.mesh), self.env_params)
        return constrain_batch(out, self.mesh)

    def env_step(self, keys, states, actions):
        """Step ``num_envs`` environments, one key each; returns Gymnasium's 6-tuple, batched.

        With a ``mesh`` the env batch is split over its devices (data parallel: the network's
        params stay replicated, and XLA averages the gradients across devices)."""
        if self.curriculum is not None:
            return self.curriculum.step(self, keys, states, actions)
        step = jax.vmap(self.env.step, in_axes=(0, 0, 0, None))
        return constrain_batch(step(constrain_batch(keys, self.mesh), states, actions, self.env_params), self.mesh)

    # ---- batching: (num_envs[, num_agents], ...) <-> (batch_size, ...) -----------------------
    def flat_obs(self, obs) -> jax.Array:
        """float32[batch_size, obs_dim] from a batch of raw observations."""
        f = jax.vmap(self.preprocess)
        if self.env.multi_agent:
            f = jax.vmap(f)
        x = f(obs)
        return x.reshape((-1, x.shape[-1]))

    def _to_rows(self, x):
        """Agent-axis arrays [E, A, ...] -> [E*A, ...]; episode-level [E] -> repeated per agent."""
        if self.env.multi_agent and x.ndim == 1:
            x = jnp.repeat(x[:, None], self.num_agents, axis=1)
        return x.reshape((-1,) + x.shape[(2 if self.env.multi_agent else 1) :])

    def _to_env(self, x):
        """Rows [E*A, ...] -> [E, A, ...] (multi-agent); unchanged for single-agent envs."""
        return x.reshape((-1, self.num_agents) + x.shape[1:]) if self.env.multi_agent else x

    # ---- policy -------------------------------------------------------------------------------
    def policy(self, params, x, mask=None):
        """``(action distribution, value)`` of observation rows ``x`` float32[N, obs_dim]; in
        turn-based games over the legal actions ``mask`` (bool[N, n], from `row_mask`), as the
        turn strategy says (`train.turns`)."""
        out, value = self.network.apply(params, x)
        return self.turns.distribution(self, out, mask), value

    def row_mask(self, obs) -> jax.Array | None:
        """bool[rows, n]: ``obs["action_mask"]`` of a batch of raw observations, one row per agent
        per environment (as `flat_obs`); None for environments without a mask."""
        return self.turns.row_mask(obs)

    def act(self, params, obs, key=None):
        """Env actions for a batch of raw observations (any leading batch size): sampled with
        ``key``, or greedy (mode of the policy) when ``key`` is None. Turn-based games use the
        observations' own ``action_mask``."""
        dist, _ = self.policy(params, self.flat_obs(obs), self.row_mask(obs))
        a = dist.mode() if key is None else dist.sample(key)
        return self._to_env(self.to_env_action(a))

    def agent_policy(self, params, greedy: bool = True) -> Callable:
        """``policy(key, obs) -> int32 action`` on ONE agent's raw observation (no agent or batch
        axis), the form `jaxenvs.games` uses: greedy (the mode) or sampled."""

        def policy(key, obs):
            dist, _ = self.policy(params, self.preprocess(obs)[None], self.row_mask(obs))  # one row
            a = dist.mode() if greedy else dist.sample(key)
            return self.to_env_action(a)[0]

        return policy

    # ---- one rollout --------------------------------------------------------------------------
    def _reset_all(self, key):
        """``(obs, env_state)`` of ``num_envs`` freshly reset environments."""
        return self.env_reset(prng.split(key, self.config.num_envs))

    def _rollout(self, runner, hp):
        """``num_steps`` steps in every env; returns the new runner, the `Transition` batch
        [T, B, ...] and, per step and env, (episode ended, its return averaged over agents, its
        length) from `jaxenvs.wrappers.RecordEpisodeStatistics`; turn-based games add, per step,
        the number of decisions and of illegal moves (``info["illegal_action"]``)."""

        def step(r, _):
            key, k_act, k_env = prng.split(r.key, 3)
            x = self.flat_obs(r.obs)
            mask = self.row_mask(r.obs)
            dist, value = self.policy(r.params, x, mask)
            sample, acting = self.turns.sample(self, k_act, dist, r.obs, mask)
            log_prob = dist.log_prob(sample)
            env_keys = prng.split(k_env, self.config.num_envs)
            obs, env_state, reward, terminated, truncated, info = self.env_step(
                env_keys, r.env_state, self._to_env(self.to_env_action(sample))
            )
            ep_return = info["episode_return"]
            stats = (
                info["returned_episode"],
                ep_return.mean(axis=-1) if self.env.multi_agent else ep_return,
                info["episode_length"],
            ) + self.turns.step_stats(mask, info, terminated)
            r = r.replace(env_state=env_state, obs=obs, key=key)
            t = Transition(
                obs=x,
                action=sample,
                log_prob=log_prob,
                value=value,
                reward=self._to_rows(reward) * hp.reward_scale,
                terminated=self._to_rows(terminated),
                truncated=self._to_rows(truncated),
                final_obs=self.flat_obs(info["final_obs"]),
                mask=mask,
                acting=acting,
            )
            return r, (t, stats)

        if self.curriculum is None:
            return jax.lax.scan(step, runner, None, length=self.config.num_steps)
        runner = self.curriculum.begin(self, runner)  # PLR/ACCEL: this update's levels
        runner, (traj, stats) = jax.lax.scan(step, runner, None, length=self.config.num_steps)
        return self.curriculum.end(self, runner, traj, stats, hp), (traj, stats)

    def curriculum_metrics(self, runner) -> dict:
        """The update's curriculum metrics (`train.curricula`); none without a curriculum."""
        return {} if self.curriculum is None else self.curriculum.metrics(runner)

    def _next_values(self, params, traj: Transition) -> jax.Array:
        """``V(final_obs)``, float32[T, B], wherever `gae` and `gae_decisions` read it (every step
        that did not terminate), without a critic pass over every step's pre-reset observation: on a
        step that ended no episode ``final_obs[t]`` is the next step's observation, whose value the
        rollout already holds (``traj.value[t + 1]``); the last step's comes from one pass over
        ``final_obs[T - 1]``. Only when some step before the last was truncated does the full pass
        over ``final_obs`` run (`jaxenvs._backend.cond`), and its values are taken on the truncated
        steps. Terminated steps get a value too (they bootstrap from 0 whatever it is). On a GPU or TPU the
        full pass always runs and a select picks the same values: XLA reads a ``lax.cond``'s
        predicate back on the host there, a wait each update that costs more than the pass."""
        _, last = self.network.apply(params, traj.final_obs[-1])
        shifted = jnp.concatenate([traj.value[1:], last[None]], axis=0)

        def with_truncations(_):
            _, values = self.network.apply(params, traj.final_obs)
            return jnp.where(traj.truncated, values, shifted)

        early = traj.truncated[:-1].any()
        return _backend.cond(early, with_truncations, lambda _: shifted, None)

    def advantages(self, traj: Transition, next_values, hp):
        """``(advantages, value targets)`` [T, B]: `train.gae.gae`, or in turn-based games
        `train.gae.gae_decisions` (each seat's own decisions)."""
        return self.turns.advantages(traj, next_values, hp)

    def turn_metrics(self, params, key, *stats) -> dict:
        """The turn strategy's per-update metrics (turn-based games: ``illegal_rate`` and the
        per-update matches, `train.turns.SelfPlay.update_metrics`)."""
        return self.turns.update_metrics(self, params, key, stats)

    @property
    def opponent_rows(self) -> np.ndarray | None:
        """bool[batch_size]: the rows an opponent plays (`train.turns.SelfPlay`), or None."""
        return self.turns.opponent_rows

    @property
    def max_plies(self) -> int:
        """Steps after which a game of the per-update matches is cut (the spec's time limit)."""
        return self.turns.max_plies

    # ---- the algorithm's parts ------------------------------------------------------------------
    def _init(self, key, hp=None):
        """The runner state of one seed at update 0."""
        raise NotImplementedError

    def _update(self, runner, hp):
        """One update: ``(runner, {metric: scalar}, with "nonfinite")``."""
        raise NotImplementedError

    # ---- updates and training ---------------------------------------------------------------------
    def _run_updates(self, runner, hp=None, num_updates: int = 1):
        """``num_updates`` updates (a ``lax.scan``); metrics get a leading [num_updates] axis."""
        hp = self.config.hparams() if hp is None else hp
        return jax.lax.scan(lambda r, _: self._update(r, hp), runner, None, length=num_updates)

    def _train(self, key, hp=None):
        hp = self.config.hparams() if hp is None else hp
        return self._run_updates(self._init(key, hp), hp, self.config.num_updates)

    def __post_init__(self):
        self.init = jax.jit(self._init)
        self.run_updates = jax.jit(self._run_updates, static_argnames="num_updates")
        self.train = jax.jit(self.traces.counted(self._train, "train"))
