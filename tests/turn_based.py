"""Shared by the turn-based games' tests: a lockstep replay of recorded action sequences.

`replay(env, actions)` runs ``actions`` (int32[games, plies, num_agents], joint actions) through
``env`` (made with ``autoreset=False``) in one jitted ``vmap(scan)`` and returns, per ply, what
the differential tests compare against the original implementation: the observation and state
after the move, reward, terminated, current player, legal-action mask and ``info``.
"""

from __future__ import annotations

import functools

import jax
import numpy as np


@functools.lru_cache(maxsize=None)
def _replay_fn(env):
    def one_game(key, actions):
        obs0, state0 = env.reset(key)

        def body(state, xs):
            k, action = xs
            obs, state, reward, terminated, truncated, info = env.step(k, state, action)
            out = {
                "obs": obs,
                "reward": reward,
                "terminated": terminated,
                "truncated": truncated,
                "player": env.current_player(state),
                "mask": env.legal_action_mask(state),
                "info": info,
                "state": state,
            }
            return state, out

        keys = jax.random.split(key, actions.shape[0])
        _, traj = jax.lax.scan(body, state0, (keys, actions))
        first = {"obs": obs0, "player": env.current_player(state0), "mask": env.legal_action_mask(state0), "state": state0}
        return first, traj

    return jax.jit(jax.vmap(one_game))


def replay(env, actions, seed: int = 0):
    """``(first, traj)`` as host numpy trees: ``first`` after reset (``[games, ...]``), ``traj``
    after each ply (``[games, plies, ...]``)."""
    actions = np.asarray(actions, np.int32)
    keys = jax.random.split(jax.random.key(seed), actions.shape[0])
    first, traj = _replay_fn(env)(keys, actions)
    return jax.tree.map(np.asarray, first), jax.tree.map(np.asarray, traj)
