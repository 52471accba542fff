"""Proximal Policy Optimization (Schulman et al. 2017) as one compiled program (after PureJaxRL's
``make_train``: ``make_trainer(config).train`` is its ``train``).

    trainer = make_trainer(get_config("GridWorld-v0"))              # train.trainers.make_trainer
    runner, metrics = trainer.train(jax.random.key(0))               # one jitted call
    runner, metrics = jax.vmap(trainer.train)(jax.random.split(key, 8))   # 8 seeds at once

One update = a rollout of ``num_steps`` steps in ``num_envs`` environments and GAE (the trainer
base, `train.base`), then ``update_epochs`` passes over ``num_minibatches`` shuffled minibatches
(``lax.scan`` twice) of the clipped-surrogate loss with an entropy bonus and an unclipped value
loss, Adam with global-norm gradient clipping and optional linear learning-rate decay.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import optax

from jaxenvs import prng
from .base import RunnerState, Trainer, all_finite, as_typed_key, episode_metrics
from .configs import HParams, PPOConfig
from .masking import acting_mean, acting_normalize, clipped_surrogate, zero_rows
from .permutation import minibatch_permutation
from .turns import SelfPlay
from . import league

__all__ = ["PPOTrainer"]


@dataclasses.dataclass
class PPOTrainer(Trainer):
    """PPO's update on the trainer base (`train.base.Trainer`)."""

    config: PPOConfig

    @classmethod
    def make_turns(cls, config: PPOConfig, env, num_agents: int) -> SelfPlay:
        """Turn-based games train in self-play (`train.turns.SelfPlay`), with the config's
        ``mask_actions``, ``match_games`` and ``random_opponents``."""
        return SelfPlay(config, num_agents, config.mask_actions, config.match_games, config.random_opponents)

    def check(self) -> None:
        if self.config.random_opponents and not (self.turns.turn_based and self.num_agents > 1):
            raise ValueError(
                f"random_opponents = {self.config.random_opponents} needs a turn-based game of several seats "
                f"(observations with an action_mask); {self.config.env_id} has none: leave it at 0"
            )
        if self.config.random_opponents:
            league.check(self)
        rows = self.batch_size * self.config.num_steps
        if rows % self.config.num_minibatches:
            raise ValueError(
                f"num_envs * num_agents * num_steps = {rows} is not divisible by num_minibatches = {self.config.num_minibatches}"
            )

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

    def _init(self, key, hp: HParams | None = None) -> RunnerState:
        hp = self.config.hparams() if hp is None else hp
        key, k_net, k_env = prng.split(as_typed_key(key), 3)
        obs, env_state = self._reset_all(k_env)
        params = self.network.init(k_net, self.flat_obs(obs))
        return RunnerState(params=params, opt_state=self.make_optimizer(hp).init(params), env_state=env_state,
                           obs=obs, key=key, update=jnp.zeros((), jnp.int32))

    def _loss(self, params, batch, hp: HParams):
        """The clipped-surrogate loss of a minibatch ``(Transition, advantages, targets)``, with an
        entropy bonus and an unclipped value loss, every term averaged over the rows that acted
        (``t.acting``, `train.masking`). In turn-based games log-probabilities are taken under the
        STORED masks and rows that made no decision (the non-mover, chance plies, terminal steps,
        opponents) contribute exactly zero to the loss and its gradient; elsewhere ``t.acting`` is
        None (every row acts) and the helpers compute the plain means, the same program as before
        masking existed."""
        t, adv, target = batch
        acting = t.acting
        dist, value = self.policy(params, t.obs, t.mask)
        log_prob = dist.log_prob(t.action)
        log_ratio = zero_rows(log_prob - t.log_prob, acting)
        ratio = jnp.exp(log_ratio)
        adv = acting_normalize(adv, acting) if self.config.normalize_advantages else zero_rows(adv, acting)
        pg_loss = acting_mean(clipped_surrogate(log_prob, t.log_prob, adv, acting, hp.clip_eps), acting)
        vf_loss = 0.5 * acting_mean(jnp.square(value - target), acting)
        entropy = acting_mean(dist.entropy(), acting)
        loss = pg_loss + hp.vf_coef * vf_loss - hp.ent_coef * entropy
        approx_kl = acting_mean((ratio - 1) - log_ratio, acting)
        clip_frac = acting_mean((jnp.abs(ratio - 1) > hp.clip_eps).astype(jnp.float32), acting)
        return loss, dict(pg_loss=pg_loss, vf_loss=vf_loss, entropy=entropy, approx_kl=approx_kl, clip_frac=clip_frac)

    def _grad_step(self, tx, params, opt_state, batch, hp: HParams):
        """One optimizer step of ``tx`` on a minibatch ``(Transition, advantages, targets)``:
        ``(params, opt_state, loss info)``, the info with ``loss_finite`` (bool)."""
        (loss, info), grads = jax.value_and_grad(self._loss, has_aux=True)(params, batch, hp)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return params, opt_state, dict(info, loss_finite=jnp.isfinite(loss))

    def _update(self, runner: RunnerState, hp: HParams):
        """One PPO update: rollout, GAE, epochs x minibatches of Adam steps. Returns the new
        runner and a dict of float32 scalar metrics, plus ``nonfinite`` (bool: a loss, gradient or
        new parameter of this update was NaN or infinite)."""
        cfg = self.config
        runner, (traj, stats) = self._rollout(runner, hp)
        done, ep_ret, ep_len = stats[:3]
        next_values = self._next_values(runner.params, traj)
        adv, targets = self.advantages(traj, next_values, hp)
        tx = self.make_optimizer(hp)
        n = cfg.num_steps * self.batch_size
        # only what the loss reads is shuffled into minibatches (not final_obs, values, rewards, flags)
        used = traj._replace(final_obs=None, reward=None, terminated=None, truncated=None, value=None)
        flat = jax.tree.map(lambda x: x.reshape((n,) + x.shape[2:]), (used, adv, targets))

        def epoch(carry, _):
            params, opt_state, key = carry
            key, k_perm = prng.split(key)
            perm = minibatch_permutation(k_perm, n)
            mbs = jax.tree.map(lambda x: x[perm].reshape((cfg.num_minibatches, -1) + x.shape[1:]), flat)

            def minibatch(carry, mb):
                params, opt_state, info = self._grad_step(tx, *carry, mb, hp)
                return (params, opt_state), info

            (params, opt_state), info = jax.lax.scan(minibatch, (params, opt_state), mbs)
            return (params, opt_state, key), info

        key, k_upd, k_match = self.turns.split_update_key(runner.key)
        (params, opt_state, _), info = jax.lax.scan(
            epoch, (runner.params, runner.opt_state, k_upd), None, length=cfg.update_epochs
        )
        runner = runner.replace(params=params, opt_state=opt_state, key=key, update=runner.update + 1)
        # a NaN or infinite gradient makes the clipped Adam step, and so the parameters, NaN for
        # good: the finite losses and the final parameters tell the same as checking every step's
        # gradients and parameters, at one pass over the parameters per update
        nonfinite = ~(info.pop("loss_finite").all() & all_finite(params))
        metrics = {k: v.mean() for k, v in info.items()}
        metrics.update(episode_metrics(done, ep_ret, ep_len), nonfinite=nonfinite,
                       value_mean=acting_mean(traj.value, traj.acting))
        metrics.update(self.turn_metrics(params, k_match, *stats[3:]))  # turn-based: illegal_rate, matches
        metrics.update(self.curriculum_metrics(runner))
        return runner, metrics
