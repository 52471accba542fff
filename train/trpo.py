"""Trust Region Policy Optimization (Schulman et al. 2015) as one compiled program, garage's recipe.

    trainer = make_trainer(get_config("PointEnv-v0", algo="trpo"))  # train.trainers.make_trainer
    runner, metrics = trainer.train(jax.random.key(0))              # one jitted call
    runner, metrics = jax.vmap(trainer.train)(jax.random.split(key, 4))   # 4 seeds at once

garage's PointEnv tutorial trains ``TRPO(env=normalize(PointEnv()), policy=GaussianMLPPolicy(...),
baseline=LinearFeatureBaseline(...))``; this is that recipe, jitted end to end. One update:

1. a rollout of ``num_steps`` steps in ``num_envs`` environments (the trainer base's, `train.base`:
   the same observation preprocessing, policy heads, multi-agent self-play and auto-reset as PPO);
2. baseline values and GAE with truncation bootstrapping (`train.gae.gae`); the baseline
   is garage's linear feature baseline (`train.baselines`, refit every update on the
   discounted returns after predicting, as garage does) or a value network (``baseline="value"``,
   Adam on the same returns);
3. the natural-gradient step: ``g`` the gradient of the surrogate ``-mean(ratio * advantage)``
   (minus ``ent_coef`` times the mean entropy, 0 by default),
   ``x ~ F^-1 g`` by ``cg_iters`` conjugate-gradient iterations on Fisher-vector products
   (`fisher_vector_product`: ``J^T M J v`` through ``jax.jvp``/``jax.vjp`` of the policy's
   outputs, no Fisher matrix is built), the step ``sqrt(2 max_kl / x^T F x) * x``;
4. the backtracking line search (`line_search`): step fractions ``1, r, r^2, ...``
   (``max_backtracks`` of them) until the surrogate improves and the mean KL(old || new) over the
   batch is at most ``max_kl``; if none does, the policy stays as it was (garage's
   ``ConjugateGradientOptimizer`` with ``accept_violation=False``). A ``lax.while_loop``: under
   ``vmap`` over seeds it runs until every seed is done, masked; off a CPU all ``max_backtracks``
   candidates are tried, the same values (`jaxenvs._backend.bounded_while`).

Actions: with ``normalize_env`` the trainer's environment is ``jaxenvs.wrappers.normalize`` of the
registered one (Box actions in ``[-1, 1]``); `TRPOTrainer.act` maps them back to the
registered env's actions, so ``train.grading`` and the GIF run on the plain environment.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax
from flax import struct
from jax.flatten_util import ravel_pytree

from jaxenvs import _backend

from jaxenvs.wrappers import RescaleAction, normalize
from .base import Trainer, all_finite, as_typed_key, episode_metrics
from .baselines import fit_linear_baseline, linear_features, num_linear_features, predict_linear_baseline
from .configs import TRPOConfig, TRPOHParams
from .gae import gae
from .networks import ActorCritic
from .permutation import minibatch_permutation

__all__ = [
    "TRPOTrainer", "TRPORunnerState", "conjugate_gradient", "fisher_vector_product", "line_search",
    "natural_gradient_step",
]

_CRITIC = ("critic", "value_head")  # ActorCritic's value-network modules


@struct.dataclass
class TRPORunnerState:
    """What a TRPO run carries from one update to the next (one seed; vmap adds a seed axis):
    network params, the value baseline's Adam state (empty for the linear baseline), the linear
    baseline's coefficients float32[F] (unused with the value baseline), every batch row's step
    within its episode int32[batch_size] (the linear baseline's time feature), the environments'
    states and observations, the PRNG key and ``update`` (int32, updates done so far)."""

    params: Any
    opt_state: Any
    baseline: jax.Array
    episode_step: jax.Array
    env_state: Any
    obs: Any
    key: jax.Array
    update: jax.Array


def _split(params) -> tuple[dict, dict]:
    """(policy params, value-network params) of ActorCritic params."""
    inner = params["params"]
    return {k: v for k, v in inner.items() if k not in _CRITIC}, {k: v for k, v in inner.items() if k in _CRITIC}


def _merge(policy, critic) -> dict:
    return {"params": {**policy, **critic}}


def conjugate_gradient(matvec: Callable, b: jax.Array, iters: int, residual_tol: float = 1e-10) -> jax.Array:
    """``x ~ A^-1 b`` for a symmetric positive-definite ``A`` given as ``matvec(v) = A v``:
    ``iters`` conjugate-gradient iterations from ``x = 0`` that stop changing ``x`` once the squared
    residual norm is below ``residual_tol`` (garage's ``cg``: ``cg_iters=10, residual_tol=1e-10``).

    A fixed-length ``lax.scan`` with masked updates, as garage's loop of ``cg_iters`` steps with
    an early break, rather than ``jax.scipy.sparse.linalg.cg``: that solver's ``while_loop``,
    vmapped over seeds inside the scan over updates, returned NaN for finite inputs on XLA:CPU
    (jax 0.10.2; GridWorld, 4 seeds, 2 updates per call), and a fixed trip count also keeps the
    seeds of a vmapped run in lockstep.
    """

    def body(carry, _):
        x, r, p, rs = carry
        active = rs > residual_tol
        ap = matvec(p)
        p_ap = jnp.dot(p, ap)
        alpha = jnp.where(active & (p_ap > 0), rs / jnp.where(p_ap > 0, p_ap, 1.0), 0.0)
        x, r = x + alpha * p, r - alpha * ap
        rs_new = jnp.dot(r, r)
        beta = rs_new / jnp.where(rs > 0, rs, 1.0)
        p = jnp.where(active, r + beta * p, p)
        return (x, r, p, jnp.where(active, rs_new, rs)), None

    b = jnp.asarray(b)
    (x, *_), _ = jax.lax.scan(body, (jnp.zeros_like(b), b, b, jnp.dot(b, b)), None, length=iters)
    return x


def fisher_vector_product(apply_fn: Callable, dist_fn: Callable, theta: jax.Array, damping) -> Callable:
    """``v -> F v + damping * v``, with ``F`` the Fisher matrix of the policy at ``theta``
    (flat float32[P]) averaged over a batch: ``F = mean_b J_b^T M_b J_b``.

    ``apply_fn(theta)`` returns the batch's policy outputs (logits, or a Gaussian's mean and
    log-std); ``J`` is their Jacobian with respect to ``theta`` and ``M`` the Hessian of the mean
    KL(old || new) with respect to the outputs at ``new = old``, the Fisher matrix of the
    distribution in output space. ``J v`` is one ``jax.jvp``, ``M (J v)`` a ``jax.jvp`` of the KL's
    gradient, ``J^T (.)`` one ``jax.vjp``: the same as the Hessian of the mean KL (garage's
    Pearlmutter product), never forming ``F``.
    """
    old_out, vjp_fn = jax.vjp(apply_fn, theta)
    old_out = jax.lax.stop_gradient(old_out)
    old = dist_fn(old_out)
    grad_kl = jax.grad(lambda out: old.kl(dist_fn(out)).mean())

    def fvp(v):
        _, jv = jax.jvp(apply_fn, (theta,), (v,))
        _, mjv = jax.jvp(grad_kl, (old_out,), (jv,))
        return vjp_fn(mjv)[0] + damping * v

    return fvp


def line_search(loss_fn: Callable, kl_fn: Callable, theta, full_step, loss_before, max_kl, ratio, max_backtracks: int):
    """Backtracking line search along ``-full_step`` (garage's ``ConjugateGradientOptimizer``).

    Tries ``theta - ratio**k * full_step`` for ``k = 0 .. max_backtracks - 1`` and accepts the
    first whose ``loss_fn`` is below ``loss_before`` and whose ``kl_fn`` is at most ``max_kl`` (both
    finite). Returns ``(new theta, info)``: ``theta`` itself when no candidate passes; ``info`` has
    ``accepted`` (bool), ``backtracks`` (int32: candidates rejected), ``step_fraction`` (0 when
    rejected), ``loss`` and ``kl`` (of the new theta: ``loss_before`` and 0 when rejected).
    """

    def cond(carry):
        k, accepted = carry[:2]
        return ~accepted & (k < max_backtracks)

    def body(carry):
        k = carry[0]
        candidate = theta - ratio ** k.astype(jnp.float32) * full_step
        loss, kl = loss_fn(candidate), kl_fn(candidate)
        ok = (loss < loss_before) & (kl <= max_kl) & jnp.isfinite(loss) & jnp.isfinite(kl)
        return k + 1, ok, candidate, loss, kl

    init = (jnp.int32(0), jnp.bool_(False), theta, jnp.float32(loss_before), jnp.float32(0.0))
    k, accepted, candidate, loss, kl = _backend.bounded_while(cond, body, init, max_backtracks)
    info = dict(
        accepted=accepted,
        backtracks=jnp.where(accepted, k - 1, k),
        step_fraction=jnp.where(accepted, ratio ** (k - 1).astype(jnp.float32), 0.0),
        loss=jnp.where(accepted, loss, loss_before),
        kl=jnp.where(accepted, kl, 0.0),
    )
    return jnp.where(accepted, candidate, theta), info


def natural_gradient_step(apply_fn, dist_fn, theta, actions, old_log_prob, advantages, hp: TRPOHParams, cg_iters, max_backtracks):
    """One TRPO policy step from flat params ``theta`` on a batch; returns ``(new theta, info)``.

    ``apply_fn(theta)`` gives the batch's policy outputs; ``actions``/``old_log_prob`` are what the
    rollout sampled, ``advantages`` float32[N] (already standardised if wanted). ``info`` holds
    `line_search`'s entries plus ``loss_before``, ``entropy`` and ``finite`` (bool: the
    gradient, the search direction and the new params are finite).
    """
    old_out = jax.lax.stop_gradient(apply_fn(theta))
    old = dist_fn(old_out)

    def surrogate(t):
        dist = dist_fn(apply_fn(t))
        ratio = jnp.exp(dist.log_prob(actions) - old_log_prob)
        return -jnp.mean(ratio * advantages) - hp.ent_coef * dist.entropy().mean()

    def mean_kl(t):
        return old.kl(dist_fn(apply_fn(t))).mean()

    loss_before, g = jax.value_and_grad(surrogate)(theta)
    fvp = fisher_vector_product(apply_fn, dist_fn, theta, hp.cg_damping)
    x = conjugate_gradient(fvp, g, cg_iters)
    full_step = jnp.sqrt(2.0 * hp.max_kl / (jnp.dot(x, fvp(x)) + 1e-8)) * x
    new_theta, info = line_search(surrogate, mean_kl, theta, full_step, loss_before, hp.max_kl, hp.backtrack_ratio, max_backtracks)
    finite = all_finite((loss_before, g, x, new_theta))
    info = dict(info, loss_before=loss_before, entropy=old.entropy().mean(), finite=finite)
    return new_theta, dict(info, grad_norm=jnp.linalg.norm(g), step_norm=jnp.linalg.norm(full_step))


@dataclasses.dataclass
class TRPOTrainer(Trainer):
    """TRPO's update on the trainer base (`train.base.Trainer`): the environment is
    ``normalize``-d when ``config.normalize_env``, and the value network exists only with
    ``baseline="value"``."""

    config: TRPOConfig

    @classmethod
    def make_env(cls, config):
        env = super().make_env(config)
        if config.normalize_env:
            return normalize(env, normalize_reward=config.normalize_reward, gamma=config.gamma)
        if config.normalize_reward:
            raise ValueError("TRPOConfig.normalize_reward needs normalize_env=True")
        return env

    @classmethod
    def make_network(cls, config, action_dim, continuous, obs_space=None) -> ActorCritic:
        return ActorCritic(action_dim, continuous, config.hidden_sizes, config.activation,
                           log_std_init=config.log_std_init, critic=config.baseline == "value")

    @classmethod
    def make_turns(cls, config, env, num_agents):
        raise ValueError(f"TRPO does not train turn-based games with legal-action masks ({config.env_id}); "
                         f"use PPO (--algo ppo)")

    def check(self) -> None:
        if self.config.curriculum in ("plr", "accel"):
            raise ValueError(f"TRPO trains with curriculum none or dr; {self.config.curriculum!r} (a buffer of scored "
                             "levels, every env reset each update) is PPO's: use --algo ppo")
        rows = self.batch_size * self.config.num_steps
        if self.config.baseline == "value" and rows < self.config.vf_minibatches:
            raise ValueError(f"vf_minibatches = {self.config.vf_minibatches} exceeds the batch of {rows} rows")

    @property
    def action_wrapper(self):
        """normalize's RescaleAction (policy actions in [-1, 1] -> the env's), or None."""
        return self.env if isinstance(self.env, RescaleAction) else None

    def act(self, params, obs, key=None):
        """Actions of the registered (un-normalized) environment for a batch of its raw
        observations: sampled with ``key``, or greedy when ``key`` is None."""
        a = super().act(params, obs, key)
        return a if self.action_wrapper is None else self.action_wrapper.action(a, self.env_params)

    def _init(self, key, hp: TRPOHParams | None = None) -> TRPORunnerState:
        hp = self.config.hparams() if hp is None else hp
        key, k_net, k_env = jax.random.split(as_typed_key(key), 3)
        obs, env_state = self._reset_all(k_env)
        x = self.flat_obs(obs)
        params = self.network.init(k_net, x)
        return TRPORunnerState(
            params=params,
            opt_state=optax.adam(hp.vf_lr).init(_split(params)[1]),
            baseline=jnp.zeros((num_linear_features(x.shape[-1]),), jnp.float32),
            episode_step=jnp.zeros((self.batch_size,), jnp.int32),
            env_state=env_state,
            obs=obs,
            key=key,
            update=jnp.zeros((), jnp.int32),
        )

    def _fit_value(self, params, opt_state, obs, returns, key, hp: TRPOHParams):
        """``vf_epochs`` passes of ``vf_minibatches`` Adam steps on the value network's squared
        error to ``returns`` (float32[N]); returns (params, opt_state, mean loss, finite)."""
        cfg = self.config
        policy, critic = _split(params)
        tx = optax.adam(hp.vf_lr)
        n = obs.shape[0]

        def loss_fn(c, x, y):
            return 0.5 * jnp.mean((self.network.apply(_merge(policy, c), x)[1] - y) ** 2)

        def epoch(carry, k):
            perm = minibatch_permutation(k, n)[: n - n % cfg.vf_minibatches]
            mbs = (obs[perm].reshape((cfg.vf_minibatches, -1, obs.shape[-1])), returns[perm].reshape((cfg.vf_minibatches, -1)))

            def step(carry, mb):
                c, s = carry
                loss, grads = jax.value_and_grad(loss_fn)(c, *mb)
                updates, s = tx.update(grads, s, c)
                return (optax.apply_updates(c, updates), s), (loss, all_finite((loss, grads)))

            return jax.lax.scan(step, carry, mbs)

        (critic, opt_state), (losses, finite) = jax.lax.scan(epoch, (critic, opt_state), jax.random.split(key, cfg.vf_epochs))
        return _merge(policy, critic), opt_state, losses.mean(), finite.all() & all_finite(critic)

    def _update(self, runner: TRPORunnerState, hp: TRPOHParams):
        """One TRPO update: rollout, baseline and GAE, the natural-gradient step with line search,
        then the baseline's refit. Returns the new runner and a dict of scalar metrics (with
        ``nonfinite``: a loss, gradient or new parameter was NaN or infinite)."""
        cfg = self.config
        start_step = runner.episode_step
        runner, (traj, (done, ep_ret, ep_len)) = self._rollout(runner, hp)

        def count(t, ended):
            return jnp.where(ended, 0, t + 1), t

        episode_step, steps = jax.lax.scan(count, start_step, traj.terminated | traj.truncated)
        if cfg.baseline == "linear":
            values = predict_linear_baseline(runner.baseline, traj.obs, steps)
            next_values = predict_linear_baseline(runner.baseline, traj.final_obs, steps + 1)
        else:
            values, next_values = traj.value, self._next_values(runner.params, traj)
        adv, _ = gae(traj.reward, values, next_values, traj.terminated, traj.truncated, hp.gamma, hp.gae_lambda)
        _, returns = gae(traj.reward, values, next_values, traj.terminated, traj.truncated, hp.gamma, 1.0)

        n = cfg.num_steps * self.batch_size
        obs, actions = traj.obs.reshape((n, -1)), traj.action.reshape((n,) + traj.action.shape[2:])
        adv, returns = adv.reshape(n), returns.reshape(n)
        if cfg.normalize_advantages:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)

        policy, critic = _split(runner.params)
        theta, unravel = ravel_pytree(policy)

        def apply_fn(t):
            return self.network.apply(_merge(unravel(t), critic), obs)[0]

        theta, info = natural_gradient_step(
            apply_fn, self.dist_fn, theta, actions, traj.log_prob.reshape(n), adv, hp, cfg.cg_iters, cfg.max_backtracks
        )
        params = _merge(unravel(theta), critic)

        key, k_vf = jax.random.split(runner.key)
        if cfg.baseline == "linear":
            steps = steps.reshape(n)
            coeffs = fit_linear_baseline(linear_features(obs, steps), returns, hp.baseline_reg)
            vf_loss = 0.5 * jnp.mean((predict_linear_baseline(coeffs, obs, steps) - returns) ** 2)
            opt_state, vf_finite = runner.opt_state, all_finite((coeffs, vf_loss))
        else:
            coeffs = runner.baseline
            params, opt_state, vf_loss, vf_finite = self._fit_value(params, runner.opt_state, obs, returns, k_vf, hp)
        runner = runner.replace(
            params=params, opt_state=opt_state, baseline=coeffs, episode_step=episode_step, key=key, update=runner.update + 1
        )
        metrics = dict(
            episode_metrics(done, ep_ret, ep_len),
            pg_loss=info["loss"],
            vf_loss=vf_loss,
            entropy=info["entropy"],
            approx_kl=info["kl"],  # mean KL(old || new) of the accepted step (0 if rejected)
            accepted=info["accepted"].astype(jnp.float32),
            backtracks=info["backtracks"].astype(jnp.float32),
            step_fraction=info["step_fraction"],
            grad_norm=info["grad_norm"],
            step_norm=info["step_norm"],
            value_mean=values.mean(),
            nonfinite=~(info["finite"] & vf_finite & all_finite(params)),
        )
        metrics.update(self.curriculum_metrics(runner))
        return runner, metrics
