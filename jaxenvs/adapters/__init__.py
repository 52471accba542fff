"""Adapters that present jaxenvs environments to Gymnasium, Stable-Baselines3 and PettingZoo users.

Each adapter lives in its own module and imports its library only there, so ``import jaxenvs``
never needs them (install the extras ``jaxenvs[gymnasium]``, ``jaxenvs[sb3]``,
``jaxenvs[pettingzoo]``)::

    from jaxenvs.adapters.gymnasium import GymnasiumEnv, GymnasiumVectorEnv  # gymnasium.Env / VectorEnv
    from jaxenvs.adapters.sb3 import SB3VecEnv                               # stable_baselines3 VecEnv
    from jaxenvs.adapters.pettingzoo import ParallelEnv                      # pettingzoo.ParallelEnv

This module holds what they share and imports none of those libraries: building the underlying
environment (time limit kept, auto-reset removed: the adapters reset as their library prescribes),
the seed -> key rule, and the jitted functions that run one copy or ``num_envs`` vmapped copies with
one call (and one device -> host transfer) per step.

Random keys. Every copy owns a key chain. ``reset(seed=s)`` starts it at ``seed_to_key(s)``
(``jax.random.key(s)`` for ``0 <= s < 2**32``); each reset or step then splits the chain's key into
``(next key, key used by this call)``. A reset without a seed continues the chain, so an adapter
over ``num_envs`` copies produces exactly the trajectories of ``num_envs`` single adapters seeded
``s, s + 1, ...`` (what Gymnasium's ``SyncVectorEnv`` and SB3's ``DummyVecEnv`` do).
"""

from __future__ import annotations

import collections
import functools
from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs.core import Environment, check_params
from jaxenvs.registration import make
from jaxenvs.wrappers.base import AutoReset, has_wrapper, same_step_reset, strip_autoreset, tree_select

__all__ = ["resolve_env", "seed_to_key", "seeds_to_keys", "reset_keys", "compiled", "check_seed", "pack", "Unpacker", "Runner"]

_U32 = 2**32


def check_seed(seed: Any) -> int:
    """``seed`` as a Python int; ValueError unless it is a non-negative integer."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"a seed must be a non-negative integer, got {seed!r}")
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
    """``env`` without an outermost :class:`AutoReset`; ValueError if one sits deeper."""
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


def _pack_order(leaves) -> list[int]:
    # widest dtypes first, so every leaf starts at an offset aligned to its item size
    return sorted(range(len(leaves)), key=lambda i: -np.dtype(leaves[i].dtype).itemsize)


def pack(tree: Any) -> jax.Array:
    """All leaves of ``tree`` as one uint8 buffer (jittable): one device -> host transfer for all.

    Bool leaves become one byte each, other leaves their raw bytes; :class:`Unpacker` inverts it.
    """
    leaves = jax.tree.leaves(tree)
    parts = []
    for i in _pack_order(leaves):
        leaf = jnp.asarray(leaves[i])
        b = leaf.astype(jnp.uint8) if leaf.dtype == jnp.bool_ else jax.lax.bitcast_convert_type(leaf, jnp.uint8)
        parts.append(b.reshape(-1))
    return jnp.concatenate(parts) if parts else jnp.zeros((0,), jnp.uint8)


class Unpacker:
    """Host-side inverse of :func:`pack` for trees shaped like ``shape_tree`` (``jax.eval_shape``
    output); returns numpy views into the buffer (copy before handing them out)."""

    def __init__(self, shape_tree: Any):
        leaves, self.treedef = jax.tree.flatten(shape_tree)
        self.layout = [None] * len(leaves)
        offset = 0
        for i in _pack_order(leaves):
            dtype = np.dtype(leaves[i].dtype)
            nbytes = int(np.prod(leaves[i].shape, dtype=np.int64)) * dtype.itemsize
            self.layout[i] = (offset, nbytes, dtype, tuple(leaves[i].shape))
            offset += nbytes
        self.nbytes = offset

    def __call__(self, packed) -> Any:
        buf = np.asarray(packed)
        if buf.shape != (self.nbytes,):
            raise ValueError(f"packed buffer has {buf.shape} bytes, expected ({self.nbytes},)")
        leaves = [buf[o : o + n].view(dt).reshape(shape) for o, n, dt, shape in self.layout]
        return self.treedef.unflatten(leaves)


@functools.lru_cache(maxsize=64)
def compiled(env: Environment, batched: bool) -> SimpleNamespace:
    """Jitted functions driving ``env`` (one copy, or copies on a leading axis when ``batched``).

    Each returns ``(device, packed)``: what stays on the device (advanced keys first) and the
    results the host needs, packed by :func:`pack` (unpack with ``unpacker(name, *args)``). All take
    ``params`` last, shared by every copy:

    * ``reset(keys, params)``: device ``(keys, obs, state)``, host ``obs``;
    * ``step(keys, state, action, params)``: device ``(keys, obs, state)``, host
      ``(obs, reward, terminated, truncated, info)``;
    * ``step_same(...)``: as ``step``, but copies whose episode ended are reset in the same call
      (their reset continues the key chain); host adds ``final_obs``, the pre-reset observation;
    * ``step_next(keys, state, pending, action, params)``: copies with ``pending`` set are reset
      instead of stepped (reward 0, flags false, action ignored); the device part adds the new
      ``pending`` (``terminated | truncated``). Gymnasium's next-step auto-reset.

    and, unpacked: ``render(state, params)`` (uint8 frame(s)), ``select(mask, new, old)`` (per-copy
    choice between two pytrees). ``traces[name]`` counts how often ``name`` has been traced
    (compiled). Cached per environment object, so every adapter over the same
    object compiles once.
    """

    def reset_one(key, params):
        key, sub = jax.random.split(key)
        obs, state = env.reset(sub, params)
        return (key, obs, state), obs

    def step_one(key, state, action, params):
        key, sub = jax.random.split(key)
        obs, state, reward, terminated, truncated, info = env.step(sub, state, action, params)
        return (key, obs, state), (obs, reward, terminated, truncated, info)

    def step_same_one(key, state, action, params):
        (key, obs, state), (_, reward, terminated, truncated, info) = step_one(key, state, action, params)
        (reset_key, reset_obs, reset_state), _ = reset_one(key, params)
        # the one auto-reset rule; the key chain advances with the state it belongs to
        obs, (key, state), info = same_step_reset(
            terminated | truncated, obs, (key, state), info, reset_obs, (reset_key, reset_state)
        )
        final_obs = info.pop("final_obs")
        return (key, obs, state), (obs, reward, terminated, truncated, info, final_obs)

    def step_next_one(key, state, pending, action, params):
        (key_next, s_obs, s_state), (_, reward, terminated, truncated, info) = step_one(key, state, action, params)
        (_, r_obs, r_state), _ = reset_one(key, params)  # same split as the step: the key chain agrees
        obs, state = tree_select(pending, (r_obs, r_state), (s_obs, s_state))
        reward = jnp.where(pending, jnp.zeros_like(reward), reward)
        terminated = terminated & ~pending
        truncated = truncated & ~pending
        device = (key_next, obs, state, terminated | truncated)
        return device, (obs, reward, terminated, truncated, info)

    raw = dict(reset=reset_one, step=step_one, step_same=step_same_one, step_next=step_next_one)
    if batched:
        # params (the last argument) is shared by every copy
        raw = {name: jax.vmap(f, in_axes=(0,) * (f.__code__.co_argcount - 1) + (None,)) for name, f in raw.items()}

    traces: collections.Counter = collections.Counter()

    def packed(name, f):
        def run(*args):
            traces[name] += 1  # Python runs only while jax traces: counts compilations
            device, host = f(*args)
            return device, pack(host)

        return jax.jit(run)

    unpackers: dict = {}

    def unpacker(name: str, *args) -> Unpacker:
        """The :class:`Unpacker` of ``name``'s host results for arguments shaped like ``args``."""
        leaves = jax.tree.leaves(args)
        sig = (name, jax.tree.structure(args), tuple((np.shape(x), str(getattr(x, "dtype", type(x)))) for x in leaves))
        if sig not in unpackers:
            unpackers[sig] = Unpacker(jax.eval_shape(raw[name], *args)[1])
        return unpackers[sig]

    def render_one(state, params):
        return env.render(state, params)

    render = jax.vmap(render_one, in_axes=(0, None)) if batched else render_one
    select = jax.vmap(tree_select) if batched else tree_select
    return SimpleNamespace(
        **{name: packed(name, f) for name, f in raw.items()},
        unpacker=unpacker,
        traces=traces,
        render=jax.jit(render),
        select=jax.jit(select),
    )


class Runner:
    """Calls ``compiled(env, batched)``'s functions and unpacks their host results.

    ``runner(name, *args) -> (device, host)``; ``host`` holds numpy views into one transferred
    buffer. The unpacking layout is computed on the first call of each function (an adapter's
    shapes never change).
    """

    def __init__(self, env: Environment, batched: bool):
        self.fns = compiled(env, batched)
        self._unpackers: dict = {}

    def __call__(self, name: str, *args):
        device, packed = getattr(self.fns, name)(*args)
        unpack = self._unpackers.get(name)
        if unpack is None:
            unpack = self._unpackers[name] = self.fns.unpacker(name, *args)
        return device, unpack(packed)
