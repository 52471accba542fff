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
* **Turn-based games** (observations holding ``"action_mask"``: `TicTacToe-v0`, `ConnectFour-v0`,
  `KuhnPoker-v0`) get a `train.masking.MaskedCategorical` policy over the legal actions of each
  row. The rollout stores the mask and an ``acting`` flag per row (the row's agent has a legal
  action: it is its turn; non-movers, chance plies and terminal states do not act) in
  `Transition`; the losses average over acting rows only, and returns are credited to each seat's
  own decisions by `gae_decisions` (self-play: one shared policy plays every seat from that seat's
  observation). ``mask_actions=False`` (an ablation) keeps the policy over all actions; ``acting``
  still comes from the mask. Every update also reports ``illegal_rate`` and, with
  ``match_games > 0``, the greedy policy's win/draw/loss per seat against random-legal play.
  Opponents are the current policy (self-play) and, with the config's ``random_opponents`` (a
  fraction of the envs), random-legal play: in those envs one seat (seat ``e % num_agents`` of env
  ``e``, so the learner meets it from every seat) moves uniformly among its legal moves and its
  rows never act in the losses (`Trainer.opponent_rows`). No pool of past checkpoints: a pool would
  carry K copies of the parameters in the runner state (and in every checkpoint) and run K network
  passes per step to let each seat's row pick its opponent, several times the rollout's cost;
  Tic-Tac-Toe and Kuhn poker reach their bars in pure self-play (a strong entropy bonus keeps the
  policy exploring), Connect Four with random-legal opponents (see `train.tuned`).
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
from jaxenvs import spaces
from jaxenvs._traces import TraceCounter
from jaxenvs.core import is_prng_key
from jaxenvs.sharding import constrain_batch
from jaxenvs.wrappers import RecordEpisodeStatistics
from . import league
from .masking import MaskedCategorical
from .networks import ActorCritic, policy_head_for


__all__ = [
    "Trainer", "RunnerState", "Transition", "gae", "gae_decisions", "all_finite", "as_typed_key", "episode_metrics", "stack_hparams",
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


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """Generalised advantage estimation over a rollout that may cross episode ends.

    All arrays are ``[T, B]`` (time first). ``values[t] = V(obs_t)``; ``next_values[t]`` is the
    value of the observation step ``t`` led to before any reset (``V(info["final_obs"])``), so
    truncated steps bootstrap from it and terminated ones from 0:
    ``delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t`` and
    ``A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}`` with ``done = terminated | truncated``
    (``A_T = 0``). Returns ``(advantages, value_targets = advantages + values)``, float32[T, B].
    """
    not_term = 1.0 - terminated.astype(jnp.float32)
    not_done = 1.0 - (terminated | truncated).astype(jnp.float32)
    deltas = rewards + gamma * not_term * next_values - values

    def backward(adv_next, xs):
        delta, cont = xs
        adv = delta + gamma * lam * cont * adv_next
        return adv, adv

    _, adv = jax.lax.scan(backward, jnp.zeros_like(values[0]), (deltas, not_done), reverse=True)
    return adv, adv + values


def gae_decisions(rewards, values, next_values, terminated, truncated, acting, gamma, lam):
    """GAE over each row's own decisions: the credit assignment of turn-based self-play.

    All arrays are ``[T, B]`` (time first; a row is one seat of one environment); ``acting[t, b]``
    says that row ``b`` made a decision at step ``t`` (its agent had a legal action). Per row, the
    steps where it did not act are skipped:

    * a reward arriving on a step where the row did not act (the opponent's winning move gives this
      seat -1; the showdown after the opponent's call) is added to the row's LAST decision before
      it in the same episode (rewards of the steps from one decision up to the next are summed);
    * a decision bootstraps from the value of the row's NEXT decision in the same episode; when the
      episode ends first, from 0 if it terminated and from ``next_values`` (``V(final_obs)``) of its
      last step if it was truncated; when the rollout ends first, from ``next_values[T - 1]`` (the
      value of the row's observation where the rollout stopped, as `gae` does);
    * the time unit is the row's own decision: ``delta = R + gamma * V(next decision) - V`` and
      ``A = delta + gamma * lam * A(next decision)``; episode ends cut the trace.

    Non-acting steps get advantage 0 and target ``values`` (they are left out of every loss).
    Rewards that come before a row's first decision of an episode have no decision to go to and
    are dropped. With every row acting at every step this is `gae` exactly (tested).
    Returns ``(advantages, value_targets = advantages + values)``, float32[T, B].
    """
    acting = acting.astype(bool)
    done = terminated | truncated
    bootstrap_end = jnp.where(terminated, 0.0, next_values)  # where an episode ends at step t

    def backward(carry, xs):
        adv_next, v_next, r_acc = carry
        r, v, end, v_end, act = xs
        # an episode ends after this step: what lies later belongs to the next episode
        adv_next = jnp.where(end, 0.0, adv_next)
        v_next = jnp.where(end, v_end, v_next)
        r_acc = jnp.where(end, 0.0, r_acc) + r
        adv = r_acc + gamma * v_next - v + gamma * lam * adv_next
        carry = (jnp.where(act, adv, adv_next), jnp.where(act, v, v_next), jnp.where(act, 0.0, r_acc))
        return carry, jnp.where(act, adv, 0.0)

    init = (jnp.zeros_like(values[0]), next_values[-1], jnp.zeros_like(values[0]))
    _, adv = jax.lax.scan(backward, init, (rewards, values, done, bootstrap_end, acting), reverse=True)
    return adv, adv + values


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
    # turn-based games only (None otherwise):
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
    turn_based: bool = False  # observations hold "action_mask": masked policy, acting rows, decision GAE
    match_env: Any = None  # turn-based: the env without auto-reset, for the per-update games vs random-legal

    # ---- building ---------------------------------------------------------------------------
    @classmethod
    def make_env(cls, config):
        """The environment the trainer steps (episode statistics recorded for the metrics)."""
        return RecordEpisodeStatistics(jaxenvs.make(config.env_id, **config.env_kwargs))

    @classmethod
    def make_network(cls, config, action_dim: int, continuous: bool) -> ActorCritic:
        return ActorCritic(action_dim, continuous, config.hidden_sizes, config.activation)

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
            obs = jax.eval_shape(env.reset, jax.random.key(0), params)[0]
            if {leaf.shape[:1] for leaf in jax.tree.leaves(obs)} != {(num_agents,)}:
                raise ValueError(f"{config.env_id}: multi-agent observations need a leading agent axis of {num_agents}")
        obs_space = env.observation_space(params)
        turn_based = isinstance(obs_space, spaces.Dict) and "action_mask" in obs_space.keys()
        if turn_based and (continuous or not isinstance(env.action_space(params), spaces.Discrete)):
            raise ValueError(f"{config.env_id}: an action mask needs a Discrete action space")
        if turn_based and env.action_space(params).start != 0:
            raise ValueError(f"{config.env_id}: an action mask needs a Discrete action space starting at 0")
        trainer = cls(
            config=config, env=env, env_params=params, network=cls.make_network(config, act_dim, continuous),
            num_agents=num_agents, batch_size=config.num_envs * num_agents,
            preprocess=observation_preprocessor(obs_space), dist_fn=dist_fn,
            to_env_action=to_env_action, mesh=mesh, turn_based=turn_based,
            match_env=jaxenvs.make(config.env_id, autoreset=False, **config.env_kwargs) if turn_based else None,
            **extra,
        )
        trainer.check()
        return trainer

    def check(self) -> None:
        """Host-side checks of the config against the environment (an algorithm adds its own)."""

    # ---- environment interaction (the one place that touches the env) ---------------------
    def env_reset(self, keys):
        """Reset ``num_envs`` environments, one key each."""
        out = jax.vmap(self.env.reset, in_axes=(0, None))(constrain_batch(keys, self.mesh), self.env_params)
        return constrain_batch(out, self.mesh)

    def env_step(self, keys, states, actions):
        """Step ``num_envs`` environments, one key each; returns Gymnasium's 6-tuple, batched.

        With a ``mesh`` the env batch is split over its devices (data parallel: the network's
        params stay replicated, and XLA averages the gradients across devices)."""
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
        """``(action distribution, value)`` of observation rows ``x`` float32[N, obs_dim].

        Turn-based games: a `train.masking.MaskedCategorical` over the legal actions ``mask``
        (bool[N, n], from `row_mask`; all False on rows that do not act), or over all actions when
        ``mask`` is None or the config's ``mask_actions`` is off (the ablation)."""
        out, value = self.network.apply(params, x)
        if self.turn_based:
            return MaskedCategorical(out, mask if self.mask_actions else None), value
        if mask is not None:
            raise ValueError(f"{self.config.env_id} has no action mask; call policy without one")
        return self.dist_fn(out), value

    @property
    def mask_actions(self) -> bool:
        """Turn-based games: the policy is restricted to legal actions (the config's ``mask_actions``)."""
        return bool(getattr(self.config, "mask_actions", True))

    def row_mask(self, obs) -> jax.Array | None:
        """bool[rows, n]: ``obs["action_mask"]`` of a batch of raw observations, one row per agent
        per environment (as `flat_obs`); None for environments without a mask."""
        if not self.turn_based:
            return None
        m = jnp.asarray(obs["action_mask"]) != 0
        return m.reshape((-1, m.shape[-1]))

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
        return self.env_reset(jax.random.split(key, self.config.num_envs))

    def _rollout(self, runner, hp):
        """``num_steps`` steps in every env; returns the new runner, the `Transition` batch
        [T, B, ...] and, per step and env, (episode ended, its return averaged over agents, its
        length) from `jaxenvs.wrappers.RecordEpisodeStatistics`; turn-based games add, per step,
        the number of decisions and of illegal moves (``info["illegal_action"]``)."""

        def step(r, _):
            key, k_act, k_env = jax.random.split(r.key, 3)
            x = self.flat_obs(r.obs)
            mask = self.row_mask(r.obs)
            dist, value = self.policy(r.params, x, mask)
            acting = None if mask is None else mask.any(-1)
            opponent = self.opponent_rows
            if opponent is not None:  # the opponents' moves in their rows (`train.league`), left out of the losses
                k_act, k_opp = jax.random.split(k_act)
                sample = jnp.where(opponent, league.opponent_actions(self, k_opp, r.obs, mask), dist.sample(k_act))
                acting = acting & ~opponent
            else:
                sample = dist.sample(k_act)
            log_prob = dist.log_prob(sample)
            env_keys = jax.random.split(k_env, self.config.num_envs)
            obs, env_state, reward, terminated, truncated, info = self.env_step(
                env_keys, r.env_state, self._to_env(self.to_env_action(sample))
            )
            ep_return = info["episode_return"]
            stats = (
                info["returned_episode"],
                ep_return.mean(axis=-1) if self.env.multi_agent else ep_return,
                info["episode_length"],
            )
            if self.turn_based:  # (decisions made, illegal moves) in this step, summed over envs
                illegal = info["illegal_action"] if "illegal_action" in info else jnp.zeros(terminated.shape, bool)
                stats = stats + (jnp.sum(mask.any(-1)), jnp.sum(illegal))
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

        return jax.lax.scan(step, runner, None, length=self.config.num_steps)

    def _next_values(self, params, traj: Transition) -> jax.Array:
        """``V(final_obs)``, float32[T, B], wherever `gae` and `gae_decisions` read it (every step
        that did not terminate), without a critic pass over every step's pre-reset observation: on a
        step that ended no episode ``final_obs[t]`` is the next step's observation, whose value the
        rollout already holds (``traj.value[t + 1]``); the last step's comes from one pass over
        ``final_obs[T - 1]``. Only when some step before the last was truncated does the full pass
        over ``final_obs`` run (``lax.cond``), and its values are taken on the truncated steps.
        Terminated steps get a value too (they bootstrap from 0 whatever it is)."""
        _, last = self.network.apply(params, traj.final_obs[-1])
        shifted = jnp.concatenate([traj.value[1:], last[None]], axis=0)

        def with_truncations(_):
            _, values = self.network.apply(params, traj.final_obs)
            return jnp.where(traj.truncated, values, shifted)

        return jax.lax.cond(traj.truncated[:-1].any(), with_truncations, lambda _: shifted, None)

    def advantages(self, traj: Transition, next_values, hp):
        """``(advantages, value targets)`` [T, B]: `gae`, or `gae_decisions` (each seat's own
        decisions) in turn-based games."""
        if self.turn_based:
            return gae_decisions(traj.reward, traj.value, next_values, traj.terminated, traj.truncated, traj.acting,
                                 hp.gamma, hp.gae_lambda)
        return gae(traj.reward, traj.value, next_values, traj.terminated, traj.truncated, hp.gamma, hp.gae_lambda)

    def turn_metrics(self, params, key, decisions, illegal) -> dict:
        """Turn-based games' per-update metrics: ``illegal_rate`` (illegal moves / decisions in the
        rollout; exactly 0 with masking) and, with ``match_games > 0``, ``win_seat{i}``,
        ``draw_seat{i}``, ``loss_seat{i}``: the GREEDY policy (the one evaluations judge) in seat
        ``i`` against random-legal play in the others, over ``match_games`` games per seat
        (`jaxenvs.games.versus`, inside the compiled update)."""
        from jaxenvs.games import random_legal, versus

        out = dict(illegal_rate=illegal.sum().astype(jnp.float32) / jnp.maximum(decisions.sum(), 1).astype(jnp.float32))
        games = int(getattr(self.config, "match_games", 0))
        if games > 0:
            res = versus(self.match_env, self.agent_policy(params, greedy=True), random_legal, key, games,
                         max_plies=self.max_plies)
            for i in range(self.num_agents):
                out.update({f"{k}_seat{i}": res[k][i] for k in ("win", "draw", "loss")})
        return out

    @property
    def opponent_rows(self) -> np.ndarray | None:
        """bool[batch_size]: the rows played by random-legal moves (the config's ``random_opponents``,
        a fraction of the envs: in env ``e`` of the first ``round(fraction * num_envs)`` the seat
        ``e % num_agents``, so the learner meets the random player from every seat); None when
        there are none (pure self-play, and every environment without an action mask)."""
        n_envs = int(round(float(getattr(self.config, "random_opponents", 0.0)) * self.config.num_envs))
        if not self.turn_based or n_envs == 0:
            return None
        rows = np.zeros((self.config.num_envs, self.num_agents), bool)
        rows[np.arange(n_envs), np.arange(n_envs) % self.num_agents] = True
        return rows.reshape(-1)

    @property
    def max_plies(self) -> int:
        """Steps after which a game of the per-update matches is cut (the spec's time limit)."""
        spec = getattr(self.match_env, "spec", None)
        return int(getattr(spec, "max_episode_steps", None) or 1000)

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
