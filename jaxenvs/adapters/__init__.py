"""Adapters that present jaxenvs environments to Gymnasium, Stable-Baselines3 and PettingZoo users.

Each adapter lives in its own module and imports its library only there, so ``import jaxenvs``
never needs them (install the extras ``jaxenvs[gymnasium]``, ``jaxenvs[sb3]``,
``jaxenvs[pettingzoo]``)::

    from jaxenvs.adapters.gymnasium import GymnasiumEnv, GymnasiumVectorEnv  # gymnasium.Env / VectorEnv
    from jaxenvs.adapters.sb3 import SB3VecEnv                               # stable_baselines3 VecEnv
    from jaxenvs.adapters.pettingzoo import ParallelEnv                      # pettingzoo.ParallelEnv

and the other way, another JAX library's environment (Pgx, gymnax-style, Brax/Playground,
Jumanji/dm_env-style TimeStep) as a jaxenvs one, for `check_env` and `verify_port`::

    from jaxenvs.adapters.functional import from_functional                  # needs none of them

This module holds what they share and imports none of those libraries: building the underlying
environment (time limit kept, auto-reset removed: the adapters reset as their library prescribes)
and the seed -> key rule. `jaxenvs.adapters.engine` holds the jitted functions that run one copy or
``num_envs`` vmapped copies with one call (and one device -> host transfer) per step.

Random keys. Every copy owns a key chain. ``reset(seed=s)`` starts it at ``seed_to_key(s)``
(``jax.random.key(s)`` for ``0 <= s < 2**32``); each reset or step then splits the chain's key into
``(next key, key used by this call)``. A reset without a seed continues the chain, so an adapter
over ``num_envs`` copies produces exactly the trajectories of ``num_envs`` single adapters seeded
``s, s + 1, ...`` (what Gymnasium's ``SyncVectorEnv`` and SB3's ``DummyVecEnv`` do).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs.adapters.engine import Compiled, Runner, Unpacker, compiled, pack
from jaxenvs.core import Environment, check_params
from jaxenvs.registration import make
from jaxenvs.wrappers.base import AutoReset, has_wrapper, strip_autoreset

# the engine (compiled, Runner, pack, Unpacker) lives in jaxenvs.adapters.engine, re-exported here
__all__ = [
    "resolve_env",
    "seed_to_key",
    "seeds_to_keys",
    "reset_keys",
    "check_seed",
    "compiled",
    "Compiled",
    "Runner",
    "pack",
    "Unpacker",
]

_U32 = 2**32


def check_seed(seed: Any, where: str = "") -> int:
    """``seed`` as a Python int; ValueError unless it is a non-negative integer.

    ``where`` names the call that passed it (``"GymnasiumEnv.reset(seed=...)"``), so the message says
    which of our calls was given the bad seed rather than surfacing Gymnasium's own words.
    """
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        prefix = f"{where}: " if where else ""
        raise ValueError(f"{prefix}a seed must be a non-negative integer (or None for a fresh one), got {seed!r}")
    return int(seed)


def seed_to_key(seed: int) -> jax.Array:
    """The typed JAX key of an integer seed.

    ``jax.random.key(seed)`` for ``0 <= seed < 2**32``; larger seeds fold their higher 32-bit words
    into it, so distinct seeds give distinct keys (``jax.random.key`` alone keeps 32 bits).
    """
    seed = check_seed(seed)
    key = jax.random.key(seed % _U32)
    seed //= _U32
    while seed:
        key = jax.random.fold_in(key, seed % _U32)
        seed //= _U32
    return key


@jax.jit
def _keys_from_u32(seeds):
    return jax.vmap(jax.random.key)(seeds)


def seeds_to_keys(seeds) -> jax.Array:
    """Keys[N] with ``keys[i] == seed_to_key(seeds[i])`` (one device call when all seeds < 2**32)."""
    seeds = [check_seed(s) for s in seeds]
    if all(s < _U32 for s in seeds):
        return _keys_from_u32(np.asarray(seeds, np.uint32))
    return jnp.stack([seed_to_key(s) for s in seeds])


def reset_keys(current, seeds: list, draw_seeds) -> jax.Array:
    """Keys[N] for resetting N copies: ``seed_to_key(seeds[i])`` where a seed is given, copy
    ``i``'s current chain key where it is None. Before the first reset (``current`` None) the
    missing seeds come from ``draw_seeds(N)`` (integers in ``[0, 2**32)``)."""
    seeds = list(seeds)
    if current is None and any(s is None for s in seeds):
        drawn = draw_seeds(len(seeds))
        seeds = [int(d) if s is None else s for s, d in zip(seeds, drawn)]
    given = [i for i, s in enumerate(seeds) if s is not None]
    if len(given) == len(seeds):
        return seeds_to_keys(seeds)
    if not given:
        return current
    return current.at[np.array(given)].set(seeds_to_keys([seeds[i] for i in given]))


def _strip_autoreset(env: Environment) -> Environment:
    """``env`` without an outermost `AutoReset`; ValueError if one sits deeper."""
    env = strip_autoreset(env)
    if has_wrapper(env, AutoReset):
        raise ValueError(
            f"{env!r} contains an AutoReset wrapper below other wrappers; the adapters reset "
            "episodes themselves. Build it with jaxenvs.make(id, autoreset=False)."
        )
    return env


@functools.lru_cache(maxsize=64)
def _make_cached(env_id: str, kwargs: tuple) -> Environment:
    return make(env_id, autoreset=False, **dict(kwargs))


def resolve_env(env_or_id, params=None, make_kwargs: dict | None = None):
    """``(env, params)`` for an adapter.

    ``env_or_id`` is a registered id (built with ``jaxenvs.make(id, autoreset=False,
    **make_kwargs)``, so the spec's TimeLimit stays) or an Environment (an outermost AutoReset is
    removed). Adapters built from the same id and kwargs share one environment object and hence
    one set of compiled functions. ``params=None`` means the environment's ``default_params``.
    """
    make_kwargs = dict(make_kwargs or {})
    if isinstance(env_or_id, str):
        try:
            env = _make_cached(env_or_id, tuple(sorted(make_kwargs.items())))
        except TypeError as e:
            if "unhashable" not in str(e):
                raise
            env = make(env_or_id, autoreset=False, **make_kwargs)
    elif isinstance(env_or_id, Environment):
        if make_kwargs:
            raise TypeError(
                f"keyword arguments {sorted(make_kwargs)} are jaxenvs.make arguments; pass them with an "
                "environment id, not with an Environment object"
            )
        env = _strip_autoreset(env_or_id)
    else:
        raise TypeError(
            f"expected a registered environment id or a jaxenvs Environment, got {type(env_or_id).__name__}"
        )
    return env, check_params(env, params)
