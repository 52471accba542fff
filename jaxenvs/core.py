"""The functional environment API.

An `Environment` is a stateless object; everything that changes lives in a pytree ``state``
and everything tunable that does not change array shapes lives in a pytree ``params``::

    obs, state = env.reset(key, params)
    obs, state, reward, terminated, truncated, info = env.step(key, state, action, params)

Both are pure, so they work under ``jax.jit``, ``jax.vmap`` and inside ``jax.lax.scan``.
Subclasses implement ``reset_env``, ``step_env``, ``observation_space``, ``action_space``,
``default_params`` and ``validate_params``; the public ``reset``/``step`` are where bad input is
caught, once, before the dynamics run:

* ``params=None`` becomes ``default_params`` (here, not in each environment);
* params of another class raise `ParamsError` naming the expected class; concrete params
  (not traced: eager calls, or constants closed over by ``jit``) go through ``validate_params``;
  traced params are the caller's responsibility, or `jaxenvs.wrappers.CheckedActions`'s;
* the key must be a ``jax.random.key(seed)`` or a ``jax.random.PRNGKey(seed)`` (`PRNGKeyError`
  is a ``TypeError``);
* the state's tree structure, leaf shapes and dtypes must be those ``reset`` returns
  (`StateError`; a leading batch axis is reported as a missing ``jax.vmap``);
* the action's shape and dtype must fit the action space (`ActionError`); integer actions
  wider than int32 are clipped into the int32 range in their own dtype before narrowing.

All of it runs on the host or when a function is traced: a jitted ``step`` pays nothing per call.

Multi-agent environments put agents on a leading axis of every observation leaf, of ``action``
and of ``reward`` (float32[num_agents]); ``terminated``/``truncated`` are episode-level bools.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import threading
import types
import weakref
from typing import Any, Callable, Literal, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jaxenvs import struct

from jaxenvs import spaces

__all__ = [
    "Environment",
    "Traits",
    "Obs",
    "StepResult",
    "ActionError",
    "StateError",
    "ParamsError",
    "PRNGKeyError",
    "check_key",
    "is_prng_key",
    "check_params",
    "is_concrete",
    "require_param",
    "GAME_HOOKS",
]

Obs = Any
StepResult = tuple  # (obs, state, reward, terminated, truncated, info)

GAME_HOOKS = ("ACTION_NAMES", "MOVE_KEY", "MAX_PLIES", "OPPONENTS", "LOOKAHEAD", "LOOKAHEAD_BYTES", "state_from_observation",
              "move_at", "observer_view")
"""The game hooks `Environment` declares (its docstring says what each is), which wrappers forward."""


@struct.dataclass
class _NoParams:
    """The params of an environment with nothing to tune (the base class's ``default_params``)."""


class ActionError(TypeError):
    """An action whose shape or dtype does not fit the environment's action space."""


class StateError(TypeError):
    """A state whose tree structure, shapes or dtypes differ from what the environment's reset
    returns (another environment's state, a plain dict, a batch of states without ``jax.vmap``)."""


class ParamsError(TypeError):
    """Params of the wrong class for the environment (``validate_params`` raises ValueError for
    params of the right class with values out of range)."""


PRNGKeyError = spaces.PRNGKeyError
check_key = spaces.check_key
is_prng_key = spaces.is_prng_key


def is_concrete(tree: Any) -> bool:
    """Whether no leaf of ``tree`` is a JAX tracer (so its values can be read on the host)."""
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(tree))


def check_params(env: "Environment", params: Any) -> Any:
    """``params`` made ready for ``env``: ``None`` becomes ``env.default_params``; params of
    another class raise `ParamsError` naming the expected class; concrete params (no leaf
    is a tracer) go through ``env.validate_params`` (a ValueError naming the field and its range).

    Host-side and at trace time only: traced params pass unchecked (``make(..., checked=True)``
    checks them inside ``jit``). ``VectorEnv``, ``rollout`` and the adapters call it where params
    enter; stacked params (a leading batch axis, for ``vmap`` over params) are validated as a whole.
    """
    default = env.default_params
    if params is None:
        return default
    if default is not None and not isinstance(params, type(default)):
        raise ParamsError(
            f"{env.name} expects params of class {type(default).__module__}.{type(default).__qualname__} "
            f"(e.g. env.default_params.replace(...)), got {type(params).__module__}.{type(params).__qualname__}"
        )
    if is_concrete(params):
        env.validate_params(params)
    return params


def require_param(
    owner: str,
    name: str,
    value: Any,
    *,
    integer: bool = False,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
) -> None:
    """Raise ValueError unless ``value`` (a scalar or an array of them, e.g. stacked params) is a
    finite number, an integer when ``integer``, within ``[low, high]`` (``(low, high]`` when
    ``low_open``). For ``validate_params``: the message names ``owner``, ``name`` and the range."""
    if integer and low is not None and high is not None:
        what = f"an integer in [{low:g}, {high:g}]"
    elif integer:
        what = "an integer" + (f" >= {low:g}" if low is not None else "") + (f" <= {high:g}" if high is not None else "")
    elif (low, high) == (0, 1) and not low_open:
        what = "a probability in [0, 1]"
    elif low is not None and high is not None:
        what = f"a finite number in {'(' if low_open else '['}{low:g}, {high:g}]"
    else:
        what = "a finite number" + (f" {'>' if low_open else '>='} {low:g}" if low is not None else "")
        what += f" <= {high:g}" if high is not None else ""
    try:
        a = np.asarray(value)
        ok = not isinstance(value, bool) and a.dtype != bool and a.dtype.kind in ("iu" if integer else "iuf")
        a = a.astype(np.float64) if ok else a
        ok = ok and bool(np.all(np.isfinite(a)))
        ok = ok and (low is None or bool(np.all(a > low if low_open else a >= low)))
        ok = ok and (high is None or bool(np.all(a <= high)))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{owner} {name} must be {what}, got {value!r}")


@dataclasses.dataclass(frozen=True)
class Traits:
    """Static description of an environment (after ReinforcementLearning.jl's traits).

    A trait is a promise the code keeps (`jaxenvs.check_env` enforces each one):

    * ``action_style`` is ``"minimal"`` (every action of the space is legal in every state) or
      ``"full_action_set"`` (some actions are illegal in some states): the env then defines
      `Environment.legal_action_mask` and its observation is a dict holding ``"observation"`` and
      ``"action_mask"`` (uint8, agent axis first when multi-agent), the mask of the returned state;
    * ``dynamics="sequential"`` (turn-based): the env defines `Environment.current_player`; the
      action keeps its agent axis and only the current player's row is read;
    * ``chance`` is ``"deterministic"`` (``step`` ignores its key), ``"stochastic"`` (``step``
      draws randomness internally) or ``"explicit_stochastic"`` (OpenSpiel's chance player: the env
      defines `Environment.is_chance_node`, `Environment.chance_outcomes` and
      `Environment.apply_chance`, and ``step`` at a chance node draws the outcome with its key).
    """

    num_agents: int = 1
    dynamics: Literal["simultaneous", "sequential"] = "simultaneous"
    chance: Literal["deterministic", "stochastic", "explicit_stochastic"] = "stochastic"
    information: Literal["perfect", "imperfect"] = "perfect"
    utility: Literal["general_sum", "zero_sum", "identical"] = "general_sum"
    reward_style: Literal["step", "terminal"] = "step"
    action_style: Literal["minimal", "full_action_set"] = "minimal"

    _ALLOWED = {
        "dynamics": ("simultaneous", "sequential"),
        "chance": ("deterministic", "stochastic", "explicit_stochastic"),
        "information": ("perfect", "imperfect"),
        "utility": ("general_sum", "zero_sum", "identical"),
        "reward_style": ("step", "terminal"),
        "action_style": ("minimal", "full_action_set"),
    }

    def __post_init__(self):
        if not isinstance(self.num_agents, int) or self.num_agents < 1:
            raise ValueError(f"Traits.num_agents must be an int >= 1, got {self.num_agents!r}")
        for name, allowed in self._ALLOWED.items():
            v = getattr(self, name)
            if v not in allowed:
                raise ValueError(f"Traits.{name}={v!r} is not one of {allowed}")

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


# the methods whose ``params=None`` the base class turns into ``self.default_params``, once
_PARAMS_DEFAULTED = ("observation_space", "action_space", "render", "render_text")


def _default_params_for(fn):
    """``fn`` (a method with a ``params`` parameter) called with ``params=self.default_params``
    where the caller gave None or left it out."""
    sig = inspect.signature(fn)
    index = list(sig.parameters).index("params")

    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        if len(args) >= index:  # params given positionally (args excludes self: index - 1 is params)
            if args[index - 1] is None:
                args = args[: index - 1] + (self.default_params,) + args[index:]
        elif kwargs.get("params") is None:
            kwargs["params"] = self.default_params
        return fn(self, *args, **kwargs)

    method._defaults_params = True
    return method


class Environment:
    """Base class of all jaxenvs environments (and, through `jaxenvs.wrappers.Wrapper`,
    of all wrappers).

    Class attributes a subclass may set: ``traits`` (`Traits`), ``render_fps``, and for
    multi-agent environments ``num_agents`` (the traits' ``num_agents`` by default).

    Game hooks (`GAME_HOOKS`): what a game declares for the games wing (`jaxenvs.games`), the
    command lines and the person's screens, each declared here with its default (``None`` or
    empty: the game has no such hook) and forwarded by every `jaxenvs.wrappers.Wrapper`:

    * ``ACTION_NAMES``: tuple of one text per action, in action order (``jaxenvs describe``, the
      terminal seat's move names, the window's buttons; any env may set it);
    * ``MOVE_KEY``: text shown beside the board saying how the moves are numbered on it;
    * ``MAX_PLIES``: the plies of the longest game (matches, look-ahead and search stop there);
    * ``OPPONENTS``: ``{name: (policy, meaning)}``, the game's named opponents beside ``random``
      (`jaxenvs.games.named_opponents`): ``policy(key, obs) -> action`` on one agent's observation;
    * ``LOOKAHEAD``: a fast ``values(obs, depth) -> float32[n]`` giving the same values as the
      generic `jaxenvs.games.search.lookahead_values` (declare it as a ``staticmethod``), with
      ``LOOKAHEAD_BYTES``, the bytes it keeps per line of play (the memory guard's figure);
    * ``state_from_observation(obs, params=None)``: the state an observation shows (games of
      perfect information; what look-ahead and tree search start from);
    * ``move_at(x, y)``: int32 move under the picture's pixel ``(x, y)`` (-1 for none), broadcast
      over arrays (clicks in the window);
    * ``observer_view(state, player, params=None)``: the state as seat ``player`` may see it
      (games of imperfect information: what a person's screen shows).

    ``params=None`` means ``default_params`` everywhere, filled here once: in ``reset``/``step``
    and, for every subclass, in ``observation_space``, ``action_space``, ``render`` and
    ``render_text`` (a subclass implements them for concrete params only).
    """

    traits: Traits = Traits()
    render_fps: int = 4
    spec = None  # set by jaxenvs.make

    # game hooks (see the class docstring); None or empty: the game has no such hook
    ACTION_NAMES: tuple[str, ...] | None = None
    MOVE_KEY: str | None = None
    MAX_PLIES: int | None = None
    OPPONENTS: Mapping[str, tuple[Callable[[jax.Array, Any], jax.Array], str]] = types.MappingProxyType({})
    LOOKAHEAD: Callable[[Any, int], jax.Array] | None = None
    LOOKAHEAD_BYTES: int | None = None
    state_from_observation: Callable[..., Any] | None = None
    move_at: Callable[[Any, Any], Any] | None = None
    observer_view: Callable[..., Any] | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in _PARAMS_DEFAULTED:
            fn = cls.__dict__.get(name)
            if callable(fn) and not getattr(fn, "_defaults_params", False):
                try:
                    takes_params = "params" in inspect.signature(fn).parameters
                except (TypeError, ValueError):
                    takes_params = False
                if takes_params:
                    setattr(cls, name, _default_params_for(fn))

    # ---- to implement -------------------------------------------------------------------------
    @property
    def default_params(self) -> Any:
        """The params used when `reset`/`step` get ``params=None``: a pytree dataclass (e.g.
        `jaxenvs.struct.dataclass`) of values that do not change shapes, so `jax.vmap` over params
        works. Override it in an env that has params; the default is an empty params object."""
        return _NoParams()

    def reset_env(self, key: jax.Array, params: Any) -> tuple[Obs, Any]:
        """Implement this: the start of an episode, ``(obs, state)``, for a typed PRNG ``key`` and
        concrete or traced ``params`` (never None here: `reset` fills them in and checks them).
        Pure and jittable: no Python control flow on traced values, no host callbacks. ``state``
        is a pytree whose leaves keep their dtypes and shapes in `step_env`."""
        raise NotImplementedError

    def step_env(self, key: jax.Array, state: Any, action: Any, params: Any) -> StepResult:
        """Implement this: one transition, ``(obs, state, reward, terminated, truncated, info)``.
        ``reward`` is float32 (float32[num_agents] for multi-agent envs), the flags bool scalars;
        ``terminated`` means the MDP reached a terminal state (a time limit belongs to
        `jaxenvs.wrappers.TimeLimit`, which sets ``truncated``); ``info`` is a flat dict of arrays
        with the same keys every step. `step` checks the state's and action's structure at trace
        time and calls this."""
        raise NotImplementedError

    def observation_space(self, params: Any = None) -> spaces.Space:
        """Implement this: the `jaxenvs.spaces` space of ONE agent's observation (multi-agent
        observations add a leading agent axis). ``params=None`` means `default_params`."""
        raise NotImplementedError

    def action_space(self, params: Any = None) -> spaces.Space:
        """Implement this: the `jaxenvs.spaces` space of ONE agent's action (all agents share it;
        `step` takes a leading agent axis for multi-agent envs). ``params=None`` means
        `default_params`."""
        raise NotImplementedError

    def render(self, state: Any, params: Any = None) -> jax.Array:
        """uint8[H, W, 3] RGB frame of ``state``; jittable and vmappable."""
        raise NotImplementedError(f"{type(self).__name__} has no render()")

    def render_text(self, state: Any, params: Any = None) -> str:
        """A short text picture of ``state`` for terminals (host-side, not jittable)."""
        raise NotImplementedError(f"{type(self).__name__} has no render_text()")

    def validate_params(self, params: Any) -> None:
        """Raise ValueError for params that make no sense (host-side, on concrete values).

        Called by ``make``, by ``reset``/``step`` on concrete params, and by `check_params`
        wherever params enter. Use `require_param`; it accepts stacked params too.
        """

    def state_fits_params(self, state: Any, params: Any) -> jax.Array:
        """bool[]: ``state`` is one these ``params`` can produce (jittable; read by checked mode only).

        A state made with other params (a GridWorld of ``size=8`` stepped with ``size=5``) has the
        right shapes and dtypes, so no trace-time check can see it; an env whose params bound its
        state says so here, and ``make(..., checked=True)`` refuses such a state at the step it
        enters. The default accepts every state.
        """
        return jnp.ones((), bool)

    # ---- public API ---------------------------------------------------------------------------
    def reset(self, key: jax.Array, params: Any = None) -> tuple[Obs, Any]:
        """Initial ``(obs, state)`` drawn with ``key``.

        ``params=None`` means ``default_params``. Raises `ParamsError`, ValueError (from
        ``validate_params``, for concrete params) or a TypeError for a key that is not a JAX PRNG
        key, when called or traced.
        """
        params = check_params(self, params)
        _check_params_shapes(self, params, "reset")
        check_key(key, f"{self.name}.reset")
        return self.reset_env(key, params)

    def step(self, key: jax.Array, state: Any, action: Any, params: Any = None) -> StepResult:
        """``(obs, state, reward, terminated, truncated, info)`` after taking ``action``.

        Params, key, state and action are checked when the function is called eagerly or traced
        (never per step of a compiled program): see the module docstring. A mismatch raises
        `ParamsError`, `StateError`, `ActionError` or a TypeError for the key.
        Out-of-range values follow each environment's documented behaviour; use
        `jaxenvs.checked` to make them raise.

        Integer actions beyond int32 are clipped, not wrapped, when ``step`` sees them; ``jax.jit``
        converts host arguments at its boundary first (wrapping int64 into int32 while x64 is off),
        so pass int32 to a jitted step (`jaxenvs.checked` refuses such arguments).

        For multi-agent environments the action is ``(num_agents, ...)``; a batch of them under
        ``vmap`` is ``(num_envs, num_agents, ...)``. When ``num_envs == num_agents`` a transposed
        batch has the right shape and cannot be told apart: keep agents on the inner axis.
        """
        params = check_params(self, params)
        _check_params_shapes(self, params, "step")
        check_key(key, f"{self.name}.step")
        self._check_state_structure(key, state, params)
        action = self._check_action_structure(action, params)
        return self.step_env(key, state, action, params)

    # ---- turn-based games: legal actions, current player, explicit chance --------------------
    def legal_action_mask(self, state: Any, params: Any = None) -> jax.Array:
        """Legal actions in ``state``: bool[n] (single agent) or bool[num_agents, n] (agent axis
        first), for a `jaxenvs.spaces.Discrete` action space of ``n`` actions. Jittable, vmappable.

        All true for ``action_style="minimal"`` (this default). A ``"full_action_set"`` env
        overrides it; in a sequential game the rows of the agents not to move are all false, the
        mover's row has at least one true entry at every non-terminal decision state, and at a
        chance node every row is false. The observation's ``"action_mask"`` is this, as uint8.
        """
        if self.traits.action_style == "full_action_set":
            raise NotImplementedError(
                f"{self.name} declares action_style='full_action_set' but does not define legal_action_mask"
            )
        space = self.action_space(self.default_params if params is None else params)
        if not isinstance(space, spaces.Discrete):
            raise TypeError(f"{self.name}: legal_action_mask is defined for Discrete action spaces, not {space}")
        return jnp.ones(((self.num_agents,) if self.multi_agent else ()) + (space.n,), bool)

    def current_player(self, state: Any, params: Any = None) -> jax.Array:
        """int32[]: the agent to move in ``state``, always in ``[0, num_agents)`` (never negative: a
        negative index wraps silently in JAX). Jittable, vmappable.

        ``dynamics="sequential"`` envs override it (at a chance node and at a terminal state it is
        still in range; `is_chance_node` and the episode flags tell those apart). For simultaneous
        envs every agent moves at once and this default returns 0.
        """
        if self.traits.dynamics == "sequential":
            raise NotImplementedError(f"{self.name} declares dynamics='sequential' but does not define current_player")
        return jnp.zeros((), jnp.int32)

    def is_chance_node(self, state: Any, params: Any = None) -> jax.Array:
        """bool[]: whether chance moves next in ``state`` (``chance="explicit_stochastic"`` envs; the
        default, for the others, is always false). ``step`` at a chance node ignores the action,
        draws the outcome from `chance_outcomes` with its key and applies it."""
        if self.traits.chance == "explicit_stochastic":
            raise NotImplementedError(f"{self.name} declares chance='explicit_stochastic' but does not define is_chance_node")
        return jnp.zeros((), bool)

    def chance_outcomes(self, state: Any, params: Any = None) -> jax.Array:
        """float32[K]: the probability of each of the env's ``K`` chance outcomes at the chance node
        ``state`` (they sum to 1; impossible outcomes have probability 0). Explicit chance only."""
        raise NotImplementedError(f"{self.name} has no explicit chance (traits.chance={self.traits.chance!r})")

    def apply_chance(self, state: Any, outcome: jax.Array, params: Any = None) -> Any:
        """The state after chance picks ``outcome`` (int32[], an index into `chance_outcomes`) at the
        chance node ``state``; deterministic. Explicit chance only."""
        raise NotImplementedError(f"{self.name} has no explicit chance (traits.chance={self.traits.chance!r})")

    @property
    def num_agents(self) -> int:
        return self.traits.num_agents

    @property
    def agents(self) -> tuple[str, ...]:
        return tuple(str(i) for i in range(self.num_agents))

    @property
    def multi_agent(self) -> bool:
        return self.num_agents > 1

    @property
    def unwrapped(self) -> "Environment":
        return self

    @property
    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        t = self.traits
        return (
            f"<{self.name} agents={t.num_agents} {t.dynamics} {t.chance} {t.information}-information "
            f"{t.utility} {t.reward_style}-reward {t.action_style}>"
        )

    # ---- action checks ------------------------------------------------------------------------
    def batched_action_shape(self, params: Any = None) -> tuple[int, ...]:
        """Shape of the action ``step`` takes: ``(num_agents, *space.shape)`` for multi-agent."""
        space = self.action_space(params if params is not None else self.default_params)
        lead = (self.num_agents,) if self.multi_agent else ()
        return lead + tuple(space.shape)

    def _check_state_structure(self, key, state, params):
        """Raise `StateError` unless ``state`` has the tree structure, leaf shapes and dtypes
        of the state ``reset`` returns (``jax.eval_shape``, cached per params and key signature)."""
        expected = _reset_state_shape(self, key, params)
        got_def = jax.tree.structure(state)
        if got_def != expected[0]:
            raise StateError(
                f"{self.name}.step got a state of another structure than its reset returns: "
                f"{_type_name(state)} {got_def} instead of {_type_name(expected[2])} {expected[0]} "
                "(pass the state from this environment's reset or previous step)"
            )
        leaves = jax.tree_util.tree_leaves_with_path(state)
        for (path, x), (shape, dtype) in zip(leaves, expected[1]):
            got_shape, got_dtype = tuple(jnp.shape(x)), _canonical_dtype(x)
            if got_shape == shape and got_dtype == dtype:
                continue
            where = f"{self.name}.step: state{jax.tree_util.keystr(path)} has shape {got_shape} and dtype {got_dtype}"
            want = f"reset gives shape {shape} and dtype {dtype}"
            if got_shape[1:] == shape and len(got_shape) == len(shape) + 1:
                raise StateError(
                    f"{where}, {want}: a leading batch axis of {got_shape[0]}; did you forget jax.vmap? "
                    "(jax.vmap(env.step) or jaxenvs.VectorEnv steps a batch of states)"
                )
            raise StateError(f"{where}, {want} (a state of other params' shapes or of another environment?)")

    def _check_action_structure(self, action, params):
        # shapes and dtypes never depend on params, so the default params' space serves (the
        # given params may be traced, and a space is built from concrete values)
        space = self.action_space(self.default_params)
        if not isinstance(space, (spaces.Discrete, spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
            return action  # composite action spaces: checked by the environment itself
        expected = self.batched_action_shape()
        if isinstance(action, (bool, np.bool_)):
            raise ActionError(f"{self.name}: action {action!r} is a bool; expected {_describe(space, expected)}")
        try:
            a = _narrow_ints(action)
        except (TypeError, ValueError):
            a = None
        if a is None or not (jnp.issubdtype(a.dtype, jnp.number) or jnp.issubdtype(a.dtype, jnp.bool_)):
            raise ActionError(
                f"{self.name}: action {action!r} of type {type(action).__name__} is not a number or an array of "
                f"numbers; expected {_describe(space, expected)}"
            )
        if tuple(a.shape) != expected:
            raise ActionError(
                f"{self.name}: action has shape {tuple(a.shape)}, expected {expected} for {_describe(space, expected)}"
            )
        want_float = isinstance(space, spaces.Box) and space.dtype.kind == "f"
        if want_float:
            if not jnp.issubdtype(a.dtype, jnp.floating):
                raise ActionError(
                    f"{self.name}: action has dtype {a.dtype}, expected a float for {_describe(space, expected)}"
                )
            return a.astype(jnp.float32)
        if not jnp.issubdtype(a.dtype, jnp.integer):
            raise ActionError(
                f"{self.name}: action has dtype {a.dtype}, expected an integer for {_describe(space, expected)}"
            )
        return a.astype(jnp.int32)

    def action_in_space(self, action, params: Any = None) -> jax.Array:
        """Scalar bool: every agent's action lies in the action space (jittable)."""
        params = self.default_params if params is None else params
        space = self.action_space(params)
        if self.multi_agent:
            return jnp.all(jax.vmap(space.contains)(jnp.asarray(action)))
        return space.contains(action)


_INT32 = np.iinfo(np.int32)
# env -> {(params signature, key signature): (state treedef, [(shape, dtype)], example state)}
_STATE_SHAPES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _canonical_dtype(x) -> np.dtype:
    dtype = x.dtype if hasattr(x, "dtype") else np.result_type(x)
    try:
        return jax.dtypes.canonicalize_dtype(dtype)
    except (TypeError, ValueError):
        return dtype


def _signature(tree) -> tuple:
    leaves, treedef = jax.tree.flatten(tree)
    return treedef, tuple((tuple(jnp.shape(x)), str(_canonical_dtype(x))) for x in leaves)


# > 0 while core traces a function for its shapes only (jax.eval_shape): nothing runs, so
# checked mode's checks (jaxenvs.wrappers.checked) have nothing to check there
SHAPES_ONLY = threading.local()


def _reset_state_shape(env, key, params):
    cache = _STATE_SHAPES.setdefault(env, {})
    sig = (_signature(params), _signature(key))
    if sig not in cache:
        SHAPES_ONLY.depth = getattr(SHAPES_ONLY, "depth", 0) + 1
        try:
            shapes = jax.eval_shape(lambda k, p: env.reset_env(k, p)[1], key, params)
        finally:
            SHAPES_ONLY.depth -= 1
        leaves, treedef = jax.tree.flatten(shapes)
        cache[sig] = (treedef, [(tuple(x.shape), _canonical_dtype(x)) for x in leaves], shapes)
    return cache[sig]


def params_shape_mismatch(env: "Environment", params: Any, axis: int | None = None, size: int | None = None) -> str | None:
    """Why ``params`` do not have the leaf shapes of ``env.default_params`` (after removing
    ``axis``, which must have ``size`` entries, from every leaf), or None when they do. Shapes are
    known at trace time too, so this runs on the host or when a function is traced."""
    default = env.default_params
    if default is None or jax.tree.structure(default) != jax.tree.structure(params):
        return None  # another structure: ParamsError / the env's own checks speak to that
    for (path, d), p in zip(jax.tree_util.tree_leaves_with_path(default), jax.tree.leaves(params)):
        try:
            w, g = tuple(jnp.shape(d)), tuple(jnp.shape(p))
        except (TypeError, ValueError):
            continue
        if axis is not None:
            if len(g) <= axis or (size is not None and g[axis] != size):
                return f"params{jax.tree_util.keystr(path)} has shape {g}, which has no axis {axis} of size {size}"
            g = g[:axis] + g[axis + 1 :]
        if g != w:
            return f"params{jax.tree_util.keystr(path)} has shape {g}{' without the batch axis' if axis is not None else ''} where default_params has {w}"
    return None


def _check_params_shapes(env: "Environment", params: Any, method: str) -> None:
    why = params_shape_mismatch(env, params)
    if why is not None:
        raise ParamsError(
            f"{env.name}.{method}: {why}. A batch of params (one per environment) goes through "
            f"jax.vmap(env.{method}, in_axes=...) with the params' axis given, or jaxenvs.VectorEnv(env, n, params_axis=0)"
        )


def _type_name(tree) -> str:
    return type(tree).__name__


def _narrow_ints(action):
    """``action`` as a JAX array, integers wider than int32 clipped into int32's range first (in
    their own dtype, so that ``2**32 + 1`` becomes ``2**31 - 1``, not 1)."""
    if isinstance(action, int):
        return jnp.asarray(min(max(action, int(_INT32.min)), int(_INT32.max)), jnp.int32)
    dtype = getattr(action, "dtype", None)
    if dtype is None or not np.issubdtype(dtype, np.integer) or np.dtype(dtype) in (np.int32, np.int16, np.int8, np.uint8, np.uint16):
        return jnp.asarray(action)
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), int(_INT32.min)), min(int(info.max), int(_INT32.max))
    if isinstance(action, (np.ndarray, np.generic)):
        return jnp.asarray(np.clip(action, lo, hi).astype(np.int32))
    return jnp.clip(action, np.asarray(lo, dtype), np.asarray(hi, dtype)).astype(jnp.int32)


def _describe(space, shape) -> str:
    return f"action space {space} (batched action shape {shape})"


class ChanceError(ValueError):
    """``apply_chance`` refused its outcome: the state is not a chance node, or the outcome is not
    an index into `Environment.chance_outcomes` whose probability is > 0 (OpenSpiel refuses the
    same at a chance node)."""


def check_chance_outcome(env: "Environment", state: Any, outcome: Any, params: Any = None) -> None:
    """Host-side check of ``env.apply_chance(state, outcome, params)``'s arguments: ``state`` is a
    chance node and ``outcome`` an integer scalar whose probability in ``chance_outcomes`` is > 0;
    raises `ChanceError` naming the outcomes allowed. Traced arguments pass unchecked (``make(...,
    checked=True)`` checks them under `jaxenvs.checked`); an environment's ``apply_chance`` calls it
    on entry."""
    if not is_concrete((state, outcome, params)):
        return
    value = np.asarray(outcome)
    if value.shape != () or not (np.issubdtype(value.dtype, np.integer) and not np.issubdtype(value.dtype, np.bool_)):
        raise ChanceError(f"{env.name}.apply_chance: outcome must be an integer scalar (an index into chance_outcomes), got {outcome!r}")
    if not bool(env.is_chance_node(state, params)):
        raise ChanceError(f"{env.name}.apply_chance: the state is not a chance node (is_chance_node is False); chance acts only there")
    probs = np.asarray(env.chance_outcomes(state, params))
    allowed = np.flatnonzero(probs > 0).tolist()
    o = int(value)
    if not 0 <= o < len(probs):
        raise ChanceError(f"{env.name}.apply_chance: outcome {o} is out of range: chance_outcomes has {len(probs)} outcomes, possible here: {allowed}")
    if not probs[o] > 0:
        raise ChanceError(f"{env.name}.apply_chance: outcome {o} has probability 0 at this chance node; possible here: {allowed} (chance_outcomes {probs.tolist()})")
