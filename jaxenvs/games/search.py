"""Tree search at play time: a policy/value network plus Monte-Carlo tree search, the game's own
``step`` as the model (DeepMind's ``mctx``: ``pip install 'jaxenvs[search]'``).

Our games are pure functions, so the environment is an exact model: `search_policy(env,
evaluate, num_simulations)` returns ``policy(key, obs) -> action`` on ONE agent's observation,
jittable and vmappable like any policy of `jaxenvs.games`, that runs ``num_simulations``
simulations of Gumbel MuZero (`mctx.gumbel_muzero_policy`, made for few simulations) from the
position ``obs`` shows and plays the action it selects:

* the root is the game's state rebuilt from the observation (the game class declares
  ``state_from_observation(obs)``: `TicTacToe` and `ConnectFour`, games of perfect information);
* ``recurrent_fn`` steps the game (``env.step_env``, no auto-reset) with the mover's action in its
  row of the joint action; the reward is the mover's, and the value of the next position (the
  network's, for the player to move there) enters with discount -1: a two-player zero-sum turn
  game's value changes sign with every ply; a terminal position has discount 0 and value 0 (and
  searching past it adds nothing);
* illegal actions are masked: ``invalid_actions`` at the root, the prior's logits set to the
  lowest float below it.

``evaluate(obs) -> (logits float[n], value float[])`` is the network on one agent's observation
(the value in the game's reward units, for that agent). ``greedy=True`` (the default) searches
without Gumbel noise (``gumbel_scale=0``): the same position gives the same move; ``greedy=False``
samples the root's Gumbel noise from ``key``.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

__all__ = ["search_policy", "supports_search", "SEARCH_EXTRA"]

SEARCH_EXTRA = "pip install 'jaxenvs[search]'"


def supports_search(env) -> bool:
    """Whether tree search can play ``env``: a two-player zero-sum turn-based game whose class
    rebuilds its state from an observation (``state_from_observation``)."""
    base = getattr(env, "unwrapped", env)
    traits = getattr(base, "traits", None)
    return (hasattr(base, "state_from_observation") and getattr(traits, "num_agents", 0) == 2
            and getattr(traits, "utility", None) == "zero_sum" and getattr(traits, "dynamics", None) == "sequential")


def _import_mctx():
    try:
        import mctx
    except ImportError as e:
        raise ImportError(f"tree search needs mctx ({e}): {SEARCH_EXTRA}") from e
    return mctx


def search_policy(env, evaluate: Callable, num_simulations: int, greedy: bool = True, params=None,
                  max_depth: int | None = None) -> Callable:
    """``policy(key, obs) -> int32 action``: ``num_simulations`` simulations of Gumbel MuZero with
    ``evaluate`` as the network and ``env``'s step as the model (see the module docstring).
    ValueError for a game search cannot play (`supports_search`) or a non-positive
    ``num_simulations``; ImportError (naming the extra) without ``mctx``."""
    if isinstance(num_simulations, bool) or not isinstance(num_simulations, int) or num_simulations < 1:
        raise ValueError(f"num_simulations must be a positive int, got {num_simulations!r}")
    base = getattr(env, "unwrapped", env)
    if not supports_search(base):
        raise ValueError(
            f"tree search plays two-player zero-sum turn-based games of perfect information whose class rebuilds its "
            f"state from an observation (state_from_observation: TicTacToe, ConnectFour); {type(base).__name__} "
            "does not"
        )
    mctx = _import_mctx()
    env_params = base.default_params if params is None else params
    n_agents = base.num_agents

    def masked(logits, mask):
        return jnp.where(mask, logits, jnp.finfo(jnp.float32).min)

    def expand(rng, action, state):
        ended = ~jnp.any(base.legal_action_mask(state, env_params))  # a terminal position: nothing follows
        player = base.current_player(state, env_params)
        joint = jnp.zeros((n_agents,), jnp.int32).at[player].set(action)
        obs, state2, reward, terminated, truncated, _ = base.step_env(rng, state, joint, env_params)
        nxt = base.current_player(state2, env_params)
        row = jax.tree.map(lambda x: x[nxt], obs)
        logits, value = evaluate(row)
        done = ended | terminated | truncated
        out = mctx.RecurrentFnOutput(
            reward=jnp.where(ended, 0.0, reward[player]).astype(jnp.float32),
            discount=jnp.where(done, 0.0, -1.0).astype(jnp.float32),
            prior_logits=masked(jnp.asarray(logits, jnp.float32), jnp.asarray(row["action_mask"]) != 0),
            value=jnp.where(done, 0.0, value).astype(jnp.float32),
        )
        return out, jax.tree.map(lambda new, old: jnp.where(ended, old, new), state2, state)

    def recurrent_fn(_, rng, action, embedding):
        batch = action.shape[0]
        return jax.vmap(expand)(jax.random.split(rng, batch), action, embedding)

    def policy(key, obs):
        mask = jnp.asarray(obs["action_mask"]) != 0
        state = base.state_from_observation(obs, env_params)
        logits, value = evaluate(obs)
        root = mctx.RootFnOutput(
            prior_logits=masked(jnp.asarray(logits, jnp.float32), mask)[None],
            value=jnp.asarray(value, jnp.float32)[None],
            embedding=jax.tree.map(lambda x: x[None], state),
        )
        out = mctx.gumbel_muzero_policy(
            params=None, rng_key=key, root=root, recurrent_fn=recurrent_fn, num_simulations=num_simulations,
            invalid_actions=~mask[None], max_depth=max_depth, gumbel_scale=0.0 if greedy else 1.0,
        )
        return out.action[0].astype(jnp.int32)

    policy.num_simulations = num_simulations
    return policy
