"""rejax 0.1.3's PPO, unmodified, trains jaxenvs environments through
``jaxenvs.adapters.gymnax.to_gymnax(env, api="legacy")`` (rejax 0.1.3 speaks gymnax 0.0.x's
5-tuple ``step``; verified with gymnax 1.0.1 installed beside it).

This test runs a tiny training (two updates) for the wiring; training GridWorld-v0 to
``train.grading``'s bar takes longer and is measured by ``benchmarks/train_speed.py``
(``rejax PPO, same settings``).
"""

import jax
import jax.numpy as jnp
import numpy as np

from helpers import require

require("rejax")

from rejax import PPO  # noqa: E402

import jaxenvs  # noqa: E402
from jaxenvs.adapters.gymnax import to_gymnax  # noqa: E402


def test_rejax_ppo_trains_grid_world_through_to_gymnax():
    genv = to_gymnax(jaxenvs.make("GridWorld-v0", autoreset=False), api="legacy")
    num_envs, num_steps = 4, 8
    algo = PPO.create(
        env=genv, total_timesteps=2 * num_envs * num_steps, eval_freq=2 * num_envs * num_steps,
        num_envs=num_envs, num_steps=num_steps, num_epochs=1, num_minibatches=1,
        skip_initial_evaluation=True, agent_kwargs={"hidden_layer_sizes": (8,)},
    )
    # rejax's evaluation loop compiles as long as training: the trained policy is evaluated in
    # benchmarks/train_speed.py instead
    algo = algo.replace(eval_callback=lambda a, ts, rng: jnp.zeros(()))
    ts, _ = jax.jit(algo.train)(jax.random.key(0))
    assert int(ts.global_step) == 2 * num_envs * num_steps
    # the adapter's state went through rejax's vmapped reset/step: one episode clock per env,
    # each at most the steps taken and below params.max_steps_in_episode (reset when reached)
    time = np.asarray(ts.env_state.time)
    assert time.shape == (num_envs,) and np.all((time >= 0) & (time <= 2 * num_steps))
    assert ts.last_obs.shape == (num_envs, 4) and ts.last_obs.dtype == jnp.float32
    flat = jax.tree.leaves((ts.actor_ts.params, ts.critic_ts.params))
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in flat)
