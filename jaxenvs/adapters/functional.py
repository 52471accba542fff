"""Third-party functional JAX environments as jaxenvs environments: `from_functional`.

``from_functional(env)`` takes an environment written for another JAX library and returns a
jaxenvs `jaxenvs.core.Environment`, so that `jaxenvs.check_env`, `jaxenvs.testing.verify_port`,
``jaxenvs check --port module:factory`` and ``jaxenvs verify --port module:factory`` run on it::

    import gymnax, jaxenvs
    from jaxenvs.adapters.functional import from_functional

    env = from_functional(*gymnax.make("CartPole-v1"))   # (env, params), as gymnax.make returns them
    obs, state = env.reset(jax.random.key(0))

The style is found by duck typing (`detect_style`), in this order:

* ``pgx``: ``init(key)``, ``step(state, action, key)``, ``num_players``, ``num_actions``,
  ``observe(state, player)`` (Pgx's ``pgx.make``);
* ``gymnax``: ``reset_env(key, params)``, ``step_env(key, state, action, params)``,
  ``default_params``, ``observation_space``, ``action_space`` (gymnax; gymnax-style code of one's own);
* ``brax``: ``reset(key) -> State``, ``step(state, action) -> State`` with ``obs``, ``reward``,
  ``done``, ``info``, and ``observation_size``, ``action_size`` (Brax, MuJoCo Playground);
* ``timestep``: ``reset`` and ``step`` returning a ``TimeStep`` (``step_type``, ``reward``,
  ``observation``) or ``(state, TimeStep)`` (Jumanji, XLand-MiniGrid, Navix, dm_env-style code).

``style=`` forces one. Anything else is a TypeError naming what was found and what is accepted.

Flags, per style (``terminated`` = an absorbing state, ``truncated`` = cut short; never mixed):

* gymnax: `jaxenvs.envs.gymnax_env.GymnaxEnv` (the ``gymnax/`` ids' own wrapper, the same code):
  ``step_env``'s ``done`` is ``terminated`` (gymnax 1.0), ``is_truncated(state, params)`` is
  ``truncated`` (False where the env has none);
* Pgx: ``state.terminated`` and ``state.truncated`` as they are;
* Brax: ``done`` and ``info["truncation"]`` (set by Brax's ``EpisodeWrapper``): ``truncated =
  truncation``, ``terminated = done and not truncation``; without the key, ``done`` is
  ``terminated``. A terminal state on the last allowed step is ``terminated`` only (Brax's
  ``truncation`` is 0 there);
* TimeStep with a ``discount`` (dm_env, Jumanji, XLand-MiniGrid): at ``step_type == LAST`` (2),
  ``terminated`` when ``discount == 0``, ``truncated`` when ``discount > 0`` (dm_env's and
  Jumanji's ``termination``/``truncation``); TimeStep without ``discount`` (Navix): ``step_type``
  2 is ``terminated``, 1 ``truncated`` (Navix's ``TERMINATION`` and ``TRUNCATION``).

Spaces come from the env's own declarations, converted by `to_space` (gymnax, Gymnasium and
jaxenvs spaces; Jumanji/dm_env specs; Navix spaces), from ``num_actions`` and the reset's shapes
(Pgx, XLand-MiniGrid, Brax: a float observation is an unbounded float32 Box, Brax's action
``Box(-1, 1, (action_size,))``). ``observation_space=``/``action_space=`` override them.
Observations are cast to jaxenvs' dtypes (floats float32, bool uint8, other integers int32),
rewards to float32, flags to bool; every state leaf keeps the dtype ``reset`` gave it.

Legal-action masks. A Pgx game is a jaxenvs turn-based game (``action_style="full_action_set"``):
``obs = {"observation": float32/uint8[N, ...], "action_mask": uint8[N, num_actions]}``, every
agent's ``observe(state, player)``, the mover's row of the mask its ``legal_action_mask`` (the
others' rows and every row after the end zero), ``info["illegal_action"]``. Seats: agent ``i`` is
the ``i``-th player to move in the episode (Pgx draws who starts; OpenSpiel's and PettingZoo's
agent 0 always starts), so ``reward``, observations and masks are reordered into seats; the
state keeps Pgx's player of each seat (`SeatedState`). A TimeStep observation with an
``action_mask`` field over a Discrete action space (Jumanji) becomes ``{"observation": the other
fields, "action_mask": uint8[n]}`` with ``action_style="full_action_set"``.

Traits: ``chance`` is ``"deterministic"`` when ``step`` provably ignores its key (read off the
jaxpr, for the styles whose step takes one: gymnax, Pgx). Brax and TimeStep envs keep their key in
their state, so their ``step`` is a function of the state alone: ``"deterministic"`` (their
randomness is drawn at reset and carried). ``traits=`` (a dict of `jaxenvs.core.Traits` fields)
declares more, e.g. ``{"utility": "zero_sum"}``; `jaxenvs.check_env` then holds the env to it.

``params``: gymnax's (default ``env.default_params``), XLand-MiniGrid's ``EnvParams`` (its
``reset(params, key)``), otherwise none. ``max_episode_steps`` adds a `jaxenvs.wrappers.TimeLimit`.
Rendering is not adapted. Multi-agent envs other than Pgx's games are refused.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import spaces, struct
from jaxenvs.core import Environment, Traits
from jaxenvs.envs.gymnax_env import GymnaxEnv, canonical_dtype, cast_like, from_gymnax_space, key_is_used, space_dtypes
from jaxenvs.wrappers.base import TimeLimit, WithParams, Wrapper

__all__ = [
    "from_functional", "detect_style", "to_space", "STYLES", "PgxEnv", "PgxGame", "BraxEnv", "TimeStepEnv", "MaskedTimeStepEnv", "SeatedState",
    "TimeStepState",
]

STYLES = ("pgx", "gymnax", "brax", "timestep")
_ACCEPTED = (
    "accepted: a jaxenvs Environment; a Pgx env (init, step, num_players, num_actions, observe); a gymnax-style env "
    "(reset_env(key, params), step_env(key, state, action, params), default_params, observation_space, action_space); "
    "a Brax/MuJoCo Playground env (reset(key) and step(state, action) returning a State with obs, reward, done); a "
    "Jumanji/dm_env-style env (reset and step returning a TimeStep with step_type, reward, observation)"
)
_LAST = 2  # dm_env.StepType.LAST; Navix's TERMINATION
_NAVIX_TRUNCATION = 1


def _has(x, *names) -> bool:
    return all(hasattr(x, n) for n in names)


def _found(env) -> str:
    public = sorted(n for n in dir(env) if not n.startswith("_"))
    shown = ", ".join(public[:12]) + (", ..." if len(public) > 12 else "")
    return f"{type(env).__module__}.{type(env).__qualname__} (public attributes: {shown or 'none'})"


def detect_style(env: Any) -> str:
    """The style of ``env`` (one of `STYLES`), by what it has (see the module docstring)."""
    if _has(env, "init", "step", "num_players", "num_actions", "observe"):
        return "pgx"
    if _has(env, "reset_env", "step_env", "default_params", "observation_space", "action_space"):
        return "gymnax"
    if _has(env, "reset", "step") and _has(env, "observation_size", "action_size"):
        return "brax"
    if _has(env, "reset", "step"):
        return "timestep"  # confirmed when the reset's output is read (TimeStepEnv)
    raise TypeError(f"from_functional cannot adapt {_found(env)}: it has no reset/step or init/step; {_ACCEPTED}")


# ---- spaces ---------------------------------------------------------------------------------------
def _full_range(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return -np.inf, np.inf
    if dtype.kind == "b":
        return 0, 1
    info = np.iinfo(canonical_dtype(dtype) if dtype.kind in "iu" else dtype)
    return info.min, info.max


def _box(low, high, shape, dtype) -> spaces.Box:
    """A jaxenvs Box of jaxenvs' dtype for ``dtype``; integer bounds clipped into its range."""
    dtype_in = np.dtype(dtype)
    out = canonical_dtype(dtype_in)
    low = np.broadcast_to(np.asarray(low, np.float64), tuple(shape))
    high = np.broadcast_to(np.asarray(high, np.float64), tuple(shape))
    if out.kind != "f":
        info = np.iinfo(out)
        low, high = np.clip(low, info.min, info.max), np.clip(high, info.min, info.max)
    return spaces.Box(low, high, tuple(int(d) for d in shape), out)


def _leaf_space(x) -> spaces.Box:
    """The widest Box for an array (or shape struct) ``x`` (bool: ``[0, 1]`` uint8)."""
    low, high = _full_range(x.dtype)
    return _box(low, high, x.shape, x.dtype)


def _tree_space(tree) -> spaces.Space:
    """A space shaped like the pytree ``tree`` of arrays (dicts stay Dicts, tuples Tuples)."""
    if isinstance(tree, dict):
        return spaces.Dict({k: _tree_space(v) for k, v in tree.items()})
    if isinstance(tree, (tuple, list)):
        return spaces.Tuple([_tree_space(v) for v in tree])
    return _leaf_space(tree)


def to_space(space: Any) -> spaces.Space:
    """The `jaxenvs.spaces` space of another library's space or spec, by duck typing.

    Accepted: jaxenvs spaces (returned as they are); gymnax spaces; Gymnasium spaces; Jumanji and
    dm_env specs (``DiscreteArray`` -> Discrete, ``MultiDiscreteArray`` -> MultiDiscrete,
    ``BoundedArray`` -> Box of its bounds, ``Array`` -> the widest Box of its dtype, a structured
    ``Spec`` -> Dict); Navix spaces (``Discrete`` of shape ``()`` -> Discrete, others -> Box of
    ``minimum``/``maximum``); dicts and tuples of these. Box dtypes become jaxenvs' (floats float32,
    bool uint8 in ``[0, 1]``, other integers int32). Anything else is a TypeError.
    """
    if isinstance(space, spaces.Space):
        return space
    module = type(space).__module__.split(".")[0]
    if module == "gymnax":
        return from_gymnax_space(space)
    if module == "gymnasium":
        return spaces.from_gymnasium(space)
    if isinstance(space, dict):
        return spaces.Dict({k: to_space(v) for k, v in space.items()})
    if isinstance(space, (tuple, list)):
        return spaces.Tuple([to_space(v) for v in space])
    specs = getattr(space, "_specs", None)  # a Jumanji structured Spec: its fields by name
    if isinstance(specs, dict) and specs:
        return spaces.Dict({k: to_space(v) for k, v in specs.items()})
    if hasattr(space, "num_values"):  # Jumanji / dm_env DiscreteArray, Jumanji MultiDiscreteArray
        n = np.asarray(space.num_values)
        return spaces.Discrete(int(n)) if n.ndim == 0 else spaces.MultiDiscrete(n.astype(np.int64).tolist())
    if _has(space, "shape", "dtype"):
        shape = tuple(space.shape)
        if hasattr(space, "n") and shape == () and np.dtype(space.dtype).kind in "iu":
            if _has(space, "minimum", "maximum"):  # Navix Discrete (its n is computed with jnp)
                low = int(np.asarray(space.minimum))
                return spaces.Discrete(int(np.asarray(space.maximum)) - low + 1, start=low)
            return spaces.Discrete(int(np.asarray(space.n)))  # a gymnax-like Discrete
        if _has(space, "minimum", "maximum"):
            return _box(space.minimum, space.maximum, shape, space.dtype)
        if _has(space, "low", "high"):
            return _box(space.low, space.high, shape, space.dtype)
        return _leaf_space(space)  # a dm_env / Jumanji Array: unbounded
    raise TypeError(
        f"cannot convert the space {space!r} ({type(space).__module__}.{type(space).__qualname__}); accepted: jaxenvs, "
        "gymnax and Gymnasium spaces, Jumanji/dm_env specs, Navix spaces, dicts and tuples of them. Pass "
        "observation_space=/action_space= to from_functional"
    )


def _declared(env, names, params):
    """The first of ``env``'s attributes ``names`` that exists, called with ``params`` (or without
    arguments) where it is a method; None if none exists."""
    for name in names:
        if not hasattr(env, name):
            continue
        value = getattr(env, name)
        if callable(value) and not isinstance(value, type):
            try:
                value = value(params) if params is not None else value()
            except TypeError:
                value = value(None)
        return value
    return None


def _as_dict(obs):
    """A NamedTuple or flax/chex dataclass observation as a dict; other trees as they are."""
    if hasattr(obs, "_asdict"):
        return dict(obs._asdict())
    if dataclasses.is_dataclass(obs) and not isinstance(obs, type):
        return {f.name: getattr(obs, f.name) for f in dataclasses.fields(obs)}
    return obs


class FunctionalEnv(Environment):
    """What the adapted styles share: the third-party env (``inner``), its params, the observation
    cast to its space's dtypes and the state to reset's dtypes. Subclasses implement ``_reset``
    and ``_step`` in the library's own terms."""

    style = "functional"

    def __init__(self, inner: Any, params: Any = None, observation_space=None, action_space=None):
        self.inner = inner
        self._params = params
        self._given = (observation_space, action_space)  # in the library's terms (to_space converts them)
        self._obs_space = self._act_space = None

    @property
    def default_params(self):
        return super().default_params if self._params is None else self._params

    @property
    def name(self) -> str:
        return f"{self.style}:{type(self.inner).__name__}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {type(self.inner).__module__}.{type(self.inner).__qualname__}>"

    # spaces: the override, else the library's declaration for the params given at construction
    # (read once, on the host: a space's shape cannot depend on traced params)
    def observation_space(self, params=None) -> spaces.Space:
        if self._obs_space is None:
            given = self._given[0]
            self._obs_space = self._observation_space(self._params) if given is None else self._adapt_space(to_space(given))
        return self._obs_space

    def action_space(self, params=None) -> spaces.Space:
        if self._act_space is None:
            given = self._given[1]
            self._act_space = self._action_space(self._params) if given is None else to_space(given)
        return self._act_space

    def _adapt_space(self, space: spaces.Space) -> spaces.Space:
        """The space of the adapted observation, given the library's (as it is, by default)."""
        return space

    def _inner_params(self, params):
        return None if self._params is None else params

    @functools.lru_cache(maxsize=None)  # noqa: B019 -- one adapter, a handful of calls at trace time
    def _reset_shapes(self):
        return jax.eval_shape(lambda k: self._reset(k, self._params), jax.random.key(0))

    def _cast_obs(self, obs):
        return jax.tree.map(lambda x, d: jnp.asarray(x, dtype=d), obs, space_dtypes(self.observation_space()))

    def reset_env(self, key, params):
        obs, state = self._reset(key, self._inner_params(params))
        return self._cast_obs(obs), cast_like(state, self._reset_shapes()[1])

    def step_env(self, key, state, action, params):
        obs, state, reward, terminated, truncated, info = self._step(key, state, action, self._inner_params(params))
        return (
            self._cast_obs(obs),
            cast_like(state, self._reset_shapes()[1]),
            jnp.asarray(reward, jnp.float32),
            jnp.asarray(terminated, bool).reshape(()),
            jnp.asarray(truncated, bool).reshape(()),
            {k: jnp.asarray(v) for k, v in dict(info).items()},
        )


# ---- Pgx ------------------------------------------------------------------------------------------
@struct.dataclass
class SeatedState:
    """A Pgx state and the Pgx player of each seat (int32[N]; seat 0 moved first)."""

    inner: Any
    seats: jax.Array


class PgxEnv(FunctionalEnv):
    """A Pgx environment as a jaxenvs game (see the module docstring: seats, masks, flags)."""

    style = "pgx"

    def __init__(self, inner, **kwargs):
        super().__init__(inner, **kwargs)
        self.n = int(inner.num_players)
        self.num_actions = int(inner.num_actions)

    @functools.cached_property
    def traits(self) -> Traits:
        key = jax.random.key(0)
        state = jax.eval_shape(self.inner.init, key)
        uses = key_is_used(lambda k, st: self.inner.step(st, jnp.zeros((), jnp.int32), k), key, state)
        return Traits(num_agents=self.n, dynamics="sequential" if self.n > 1 else "simultaneous",
                      chance="stochastic" if uses else "deterministic", action_style="full_action_set")

    def _seat_of(self, state: SeatedState):
        return jnp.argmax(state.seats == state.inner.current_player).astype(jnp.int32)

    def _mask(self, state: SeatedState):
        s = state.inner
        live = ~(jnp.asarray(s.terminated, bool) | jnp.asarray(s.truncated, bool))
        rows = (jnp.arange(self.n) == self._seat_of(state)) & live
        mask = rows[:, None] & jnp.asarray(s.legal_action_mask, bool)[None, :]
        return mask if self.n > 1 else mask[0]

    def _obs(self, state: SeatedState):
        if self.n > 1:
            seen = jax.vmap(lambda p: self.inner.observe(state.inner, p))(state.seats)
        else:
            seen = state.inner.observation
        return {"observation": seen, "action_mask": self._mask(state).astype(jnp.uint8)}

    def _reset(self, key, params):
        s = self.inner.init(key)
        first = jnp.asarray(s.current_player, jnp.int32)
        state = SeatedState(s, ((first + jnp.arange(self.n)) % self.n).astype(jnp.int32))
        return self._obs(state), state

    def _step(self, key, state, action, params):
        seat = self._seat_of(state)
        a = jnp.asarray(action[seat] if self.n > 1 else action, jnp.int32)
        illegal = ~jnp.asarray(state.inner.legal_action_mask, bool)[a]
        s = self.inner.step(state.inner, a, key)
        nxt = SeatedState(s, state.seats)
        rewards = jnp.asarray(s.rewards, jnp.float32)[state.seats]
        return (self._obs(nxt), nxt, rewards if self.n > 1 else rewards[0], s.terminated, s.truncated,
                {"illegal_action": illegal})

    def legal_action_mask(self, state, params=None):
        return self._mask(state)

    def _observation_space(self, params):
        obs = jax.eval_shape(self.inner.init, jax.random.key(0)).observation
        mask = spaces.Box(0, 1, (self.num_actions,), np.uint8)
        return spaces.Dict({"observation": _leaf_space(obs), "action_mask": mask})

    def _action_space(self, params):
        return spaces.Discrete(self.num_actions)


class PgxGame(PgxEnv):
    """A Pgx game of two or more players: `PgxEnv` with the mover's seat (``current_player``)."""

    def current_player(self, state, params=None):
        return self._seat_of(state)


# ---- Brax / MuJoCo Playground ---------------------------------------------------------------------
class BraxEnv(FunctionalEnv):
    """A Brax or MuJoCo Playground environment (``reset(key) -> State``, ``step(state, action) ->
    State``): obs ``state.obs``, reward ``state.reward``, flags from ``done`` and
    ``info["truncation"]``, ``info`` = ``state.metrics``. Pass the env without Brax's
    ``AutoResetWrapper`` (jaxenvs resets episodes itself)."""

    style = "brax"
    traits = Traits(num_agents=1, chance="deterministic")

    def _reset(self, key, params):
        s = self.inner.reset(key)
        return s.obs, s

    def _step(self, key, state, action, params):
        s = self.inner.step(state, action)
        done = jnp.asarray(s.done) > 0
        trunc = jnp.asarray(dict(s.info).get("truncation", jnp.zeros(())), jnp.float32) > 0
        return s.obs, s, s.reward, done & ~trunc, trunc, dict(getattr(s, "metrics", {}) or {})

    def _observation_space(self, params):
        return _tree_space(jax.eval_shape(self.inner.reset, jax.random.key(0)).obs)

    def _action_space(self, params):
        size = self.inner.action_size
        return spaces.Box(-1.0, 1.0, (int(size),), np.float32)


# ---- TimeStep (dm_env, Jumanji, XLand-MiniGrid, Navix) ----------------------------------------------
@struct.dataclass
class TimeStepState:
    """The library's state (None where its TimeStep carries it) and its latest TimeStep."""

    inner: Any
    timestep: Any


def _is_timestep(x) -> bool:
    return _has(x, "step_type", "reward", "observation")


class TimeStepEnv(FunctionalEnv):
    """An env whose ``reset``/``step`` return a dm_env-style TimeStep (see the module docstring).

    Call forms, read off the signatures: ``reset(key)`` or ``reset(params, key)``/``reset(key,
    params)`` (a parameter named ``params``), returning a TimeStep or ``(state, TimeStep)``;
    ``step(state, action)``, ``step(timestep, action)`` or with ``params`` likewise. Build it with
    `from_functional`, which picks `MaskedTimeStepEnv` for an observation with an action mask."""

    style = "timestep"
    traits = Traits(num_agents=1, chance="deterministic")

    def __init__(self, inner, params=None, **kwargs):
        if params is None and "params" in _parameter_names(inner.reset):
            params = getattr(inner, "default_params", None)
            if params is None:
                raise TypeError(f"{type(inner).__qualname__}.reset takes params: pass from_functional(env, params)")
        super().__init__(inner, params=params, **kwargs)
        out = jax.eval_shape(lambda k: self._call_reset(k, self._params), jax.random.key(0))
        pair = isinstance(out, tuple) and len(out) == 2 and _is_timestep(out[1])
        if not (pair or _is_timestep(out)):
            raise TypeError(
                f"from_functional: {type(inner).__qualname__}.reset returned {type(out).__name__}, neither a TimeStep "
                f"(step_type, reward, observation) nor (state, TimeStep); {_ACCEPTED}"
            )
        self._pair = pair
        ts = out[1] if pair else out
        if len(ts.reward.shape) != 0:
            raise TypeError(f"from_functional adapts single-agent TimeStep envs; {type(inner).__qualname__}'s reward "
                            f"has shape {tuple(ts.reward.shape)}")
        self._has_discount = hasattr(ts, "discount")
        fields = _as_dict(ts.observation)
        act = self.action_space()
        self.masked = (isinstance(fields, dict) and "action_mask" in fields and isinstance(act, spaces.Discrete)
                       and tuple(fields["action_mask"].shape) == (act.n,))

    _mask_split = False  # MaskedTimeStepEnv: the observation's action_mask goes beside the rest

    def _call(self, fn, params, *args):
        names = _parameter_names(fn)
        if "params" in names:
            args = list(args)
            args.insert(names.index("params"), params)
        return fn(*args)

    def _call_reset(self, key, params):
        return self._call(self.inner.reset, params, key)

    def _obs(self, ts):
        obs = _as_dict(ts.observation)
        if not self._mask_split:
            return obs
        rest = {k: v for k, v in obs.items() if k != "action_mask"}
        rest = next(iter(rest.values())) if len(rest) == 1 else rest
        return {"observation": rest, "action_mask": jnp.asarray(obs["action_mask"], jnp.uint8)}

    def _reset(self, key, params):
        out = self._call_reset(key, params)
        state = TimeStepState(*out) if self._pair else TimeStepState(None, out)
        return self._obs(state.timestep), state

    def _flags(self, ts):
        kind = jnp.asarray(ts.step_type)
        if self._has_discount:
            last = kind == _LAST
            zero = jnp.asarray(ts.discount) == 0
            return last & zero, last & ~zero
        return kind == _LAST, kind == _NAVIX_TRUNCATION

    def _info(self, state, action) -> dict:
        return {}

    def _step(self, key, state, action, params):
        carried = state.inner if self._pair else state.timestep
        out = self._call(self.inner.step, params, carried, action)
        nxt = TimeStepState(*out) if self._pair else TimeStepState(None, out)
        ts = nxt.timestep
        terminated, truncated = self._flags(ts)
        return self._obs(ts), nxt, ts.reward, terminated, truncated, self._info(state, action)

    def _observation_space(self, params):
        declared = _declared(self.inner, ("observation_spec", "observation_space"), self._params)
        if declared is None:  # e.g. XLand-MiniGrid: observation_shape(params) only
            ts = jax.eval_shape(lambda k: self._call_reset(k, self._params), jax.random.key(0))
            return _tree_space(self._obs((ts[1] if self._pair else ts)))
        return self._adapt_space(to_space(declared))

    def _adapt_space(self, space):
        if self._mask_split and isinstance(space, spaces.Dict) and "action_mask" in space.spaces:
            rest = {k: v for k, v in space.spaces.items() if k != "action_mask"}
            rest = next(iter(rest.values())) if len(rest) == 1 else spaces.Dict(rest)
            mask = space.spaces["action_mask"]
            return spaces.Dict({"observation": rest, "action_mask": spaces.Box(0, 1, mask.shape, np.uint8)})
        return space

    def _action_space(self, params):
        declared = _declared(self.inner, ("action_spec", "action_space"), self._params)
        if declared is None and hasattr(self.inner, "num_actions"):
            declared = spaces.Discrete(int(_declared(self.inner, ("num_actions",), self._params)))
        if declared is None:
            raise TypeError(f"{type(self.inner).__qualname__} declares no action_spec, action_space or num_actions: pass "
                            "from_functional(env, action_space=...)")
        return to_space(declared)


class MaskedTimeStepEnv(TimeStepEnv):
    """A `TimeStepEnv` whose observation carries ``action_mask`` over its Discrete actions
    (Jumanji): ``action_style="full_action_set"``, ``obs = {"observation", "action_mask"}``,
    ``info["illegal_action"]`` (the action was not in the mask; what follows is the library's
    own rule, e.g. Jumanji's Game2048 leaves the board as it was)."""

    traits = Traits(num_agents=1, chance="deterministic", action_style="full_action_set")
    _mask_split = True

    def legal_action_mask(self, state, params=None):
        return jnp.asarray(_as_dict(state.timestep.observation)["action_mask"], bool)

    def _info(self, state, action) -> dict:
        return {"illegal_action": ~self.legal_action_mask(state)[jnp.asarray(action, jnp.int32)]}


def _parameter_names(fn) -> list:
    try:
        return [p for p in inspect.signature(fn).parameters if p not in ("self", "cache")]
    except (TypeError, ValueError):
        return []


# ---- overrides and the entry point ------------------------------------------------------------------
class _Declared(Wrapper):
    """``env`` with declared traits (`from_functional`'s ``traits=``) and, for a gymnax-style env,
    overridden spaces."""

    def __init__(self, env, traits: dict, observation_space=None, action_space=None):
        super().__init__(env)
        self._traits = dataclasses.replace(env.traits, **traits)
        self._obs = None if observation_space is None else to_space(observation_space)
        self._act = None if action_space is None else to_space(action_space)

    @property
    def traits(self):
        return self._traits

    def observation_space(self, params=None):
        return self._obs if self._obs is not None else self.env.observation_space(params)

    def action_space(self, params=None):
        return self._act if self._act is not None else self.env.action_space(params)


def from_functional(
    env: Any,
    params: Any = None,
    *,
    style: str | None = None,
    observation_space: Any = None,
    action_space: Any = None,
    traits: dict | None = None,
    max_episode_steps: int | None = None,
) -> Environment:
    """A jaxenvs `jaxenvs.core.Environment` made from a third-party functional env.

    ``env`` is a Pgx, gymnax-style, Brax/MuJoCo Playground or Jumanji/dm_env-style (TimeStep)
    environment (`detect_style`; ``style=`` forces one of `STYLES`), or a jaxenvs Environment
    (returned as it is when no other argument is given). ``params``: the env's params where its
    functions take them (gymnax, XLand-MiniGrid); default ``env.default_params``.
    ``observation_space``/``action_space`` (any space `to_space` accepts) replace the declared
    ones; ``traits`` (a dict of `jaxenvs.core.Traits` fields) declares what the adapter cannot
    see; ``max_episode_steps`` adds a `jaxenvs.wrappers.TimeLimit`. See the module docstring for
    how flags, masks, seats and dtypes are mapped.

    Raises TypeError naming what ``env`` has and what is accepted when no style fits, ValueError
    for an unknown ``style`` or trait.
    """
    if isinstance(env, Environment):
        if style is not None or params is not None:
            raise TypeError("from_functional got a jaxenvs Environment: style= and params= apply to third-party envs "
                            "(use jaxenvs.wrappers.WithParams for other params)")
        out = env
    else:
        if isinstance(env, type):
            raise TypeError(f"from_functional takes an environment instance, got the class {env.__qualname__}")
        found = detect_style(env) if style is None else style
        if found not in STYLES:
            raise ValueError(f"from_functional style must be one of {STYLES}, got {style!r}")
        overrides = {"observation_space": observation_space, "action_space": action_space}
        if found == "gymnax":
            out = GymnaxEnv(env)
            if params is not None:
                out = WithParams(out, params)
        elif params is not None and found != "timestep":
            raise TypeError(f"from_functional: a {found}-style env takes no params (its functions have none)")
        elif found == "pgx":
            out = (PgxGame if int(env.num_players) > 1 else PgxEnv)(env, **overrides)
        elif found == "brax":
            out = BraxEnv(env, **overrides)
        else:
            out = TimeStepEnv(env, params=params, **overrides)
            if out.masked:
                out = MaskedTimeStepEnv(env, params=params, **overrides)
        if found != "gymnax":
            observation_space = action_space = None  # applied by the adapter itself
    if traits or observation_space is not None or action_space is not None:
        bad = sorted(set(traits or {}) - {f.name for f in dataclasses.fields(Traits)})
        if bad:
            raise ValueError(f"from_functional traits: unknown field(s) {bad}; the fields are "
                             f"{[f.name for f in dataclasses.fields(Traits)]}")
        out = _Declared(out, dict(traits or {}), observation_space, action_space)
    if max_episode_steps is not None:
        out = TimeLimit(out, max_episode_steps)
    return out
