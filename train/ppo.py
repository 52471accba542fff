"""Proximal Policy Optimization as one compiled program (after PureJaxRL's ``make_train``:
``make_trainer(config).train`` is its ``train``, the jitted pure ``train(key, hparams=None) ->
(runner, metrics)``).

    trainer = make_trainer(get_config("GridWorld-v0"))
    runner, metrics = trainer.train(jax.random.key(0))              # one jitted call
    runner, metrics = jax.vmap(trainer.train)(jax.random.split(key, 8))   # 8 seeds at once

One update = a rollout of ``num_steps`` steps in ``num_envs`` environments (``lax.scan``), GAE,
then ``update_epochs`` passes over ``num_minibatches`` shuffled minibatches (``lax.scan`` twice)
of the clipped-surrogate loss (Schulman et al. 2017) with an entropy bonus and an unclipped value
loss, Adam with global-norm gradient clipping and optional linear learning-rate decay.

Details that matter:

* **Truncation is not termination.** The environment comes from ``jaxenvs.make`` (AutoReset and
  TimeLimit). Every step's TD target is ``r + gamma * (1 - terminated) * V(final_obs)``, where
  ``final_obs = info["final_obs"]`` is the observation the step led to *before* any auto-reset:
  a truncated episode is bootstrapped from where it was cut, a terminated one from 0, and the
  GAE trace is cut at every episode end (:func:`gae`).
* **Multi-agent environments** train one shared policy (self-play): the agent axis folds into
  the batch, so a batch row is one agent in one environment. Rewards are per agent; episode
  boundaries are shared.
* **Observations** of any space (Dict, Tuple, Discrete, ...) are flattened with
  :func:`jaxenvs.spaces.flatten`; bounded dimensions are rescaled to [-1, 1].
* **Actions**: see :mod:`train.networks` (categorical, or a Gaussian clipped to the Box bounds).
* **Traced hyperparameters**: the numbers in :class:`train.configs.HParams` are arguments of the
  compiled program, so ``jax.vmap`` over them sweeps e.g. the learning rate in one call.
* **Chunks**: :meth:`Trainer.run_updates` runs any number of updates from a :class:`RunnerState`;
  the CLI calls it repeatedly (one compiled program) and prints progress between calls.
* **Non-finite numbers**: every update's metrics carry ``nonfinite`` (bool), True when a loss, a
  gradient or a new parameter of that update was NaN or infinite, for the caller to check
  between chunks (no host callback inside the program).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

import jaxenvs
from jaxenvs import spaces
from jaxenvs.parallel import constrain_batch
from jaxenvs.wrappers import RecordEpisodeStatistics
from .configs import HParams, PPOConfig
from .networks import ActorCritic, policy_head_for
from .permutation import minibatch_permutation
from .xla import jit

__all__ = [
    "make_trainer", "Trainer", "RunnerState", "gae", "all_finite", "stack_hparams", "as_typed_key",
]


def as_typed_key(key) -> jax.Array:
    """A typed PRNG key from a typed key or a raw ``jax.random.PRNGKey`` (uint32[..., 2])."""
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    return jax.random.wrap_key_data(key)


def all_finite(tree) -> jax.Array:
    """bool scalar: every element of every leaf of ``tree`` is finite."""
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]))


def episode_metrics(done, ep_return, ep_length) -> dict:
    """``episodes`` (count), ``episode_return`` and ``episode_length`` (means over the episodes
    that ended in a rollout; NaN when none did) from :meth:`Trainer._rollout`'s statistics."""
    n_done = done.sum()
    denom = jnp.maximum(n_done, 1)
    nan = jnp.float32(jnp.nan)
    return dict(
        episodes=n_done.astype(jnp.float32),
        episode_return=jnp.where(n_done > 0, jnp.sum(ep_return * done) / denom, nan),
        episode_length=jnp.where(n_done > 0, jnp.sum(ep_length * done) / denom, nan),
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


@struct.dataclass
class RunnerState:
    """Everything a run carries from one update to the next (one seed; vmap adds a seed axis):
    network params, optimizer state, the ``num_envs`` environments' states and observations, the
    PRNG key and ``update`` (int32, updates done so far)."""

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


def stack_hparams(config: PPOConfig, n: int, **values) -> HParams:
    """``HParams`` with a leading axis of ``n``: ``values`` (each of length ``n``) override the
    config's scalars, which are repeated, e.g. ``stack_hparams(cfg, 3, lr=[1e-4, 3e-4, 1e-3])``."""
    hp = jax.tree.map(lambda x: jnp.full((n,), x, jnp.float32), config.hparams())
    for name, v in values.items():
        v = jnp.asarray(v, jnp.float32)
        if v.shape != (n,):
            raise ValueError(f"stack_hparams: {name} has shape {v.shape}, expected ({n},)")
        hp = hp.replace(**{name: v})
    return hp


def _observation_preprocessor(space: spaces.Space) -> Callable:
    """``f(obs) -> float32[flatdim]`` for one agent's observation: flatten, then map each
    bounded dimension from ``[low, high]`` to ``[-1, 1]`` (unbounded ones pass unchanged)."""
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
    """The pure functions of one PPO configuration (build it with :func:`make_trainer`).

    ``train``, ``init`` and ``run_updates`` are jitted; ``num_traces`` counts how often the
    Python body of ``train`` has been traced (compilations).
    """

    config: PPOConfig
    env: Any
    env_params: Any
    network: ActorCritic
    num_agents: int  # 1 for single-agent envs
    batch_size: int  # num_envs * num_agents rows per step
    preprocess: Callable  # one agent's raw observation -> float32[obs_dim]
    dist_fn: Callable
    to_env_action: Callable
    num_traces: int = 0
    mesh: Any = None  # jaxenvs.parallel.env_mesh(...): split the env batch over devices

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
    def act(self, params, obs, key=None):
        """Env actions for a batch of raw observations (any leading batch size): sampled with
        ``key``, or greedy (mode of the policy) when ``key`` is None."""
        out, _ = self.network.apply(params, self.flat_obs(obs))
        dist = self.dist_fn(out)
        a = dist.mode() if key is None else dist.sample(key)
        return self._to_env(self.to_env_action(a))

    def make_optimizer(self, hp: HParams):
        """Global-norm clipping then Adam; with ``anneal_lr`` the step size falls linearly from
        ``hp.lr`` to 0 over the run's ``num_updates`` (counted from the optimizer's own step count)
        and stays at 0 after it (``optax.linear_schedule`` clamps: it never turns negative)."""
        cfg = self.config
        if not cfg.anneal_lr:
            return optax.chain(optax.clip_by_global_norm(hp.max_grad_norm), optax.adam(hp.lr, eps=1e-5))
        grad_steps = cfg.num_updates * cfg.update_epochs * cfg.num_minibatches
        lr = optax.linear_schedule(init_value=hp.lr, end_value=0.0, transition_steps=grad_steps)
        return optax.chain(optax.clip_by_global_norm(hp.max_grad_norm), optax.adam(lr, eps=1e-5))

    # ---- init / update / train ------------------------------------------------------------------
    def _init(self, key, hp: HParams | None = None) -> RunnerState:
        hp = self.config.hparams() if hp is None else hp
        key = as_typed_key(key)
        key, k_net, k_env = jax.random.split(key, 3)
        obs, env_state = self.env_reset(jax.random.split(k_env, self.config.num_envs))
        params = self.network.init(k_net, self.flat_obs(obs))
        return RunnerState(
            params=params,
            opt_state=self.make_optimizer(hp).init(params),
            env_state=env_state,
            obs=obs,
            key=key,
            update=jnp.zeros((), jnp.int32),
        )

    def _rollout(self, runner: RunnerState, hp: HParams):
        """``num_steps`` steps in every env; returns the new runner, the Transition batch
        [T, B, ...] and, per step and env, (episode ended, its return averaged over agents, its
        length) from :class:`~jaxenvs.wrappers.RecordEpisodeStatistics`."""

        def step(r: RunnerState, _):
            key, k_act, k_env = jax.random.split(r.key, 3)
            x = self.flat_obs(r.obs)
            out, value = self.network.apply(r.params, x)
            dist = self.dist_fn(out)
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
            )
            return r, (t, stats)

        return jax.lax.scan(step, runner, None, length=self.config.num_steps)

    def _loss(self, params, batch, hp: HParams):
        t, adv, target = batch
        out, value = self.network.apply(params, t.obs)
        dist = self.dist_fn(out)
        log_prob = dist.log_prob(t.action)
        ratio = jnp.exp(log_prob - t.log_prob)
        if self.config.normalize_advantages:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg_loss = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - hp.clip_eps, 1 + hp.clip_eps) * adv).mean()
        vf_loss = 0.5 * jnp.mean((value - target) ** 2)
        entropy = dist.entropy().mean()
        loss = pg_loss + hp.vf_coef * vf_loss - hp.ent_coef * entropy
        approx_kl = jnp.mean((ratio - 1) - (log_prob - t.log_prob))
        clip_frac = jnp.mean(jnp.abs(ratio - 1) > hp.clip_eps)
        return loss, dict(pg_loss=pg_loss, vf_loss=vf_loss, entropy=entropy, approx_kl=approx_kl, clip_frac=clip_frac)

    def _next_values(self, params, traj: Transition) -> jax.Array:
        """``V(final_obs)``, float32[T, B]: one critic pass over every step's pre-reset next
        observation (:func:`gae` bootstraps from it wherever a step did not terminate)."""
        _, values = self.network.apply(params, traj.final_obs)
        return values

    def _grad_step(self, tx, params, opt_state, batch, hp: HParams):
        """One optimizer step of ``tx`` on a minibatch ``(Transition, advantages, targets)``:
        ``(params, opt_state, loss info)``."""
        (loss, info), grads = jax.value_and_grad(self._loss, has_aux=True)(params, batch, hp)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        info = dict(info, nonfinite=~(all_finite(loss) & all_finite(grads) & all_finite(params)))
        return params, opt_state, info

    def _update(self, runner: RunnerState, hp: HParams):
        """One PPO update: rollout, GAE, epochs x minibatches of Adam steps. Returns the new
        runner and a dict of float32 scalar metrics, plus ``nonfinite`` (bool: a loss, gradient or
        new parameter of this update was NaN or infinite)."""
        cfg = self.config
        runner, (traj, (done, ep_ret, ep_len)) = self._rollout(runner, hp)
        next_values = self._next_values(runner.params, traj)
        adv, targets = gae(traj.reward, traj.value, next_values, traj.terminated, traj.truncated, hp.gamma, hp.gae_lambda)
        tx = self.make_optimizer(hp)
        n = cfg.num_steps * self.batch_size
        flat = jax.tree.map(lambda x: x.reshape((n,) + x.shape[2:]), (traj, adv, targets))

        def epoch(carry, _):
            params, opt_state, key = carry
            key, k_perm = jax.random.split(key)
            perm = minibatch_permutation(k_perm, n)
            mbs = jax.tree.map(lambda x: x[perm].reshape((cfg.num_minibatches, -1) + x.shape[1:]), flat)

            def minibatch(carry, mb):
                params, opt_state, info = self._grad_step(tx, *carry, mb, hp)
                return (params, opt_state), info

            (params, opt_state), info = jax.lax.scan(minibatch, (params, opt_state), mbs)
            return (params, opt_state, key), info

        key, k_upd = jax.random.split(runner.key)
        (params, opt_state, _), info = jax.lax.scan(
            epoch, (runner.params, runner.opt_state, k_upd), None, length=cfg.update_epochs
        )
        runner = runner.replace(params=params, opt_state=opt_state, key=key, update=runner.update + 1)
        nonfinite = info.pop("nonfinite").any()
        metrics = {k: v.mean() for k, v in info.items()}
        metrics.update(episode_metrics(done, ep_ret, ep_len), nonfinite=nonfinite, value_mean=traj.value.mean())
        return runner, metrics

    def _run_updates(self, runner: RunnerState, hp: HParams | None = None, num_updates: int = 1):
        """``num_updates`` updates (a ``lax.scan``); metrics get a leading [num_updates] axis."""
        hp = self.config.hparams() if hp is None else hp
        return jax.lax.scan(lambda r, _: self._update(r, hp), runner, None, length=num_updates)

    def _train(self, key, hp: HParams | None = None):
        self.num_traces += 1
        hp = self.config.hparams() if hp is None else hp
        return self._run_updates(self._init(key, hp), hp, self.config.num_updates)

    def __post_init__(self):
        self.init = jit(self._init)
        self.run_updates = jit(self._run_updates, static_argnames="num_updates")
        self.train = jit(self._train)


def make_trainer(config: PPOConfig, mesh: Any = None) -> Trainer:
    """Build the environment and network for ``config`` and return their :class:`Trainer`.

    ``mesh`` (:func:`jaxenvs.parallel.env_mesh`) trains data-parallel over its devices, hosts
    included after :func:`jaxenvs.parallel.initialize_distributed`; ``num_envs`` must be a
    multiple of its size. The updates equal the single-device ones up to float summation order.
    """
    env = RecordEpisodeStatistics(jaxenvs.make(config.env_id, **config.env_kwargs))
    parts = trainer_parts(config, env)
    if (parts["batch_size"] * config.num_steps) % config.num_minibatches:
        raise ValueError(
            f"num_envs * num_agents * num_steps = {parts['batch_size'] * config.num_steps} is not divisible by "
            f"num_minibatches = {config.num_minibatches}"
        )
    network = ActorCritic(parts.pop("action_dim"), parts.pop("continuous"), config.hidden_sizes, config.activation)
    return Trainer(config=config, network=network, mesh=mesh, **parts)


def trainer_parts(config, env) -> dict:
    """What every trainer here derives from its (wrapped) environment: ``env``, ``env_params``,
    ``num_agents``, ``batch_size`` (rows per step), the observation ``preprocess``, the policy
    head (``action_dim``, ``continuous``, ``dist_fn``, ``to_env_action``). Checks that a
    multi-agent env's observations carry the agent axis."""
    params = env.default_params
    num_agents = env.num_agents if env.multi_agent else 1
    act_dim, continuous, dist_fn, to_env_action = policy_head_for(env.action_space(params))
    if env.multi_agent:
        obs = jax.eval_shape(env.reset, jax.random.key(0), params)[0]
        leads = {leaf.shape[:1] for leaf in jax.tree.leaves(obs)}
        if leads != {(num_agents,)}:
            raise ValueError(f"{config.env_id}: multi-agent observations need a leading agent axis of {num_agents}")
    return dict(
        env=env,
        env_params=params,
        num_agents=num_agents,
        batch_size=config.num_envs * num_agents,
        preprocess=_observation_preprocessor(env.observation_space(params)),
        action_dim=act_dim,
        continuous=continuous,
        dist_fn=dist_fn,
        to_env_action=to_env_action,
    )

