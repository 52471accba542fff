"""The peer the PPO benchmarks time jaxenvs' PPO against: rejax 0.1.3's PPO at a jaxenvs config's
settings, on the same environment (through `jaxenvs.adapters.gymnax.to_gymnax`), with its
evaluation callback off (each benchmark evaluates both sides itself, or not at all). Used by
``train_speed.py``, ``ppo_phases.py`` and ``startup.py``."""

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
