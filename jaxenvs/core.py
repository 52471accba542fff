"""The functional environment API.

An :class:`Environment` is a stateless object; everything that changes lives in a pytree ``state``
and everything tunable that does not change array shapes lives in a pytree ``params``::

    obs, state = env.reset(key, params)
    obs, state, reward, terminated, truncated, info = env.step(key, state, action, params)

Both are pure, so they work under ``jax.jit``, ``jax.vmap`` and inside ``jax.lax.scan``.
Subclasses implement ``reset_env``, ``step_env``, ``observation_space``, ``action_space`` and
``default_params``; the public ``reset``/``step`` fill in ``params=None`` and check the action's
shape and dtype at trace time.

Multi-agent environments put agents on a leading axis of every observation leaf, of ``action``
and of ``reward`` (float32[num_agents]); ``terminated``/``truncated`` are episode-level bools.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from jaxenvs import struct

from jaxenvs import spaces

__all__ = ["Environment", "Traits", "EnvParams", "EnvState", "Obs", "StepResult", "ActionError", "require_param"]

Obs = Any
StepResult = tuple  # (obs, state, reward, terminated, truncated, info)


@struct.dataclass
class EnvParams:
    """Base for params dataclasses (empty: an environment with nothing to tune)."""


@struct.dataclass
class EnvState:
    """Base for state dataclasses."""


class ActionError(TypeError):
    """An action whose shape or dtype does not fit the environment's action space."""


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
    if integer:
        what = "an integer" + (f" >= {low:g}" if low is not None else "")
    elif (low, high) == (0, 1) and not low_open:
        what = "a probability in [0, 1]"
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

    ``action_style`` is ``"minimal"`` (every action of the space is legal in every state) or
    ``"full_action_set"`` (some actions are illegal in some states; the env then exposes a legal
    action mask in ``info["legal_action_mask"]``).
    """

    num_agents: int = 1
    dynamics: Literal["simultaneous", "sequential"] = "simultaneous"
    chance: Literal["deterministic", "stochastic"] = "stochastic"
    information: Literal["perfect", "imperfect"] = "perfect"
    utility: Literal["general_sum", "zero_sum", "identical"] = "general_sum"
    reward_style: Literal["step", "terminal"] = "step"
    action_style: Literal["minimal", "full_action_set"] = "minimal"

    _ALLOWED = {
        "dynamics": ("simultaneous", "sequential"),
        "chance": ("deterministic", "stochastic"),
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


class Environment:
    """Base class of all jaxenvs environments (and, through :class:`jaxenvs.wrappers.Wrapper`,
    of all wrappers).

    Class attributes a subclass may set: ``traits`` (:class:`Traits`), ``render_fps``, and for
    multi-agent environments ``num_agents`` (the traits' ``num_agents`` by default).
    """

    traits: Traits = Traits()
    render_fps: int = 4
    spec = None  # set by jaxenvs.make

    # ---- to implement -------------------------------------------------------------------------
    @property
    def default_params(self) -> Any:
        return EnvParams()

    def reset_env(self, key: jax.Array, params: Any) -> tuple[Obs, Any]:
        raise NotImplementedError

    def step_env(self, key: jax.Array, state: Any, action: Any, params: Any) -> StepResult:
        raise NotImplementedError

    def observation_space(self, params: Any = None) -> spaces.Space:
        raise NotImplementedError

    def action_space(self, params: Any = None) -> spaces.Space:
        """The action space of ONE agent (all agents share it)."""
        raise NotImplementedError

    def render(self, state: Any, params: Any = None) -> jax.Array:
        """uint8[H, W, 3] RGB frame of ``state``; jittable and vmappable."""
        raise NotImplementedError(f"{type(self).__name__} has no render()")

    def render_text(self, state: Any, params: Any = None) -> str:
        """A short text picture of ``state`` for terminals (host-side, not jittable)."""
        raise NotImplementedError(f"{type(self).__name__} has no render_text()")

    def validate_params(self, params: Any) -> None:
        """Raise ValueError for params that make no sense (called host-side by ``make``)."""

    # ---- public API ---------------------------------------------------------------------------
    def reset(self, key: jax.Array, params: Any = None) -> tuple[Obs, Any]:
        """Initial ``(obs, state)`` drawn with ``key``."""
        if params is None:
            params = self.default_params
        return self.reset_env(key, params)

    def step(self, key: jax.Array, state: Any, action: Any, params: Any = None) -> StepResult:
        """``(obs, state, reward, terminated, truncated, info)`` after taking ``action``.

        The action's shape and dtype are checked when the function is traced; a mismatch raises
        :class:`ActionError` naming the expected space. Out-of-range values follow each
        environment's documented behaviour; use :func:`jaxenvs.checked` to make them raise.
        """
        if params is None:
            params = self.default_params
        action = self._check_action_structure(action, params)
        return self.step_env(key, state, action, params)

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

    def _check_action_structure(self, action, params):
        # shapes and dtypes never depend on params, so the default params' space serves (the
        # given params may be traced, and a space is built from concrete values)
        space = self.action_space(self.default_params)
        if not isinstance(space, (spaces.Discrete, spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
            return action  # composite action spaces: checked by the environment itself
        expected = self.batched_action_shape()
        if isinstance(action, (bool, np.bool_)):
            raise ActionError(f"{self.name}: action {action!r} is a bool; expected {_describe(space, expected)}")
        a = jnp.asarray(action)
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


def _describe(space, shape) -> str:
    return f"action space {space} (batched action shape {shape})"
