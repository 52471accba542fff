"""The peer the PPO benchmarks time jaxenvs' PPO against: rejax 0.1.3's PPO at a jaxenvs config's
settings, on the same environment (through `jaxenvs.adapters.gymnax.to_gymnax`), with its
evaluation callback off (each benchmark evaluates both sides itself, or not at all). Used by
``train_speed.py``, ``ppo_phases.py`` and ``startup.py``.

rejax's optimizer is not jaxenvs': it clips each gradient entry to ``max_grad_norm``
(``optax.clip``) where jaxenvs clips the global norm (``optax.clip_by_global_norm``, as PureJaxRL,
CleanRL and SB3 do), and it keeps the learning rate constant where a jaxenvs config with
``anneal_lr`` decays it. `with_optimizer` gives a rejax train state jaxenvs' optimizer, so that a
benchmark can time both sides doing the same work per gradient step."""

from __future__ import annotations


def rejax_ppo(cfg, total_timesteps: int):
    """rejax's ``PPO`` for ``total_timesteps`` env steps at ``cfg``'s settings (a `PPOConfig`)."""
    import jax.numpy as jnp
    from rejax import PPO

    import jaxenvs
    from jaxenvs.adapters.gymnax import to_gymnax

    genv = to_gymnax(jaxenvs.make(cfg.env_id, autoreset=False, **cfg.env_kwargs), api="legacy")
    algo = PPO.create(
        env=genv, total_timesteps=total_timesteps, eval_freq=total_timesteps, skip_initial_evaluation=True,
        num_envs=cfg.num_envs, num_steps=cfg.num_steps, num_epochs=cfg.update_epochs,
        num_minibatches=cfg.num_minibatches, learning_rate=cfg.lr, gamma=cfg.gamma, gae_lambda=cfg.gae_lambda,
        clip_eps=cfg.clip_eps, ent_coef=cfg.ent_coef, vf_coef=cfg.vf_coef, max_grad_norm=cfg.max_grad_norm,
        agent_kwargs={"activation": cfg.activation, "hidden_layer_sizes": cfg.hidden_sizes},
    )
    return algo.replace(eval_callback=lambda a, ts, rng: jnp.zeros(()))


def with_optimizer(ts, cfg):
    """rejax's PPO train state ``ts`` with jaxenvs' optimizer for ``cfg`` (global-norm clipping, Adam
    with eps 1e-5, the linear decay of ``anneal_lr``: `train.ppo.PPOTrainer.make_optimizer`) on the
    actor and on the critic, each with a fresh optimizer state."""
    from jaxenvs.train.trainers import make_trainer

    tx = make_trainer(cfg).make_optimizer(cfg.hparams())
    return ts.replace(**{name: getattr(ts, name).replace(tx=tx, opt_state=tx.init(getattr(ts, name).params))
                         for name in ("actor_ts", "critic_ts")})
