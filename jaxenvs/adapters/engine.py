"""The adapters' engine: jitted programs that drive one copy of an environment, or ``num_envs``
vmapped copies, with one call and one device -> host transfer per step.

* `compiled` ``(env, batched) -> Compiled``: the jitted programs, cached per environment object;
* `Runner`: calls them and unpacks their host results;
* `pack` / `Unpacker`: a pytree as one uint8 buffer and back (one transfer for all leaves).

Re-exported by `jaxenvs.adapters`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs._traces import TraceCounter
from jaxenvs.core import Environment
from jaxenvs.wrappers.base import same_step_reset, tree_select

__all__ = ["compiled", "Compiled", "Runner", "pack", "Unpacker"]

# a program's result: (what stays on the device, the host's results packed by `pack`)
Program = Callable[..., "tuple[Any, jax.Array]"]


def _pack_order(leaves) -> list[int]:
    # widest dtypes first, so every leaf starts at an offset aligned to its item size
    return sorted(range(len(leaves)), key=lambda i: -np.dtype(leaves[i].dtype).itemsize)


def pack(tree: Any) -> jax.Array:
    """All leaves of ``tree`` as one uint8 buffer (jittable): one device -> host transfer for all.

    Bool leaves become one byte each, other leaves their raw bytes; `Unpacker` inverts it.
    """
    leaves = jax.tree.leaves(tree)
    parts = []
    for i in _pack_order(leaves):
        leaf = jnp.asarray(leaves[i])
        b = leaf.astype(jnp.uint8) if leaf.dtype == jnp.bool_ else jax.lax.bitcast_convert_type(leaf, jnp.uint8)
        parts.append(b.reshape(-1))
    return jnp.concatenate(parts) if parts else jnp.zeros((0,), jnp.uint8)


class Unpacker:
    """Host-side inverse of `pack` for trees shaped like ``shape_tree`` (``jax.eval_shape``
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


@dataclasses.dataclass(frozen=True)
class Compiled:
    """The jitted programs of `compiled` for one environment object (see there for each)."""

    reset: Program
    step: Program
    step_same: Program
    step_next: Program
    render: Callable[[Any, Any], jax.Array]
    select: Callable[[jax.Array, Any, Any], Any]
    unpacker: Callable[..., "Unpacker"]
    traces: TraceCounter  # {program name: times traced (compiled)}


@functools.lru_cache(maxsize=64)
def compiled(env: Environment, batched: bool) -> Compiled:
    """Jitted functions driving ``env`` (one copy, or copies on a leading axis when ``batched``).

    Each returns ``(device, packed)``: what stays on the device (advanced keys first) and the
    results the host needs, packed by `pack` (unpack with ``unpacker(name, *args)``). All take
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

    traces = TraceCounter()

    def packed(name, f):
        def run(*args):
            device, host = f(*args)
            return device, pack(host)

        return jax.jit(traces.counted(run, name))

    unpackers: dict = {}

    def unpacker(name: str, *args) -> Unpacker:
        """The `Unpacker` of ``name``'s host results for arguments shaped like ``args``."""
        leaves = jax.tree.leaves(args)
        sig = (name, jax.tree.structure(args), tuple((np.shape(x), str(getattr(x, "dtype", type(x)))) for x in leaves))
        if sig not in unpackers:
            unpackers[sig] = Unpacker(jax.eval_shape(raw[name], *args)[1])
        return unpackers[sig]

    def render_one(state, params):
        return env.render(state, params)

    render = jax.vmap(render_one, in_axes=(0, None)) if batched else render_one
    select = jax.vmap(tree_select) if batched else tree_select
    return Compiled(
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
        self.fns: Compiled = compiled(env, batched)
        self._unpackers: dict[str, Unpacker] = {}

    def __call__(self, name: str, *args) -> tuple[Any, Any]:
        device, packed = getattr(self.fns, name)(*args)
        unpack = self._unpackers.get(name)
        if unpack is None:
            unpack = self._unpackers[name] = self.fns.unpacker(name, *args)
        return device, unpack(packed)
