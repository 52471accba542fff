"""Batched vector path: ``num_envs`` copies of an environment stepped with ONE key per batch step.

``jax.vmap(env.step)`` with one key per env is the plain path. `VectorEnv` gives the same
semantics (time limit, same-step auto-reset with ``info["final_obs"]``, through the one rule
`jaxenvs.wrappers.base.same_step_reset`) with less RNG work:

* one batched draw of keys per step: ``jax.random.split(key, num_envs + 1)`` gives the reset key
  and, only when the wrapper stack draws randomness in ``step``
  (`jaxenvs.wrappers.base.step_draws_randomness`), one step key per env. A deterministic
  step (``traits.chance == "deterministic"``, verified by `jaxenvs.check_env`) gets the
  batch key itself and no split at all;
* auto-reset happens at the batch level and, by default, draws fresh episodes only for the envs
  that finished: up to ``reset_capacity`` of them per step (``num_envs // 16`` by default on a CPU,
  at least 64; every env on a GPU or TPU, see `default_reset_capacity`) take one fresh draw each,
  the ``j``-th finished env (in index order) the ``j``-th of ``reset_capacity`` independent reset
  keys; in a step where more envs finish than that, every env
  draws (``num_envs`` reset keys, ``lax.cond``). Every finished env still starts from its own
  independent draw (the same distribution as one reset per env per step), but a step costs about
  ``reset_capacity`` resets instead of ``num_envs``. ``reset_capacity=num_envs`` draws one reset
  per env per step (the plain path's cost);
* optionally (``reset_pool=k``, opt-in), *optimistic resets* as in Brax and Craftax: each step
  draws only ``k`` fresh episodes and hands them to the envs that finished (env ``i`` takes pool
  entry ``i % k``). Resetting then costs ``k`` instead of ``num_envs`` reset draws per step, but
  **episodes that start in the same step may share their start state** (when two finished envs
  map to the same pool entry); across steps the pools are independent draws. When ``k`` divides
  ``num_envs`` the pool is repeated by a broadcast (no gather).

The per-step draws (keys, resets) go through `jaxenvs.prng`, which computes ``jax.random``'s own
values in a form XLA fuses on the CPU.

Per-env levels: ``params_axis=0`` takes a batch of params, one per env (a leading axis of
``num_envs`` on every leaf). ``levels=`` (a `jaxenvs.levels.ParamSpace`, or a function ``key ->
params`` giving one level) also draws a new level for every env that finishes, at its auto-reset,
inside the compiled program: the batch's levels then live in the state (`LevelState`), ``step``
takes no params, and each restarted env plays a fresh draw (the ``j``-th finished env the ``j``-th
of the step's level keys, as for reset keys). A run without ``levels`` runs the same program as
before it existed.

Trajectories differ from the plain path's for the same key (the keys are derived differently) but
have the same distribution (with ``reset_pool``: the same distribution for each env, not
independent across envs that start in the same step).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

import numpy as np

from jaxenvs import _backend, prng, struct
from jaxenvs.core import ActionError, Environment, ParamsError, StateError, check_params, params_shape_mismatch
from jaxenvs.wrappers.base import (
    AutoReset,
    Forwarding,
    has_wrapper,
    same_step_reset,
    step_draws_randomness,
    strip_autoreset,
)
from jaxenvs.levels import ParamSpace, _tree_kinds

__all__ = ["VectorEnv", "LevelState", "default_reset_capacity"]


@struct.dataclass
class LevelState:
    """A `VectorEnv` state when it draws levels: the batch of env states and the batch of levels
    (params, a leading ``num_envs`` axis on every leaf) each env is playing."""

    state: Any
    params: Any


def default_reset_capacity(num_envs: int, backend: str | None = None) -> int:
    """The fresh episodes a `VectorEnv` step draws by default on ``backend`` (default: the backend
    the programs are built for, `jaxenvs._backend.platform`). On a CPU: ``num_envs // 16``, at least
    64 (all envs below 64: a small batch gains nothing from compaction). On a GPU or TPU:
    ``num_envs`` (no compaction): XLA runs the compaction's ``lax.cond`` there by reading its
    predicate back on the host every step, which costs more than the resets it saves (an H100 ran GridWorld's compacted path at 0.29-0.35 of the lean
    loop, the plain path at 0.82-0.94; benchmarks/results/gpu/)."""
    if (backend or _backend.platform()) != "cpu":
        return num_envs
    return min(num_envs, max(64, num_envs // 16))


class VectorEnv(Forwarding):
    """``num_envs`` copies of ``env``: ``reset(key)`` and ``step(key, state, action)`` on a batch.

    ``state``, ``obs``, ``action``, ``reward`` and the flags carry a leading ``num_envs`` axis;
    an ``env`` from ``make`` has its AutoReset replaced by the batch-level one, unless another
    wrapper sits above it (then that env keeps resetting itself);
    ``params`` is shared by the batch (pass a batched params pytree and ``params_axis=0`` to give
    each env its own). ``reset_pool``: optimistic resets from a pool of that many fresh episodes
    per step (see the module docstring; shared params only). ``reset_capacity``: how many fresh
    episodes a step draws when at most that many envs finish (exact: each finished env gets its own
    draw; more finished envs than that and every env draws); ``None`` is `default_reset_capacity`.
    ``levels``: a `jaxenvs.levels.ParamSpace` or a function ``key -> params`` (one level, jittable)
    from which every env draws its level at reset and at each auto-reset (see the module
    docstring); the state is then a `LevelState`. Raises `ParamsError` at construction when the
    function's output is not one params of the env's tree, shapes and dtypes.
    """

    def __init__(
        self,
        env: Environment,
        num_envs: int,
        autoreset: bool = True,
        params_axis: int | None = None,
        reset_pool: int | None = None,
        reset_capacity: int | None = None,
        levels: Any = None,
    ):
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        if reset_pool is not None:
            if not isinstance(reset_pool, int) or isinstance(reset_pool, bool) or not 1 <= reset_pool <= num_envs:
                raise ValueError(f"reset_pool must be None or an int in [1, num_envs={num_envs}], got {reset_pool!r}")
            if params_axis is not None:
                raise ValueError(
                    "reset_pool draws fresh episodes with shared params; with per-env params "
                    "(params_axis is not None) leave reset_pool=None"
                )
        if reset_capacity is None:
            reset_capacity = default_reset_capacity(num_envs)
        elif not isinstance(reset_capacity, int) or isinstance(reset_capacity, bool) or not 1 <= reset_capacity <= num_envs:
            raise ValueError(
                f"reset_capacity must be None or an int in [1, num_envs={num_envs}], got {reset_capacity!r}"
            )
        self.reset_capacity = reset_capacity
        self.env = strip_autoreset(env)
        self.num_envs = num_envs
        # an AutoReset below other wrappers (e.g. under NormalizeObservation, whose statistics
        # must survive episode ends) already resets each env: the batch then leaves it to it
        self.autoreset = autoreset and not has_wrapper(self.env, AutoReset)
        self.params_axis = params_axis
        self.reset_pool = reset_pool if self.autoreset else None
        # decided on the whole stack: an inner AutoReset draws randomness in step
        self._step_needs_key = step_draws_randomness(self.env)
        self.levels = levels
        self._draw_level = None if levels is None else self._level_drawer(levels, params_axis, reset_pool)

    def _level_drawer(self, levels, params_axis, reset_pool):
        """``key -> one level`` from ``levels``, its output checked against ``default_params``."""
        if params_axis not in (None, 0) or reset_pool is not None:
            raise ValueError("VectorEnv(levels=...) gives each env its own level on axis 0: leave params_axis and reset_pool unset")
        self.params_axis = 0
        draw = levels.sample if isinstance(levels, ParamSpace) else levels
        if not callable(draw):
            raise TypeError(f"VectorEnv levels must be a jaxenvs.levels.ParamSpace or a function key -> params, got {levels!r}")
        out = jax.eval_shape(draw, jax.random.key(0))
        want_def, want = _tree_kinds(jax.tree.map(jnp.asarray, self.env.default_params))
        got_def, got = _tree_kinds(out)
        name = getattr(draw, "__name__", repr(draw))
        if got_def != want_def:
            raise ParamsError(f"VectorEnv({self.env.name}) levels {name} returned a {type(out).__name__} tree {got_def}, expected {want_def}")
        for (path, shape, dtype), (_, wshape, wdtype) in zip(got, want):
            if (shape, dtype) != (wshape, wdtype):
                raise ParamsError(
                    f"VectorEnv({self.env.name}) levels {name} returned params{path} of shape {shape} and dtype {dtype}; "
                    f"one level has shape {wshape} and dtype {wdtype} (the batch axis is added by VectorEnv)"
                )
        return draw

    def draw_levels(self, key: jax.Array, n: int | None = None) -> Any:
        """``n`` (default ``num_envs``) levels from ``levels``, a leading axis on every leaf."""
        return jax.vmap(self._draw_level)(prng.split(key, self.num_envs if n is None else n))

    def __repr__(self):
        return f"<VectorEnv num_envs={self.num_envs} params_axis={self.params_axis} {self.env!r}>"

    def _params(self, params):
        """Checked params; their shapes must fit ``params_axis`` (on the host or at trace time)."""
        params = check_params(self.env, params)
        why = params_shape_mismatch(self.env, params, self.params_axis, self.num_envs)
        if why is None:
            return params
        if self.params_axis is None:
            hint = (
                "params shared by the batch have default_params' shapes; per-env params need params_axis=0 "
                f"(every leaf with a leading axis of num_envs={self.num_envs})"
            )
        else:
            hint = (
                f"with params_axis={self.params_axis}, every params leaf needs an axis {self.params_axis} of "
                f"num_envs={self.num_envs} entries (params_axis=None shares one params by the batch)"
            )
        raise ParamsError(f"VectorEnv({self.env.name}, num_envs={self.num_envs}): {why}; {hint}")

    def _check_actions(self, action):
        """A batch of actions: numbers with a leading axis of ``num_envs`` (host or trace time)."""
        leaves = jax.tree.leaves(action)
        space = self.env.action_space(self.env.default_params)
        shape = (self.num_envs, *self.env.batched_action_shape())
        want = f"shape {shape} (num_envs, *batched_action_shape) for action space {space}"
        if not leaves:
            raise ActionError(f"VectorEnv({self.env.name}): action {action!r} holds no array; expected {want}")
        for x in leaves:
            dtype = getattr(x, "dtype", None)
            if dtype is None and isinstance(x, (int, float, np.number)) and not isinstance(x, bool):
                dtype = np.result_type(x)
            if dtype is None or not (np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.bool_)):
                raise ActionError(
                    f"VectorEnv({self.env.name}): action {x!r} of type {type(x).__name__} is not an array of numbers; "
                    f"expected {want}"
                )
            if np.shape(x)[:1] != (self.num_envs,):
                raise ActionError(
                    f"VectorEnv({self.env.name}): action batch of shape {tuple(np.shape(x))}, expected {want}"
                )

    def _check_states(self, state, method="step"):
        """A batch of states: every leaf with a leading axis of ``num_envs`` (host or trace time)."""
        for path, x in jax.tree_util.tree_leaves_with_path(state):
            shape = tuple(np.shape(x))
            if shape[:1] != (self.num_envs,):
                raise StateError(
                    f"VectorEnv({self.env.name}, num_envs={self.num_envs}).{method}: state{jax.tree_util.keystr(path)} "
                    f"has shape {shape}, expected a leading axis of num_envs={self.num_envs} (pass the batch of states "
                    "from VectorEnv.reset or its previous step, not one env's state from env.reset)"
                )

    # turn-based games, batched: one result per env (leading num_envs axis)
    def _each(self, name, state, params, *args):
        fn = getattr(self.env, name)
        if self.levels is not None and isinstance(state, LevelState):
            state, params = state.state, state.params
        self._check_states(state, name)
        in_axes = (0,) * (1 + len(args)) + (self.params_axis,)
        return jax.vmap(fn, in_axes=in_axes)(state, *args, self._params(params))

    def legal_action_mask(self, state: Any, params: Any = None):
        """bool[num_envs, ...]: each env's `Environment.legal_action_mask`."""
        return self._each("legal_action_mask", state, params)

    def current_player(self, state: Any, params: Any = None):
        """int32[num_envs]: each env's `Environment.current_player`."""
        return self._each("current_player", state, params)

    def is_chance_node(self, state: Any, params: Any = None):
        return self._each("is_chance_node", state, params)

    def chance_outcomes(self, state: Any, params: Any = None):
        return self._each("chance_outcomes", state, params)

    def apply_chance(self, state: Any, outcome: Any, params: Any = None):
        """Each env's state after its ``outcome`` (int32[num_envs])."""
        return self._each("apply_chance", state, params, outcome)

    def reset(self, key: jax.Array, params: Any = None):
        """``(obs, state)`` of every env; with ``levels``, ``params`` (optional) are the first
        levels (a batch), drawn from ``levels`` when None, and the state is a `LevelState`."""
        if self.levels is not None:
            key_levels, key = prng.split(key, 2)
            params = self.draw_levels(key_levels) if params is None else self._params(params)
            obs, state = jax.vmap(self.env.reset)(prng.split(key, self.num_envs), params)
            return obs, LevelState(state=state, params=params)
        params = self._params(params)
        keys = prng.split(key, self.num_envs)
        return jax.vmap(self.env.reset, in_axes=(0, self.params_axis))(keys, params)

    def _fresh_episodes(self, key, params):
        """Initial ``(obs, state)`` for every env: ``num_envs`` draws, or ``reset_pool`` shared ones."""
        if self.reset_pool is None:
            return jax.vmap(self.env.reset, in_axes=(0, self.params_axis))(prng.split(key, self.num_envs), params)
        k = self.reset_pool
        pool = jax.vmap(self.env.reset, in_axes=(0, None))(prng.split(key, k), params)
        if self.num_envs % k == 0:  # entry i % k for env i: the pool repeated, a broadcast XLA fuses
            reps = self.num_envs // k
            return jax.tree.map(lambda x: jnp.broadcast_to(x, (reps, *x.shape)).reshape((self.num_envs, *x.shape[1:])), pool)
        index = jnp.arange(self.num_envs) % k
        return jax.tree.map(lambda x: x[index], pool)

    def step(self, key: jax.Array, state: Any, action: Any, params: Any = None):
        if self.levels is not None:
            return self._step_levels(key, state, action, params)
        params = self._params(params)
        self._check_states(state)
        self._check_actions(action)
        if self._step_needs_key:
            keys = prng.split(key, self.num_envs + 1)
            key_reset = keys[0]
            step = jax.vmap(self.env.step, in_axes=(0, 0, 0, self.params_axis))
            out = step(keys[1:], state, action, params)
        else:
            key_reset = key  # the step ignores its key (checked by check_env's deterministic rule)
            step = jax.vmap(self.env.step, in_axes=(None, 0, 0, self.params_axis))
            out = step(key, state, action, params)
        if not self.autoreset:
            return out
        obs, state, reward, terminated, truncated, info = out
        done = terminated | truncated
        if self.reset_pool is not None or self.reset_capacity >= self.num_envs:
            reset_obs, reset_state = self._fresh_episodes(key_reset, params)
            obs, state, info = same_step_reset(done, obs, state, info, reset_obs, reset_state, batched=True)
            return obs, state, reward, terminated, truncated, info
        info = dict(info)
        info["final_obs"] = obs
        few = jnp.sum(done) <= self.reset_capacity
        compacted = lambda: self._reset_finished(done, key_reset, params, obs, state)  # noqa: E731
        every = lambda: same_step_reset(done, obs, state, {}, *self._fresh_episodes(key_reset, params), batched=True)[:2]  # noqa: E731
        obs, state = _backend.cond(few, compacted, every)  # off a CPU: both, and a select
        return obs, state, reward, terminated, truncated, info

    def _reset_finished(self, done, key, params, obs, state):
        """``(obs, state)`` with at most ``reset_capacity`` finished envs restarted, each from its own
        fresh draw (the ``j``-th finished env, in index order, from the ``j``-th reset key)."""
        n, k = self.num_envs, self.reset_capacity
        index = jnp.nonzero(done, size=k, fill_value=n)[0]  # n: an unused slot, dropped below
        if self.params_axis is not None:
            safe = jnp.minimum(index, n - 1)
            params = jax.tree.map(lambda x: jnp.take(x, safe, axis=self.params_axis), params)
        fresh_obs, fresh_state = jax.vmap(self.env.reset, in_axes=(0, self.params_axis))(prng.split(key, k), params)
        put = lambda full, part: full.at[index].set(part, mode="drop")  # noqa: E731
        return jax.tree.map(put, obs, fresh_obs), jax.tree.map(put, state, fresh_state)

    def _step_levels(self, key, state, action, params):
        """`step` with ``levels``: the levels come from the `LevelState`; each env that finishes
        restarts on a fresh level (same capacity rule as the reset draws)."""
        if params is not None:
            raise ParamsError(
                f"VectorEnv({self.env.name}, levels=...).step takes no params: each env's level is in state.params"
            )
        if not isinstance(state, LevelState):
            raise StateError(
                f"VectorEnv({self.env.name}, levels=...).step takes the LevelState its reset returns, got {type(state).__name__}"
            )
        self._check_states(state)
        self._check_actions(action)
        levels, inner = state.params, state.state
        if self._step_needs_key:
            keys = prng.split(key, self.num_envs + 1)
            key_reset = keys[0]
            out = jax.vmap(self.env.step)(keys[1:], inner, action, levels)
        else:
            key_reset = key
            out = jax.vmap(self.env.step, in_axes=(None, 0, 0, 0))(key, inner, action, levels)
        obs, inner, reward, terminated, truncated, info = out
        if not self.autoreset:
            return obs, LevelState(state=inner, params=levels), reward, terminated, truncated, info
        done = terminated | truncated
        key_levels, key_reset = prng.split(key_reset, 2)
        info = dict(info)
        info["final_obs"] = obs

        def every_env():
            fresh = jax.tree.map(lambda new, old: jnp.where(done.reshape((-1,) + (1,) * (new.ndim - 1)), new, old),
                                 self.draw_levels(key_levels), levels)
            reset_obs, reset_state = jax.vmap(self.env.reset)(prng.split(key_reset, self.num_envs), fresh)
            o, s, _ = same_step_reset(done, obs, inner, {}, reset_obs, reset_state, batched=True)
            return o, s, fresh

        def finished_only():
            n, k = self.num_envs, self.reset_capacity
            index = jnp.nonzero(done, size=k, fill_value=n)[0]
            fresh = self.draw_levels(key_levels, k)
            fresh_obs, fresh_state = jax.vmap(self.env.reset)(prng.split(key_reset, k), fresh)
            put = lambda full, part: full.at[index].set(part, mode="drop")  # noqa: E731
            return (jax.tree.map(put, obs, fresh_obs), jax.tree.map(put, inner, fresh_state),
                    jax.tree.map(lambda full, part: jnp.asarray(full).at[index].set(part, mode="drop"), levels, fresh))

        if self.reset_capacity >= self.num_envs:
            obs, inner, levels = every_env()
        else:  # a level costs more than a reset (a maze's walls): a step where no env finishes draws none
            finished = jnp.sum(done)
            branch = jnp.where(finished == 0, 0, jnp.where(finished <= self.reset_capacity, 1, 2))
            obs, inner, levels = jax.lax.switch(branch, [lambda: (obs, inner, levels), finished_only, every_env])
        return obs, LevelState(state=inner, params=levels), reward, terminated, truncated, info
