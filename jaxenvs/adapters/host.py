"""Host-side helpers shared by the Gymnasium, SB3 and PettingZoo adapters: numpy conversion of
observations and infos, action checks against Gymnasium spaces, render modes and the
``render_mode="human"`` window. Importing it registers nothing with Gymnasium (only
`jaxenvs.adapters.gymnasium` does that)."""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

from jaxenvs._optional import require

require("gymnasium", extra="gymnasium", purpose="the adapters' host side (jaxenvs.adapters.host)")

import gymnasium  # noqa: E402
import jax
import numpy as np
from gymnasium import spaces as gs

from jaxenvs.core import ActionError, Environment
from jaxenvs.rendering.pygame_window import Window

__all__ = [
    "obs_to_numpy",
    "obs_rows",
    "host_value",
    "info_to_numpy",
    "tree_index",
    "check_action",
    "supported_render_modes",
    "check_render_mode",
    "HumanWindow",
    "ActionMasks",
]


# ---- numpy conversion and action checks (shared with the SB3 and PettingZoo adapters) ---------


def obs_to_numpy(space: gs.Space, x: Any) -> Any:
    """``x`` (host arrays) as fresh numpy data of ``space``'s dtypes; Discrete -> numpy scalar."""
    if isinstance(space, gs.Dict):
        return {k: obs_to_numpy(s, x[k]) for k, s in space.spaces.items()}
    if isinstance(space, gs.Tuple):
        return tuple(obs_to_numpy(s, xi) for s, xi in zip(space.spaces, x))
    if isinstance(space, gs.Discrete):
        return space.dtype.type(x)
    return np.array(x, dtype=space.dtype)


def obs_rows(space: gs.Space, x: Any, rows) -> list:
    """The observations ``x[i]`` for ``i`` in ``rows`` (``x``: host arrays with a leading axis), each
    as `obs_to_numpy` makes it; arrays are non-overlapping rows of fresh arrays."""
    if isinstance(space, gs.Dict):
        per_key = [obs_rows(s, x[k], rows) for k, s in space.spaces.items()]
        return [dict(zip(space.spaces.keys(), values)) for values in zip(*per_key)]
    if isinstance(space, gs.Tuple):
        return list(zip(*(obs_rows(s, xi, rows) for s, xi in zip(space.spaces, x))))
    return list(np.asarray(x)[rows].astype(space.dtype, copy=False))  # fancy indexing copies


def host_value(x: Any) -> Any:
    """An info leaf as a fresh numpy array; 0-d: a Python bool for bools, else a numpy scalar
    (``np.int32``, ``np.float32``: Gymnasium's vector info then batches both to typed arrays)."""
    x = np.array(x)
    if x.ndim:
        return x
    return bool(x) if x.dtype == np.bool_ else x[()]


def info_to_numpy(info: dict) -> dict:
    """Info leaves converted by `host_value` (nested dicts kept)."""
    return {k: info_to_numpy(v) if isinstance(v, dict) else host_value(v) for k, v in info.items()}


def tree_index(tree: Any, i: int) -> Any:
    return jax.tree.map(lambda leaf: leaf[i], tree)


def check_action(space: gs.Space, action: Any, lead: tuple = (), where: str = "step") -> np.ndarray:
    """``action`` (``lead + space.shape``) as the int32/float32 array the jaxenvs ``step`` takes.

    Raises `jaxenvs.ActionError` (a TypeError) for a wrong shape or dtype and ValueError for
    a value outside a discrete space or a NaN, naming the action space. Out-of-bounds values of a
    float Box pass through (Gymnasium allows them; each environment documents what it does, e.g.
    clipping).
    """
    a = np.asarray(action)
    expected = tuple(lead) + tuple(space.shape or ())
    if isinstance(space, (gs.Discrete, gs.MultiDiscrete, gs.MultiBinary)) or (
        isinstance(space, gs.Box) and np.dtype(space.dtype).kind in "iu"
    ):
        if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
            raise ActionError(
                f"{where}: action {action!r} has dtype {a.dtype}; the action space {space} takes integers"
            )
        if a.shape != expected:
            raise ActionError(f"{where}: action has shape {a.shape}, expected {expected} for the action space {space}")
        if isinstance(space, gs.Discrete):
            lo, hi = int(space.start), int(space.start) + int(space.n) - 1
        elif isinstance(space, gs.MultiDiscrete):
            lo, hi = space.start, space.start + space.nvec - 1
        elif isinstance(space, gs.MultiBinary):
            lo, hi = 0, 1
        else:
            lo, hi = space.low, space.high
        bad = np.broadcast_to((a < lo) | (a > hi), a.shape)
        if np.any(bad):
            if a.ndim:
                idx = tuple(int(i[0]) for i in np.nonzero(bad))
                what = f"action value {a[idx]} at index {idx}"
            else:
                what = f"action {a}"
            raise ValueError(f"{where}: {what} is outside the action space {space}")
        return a.astype(np.int32)
    if isinstance(space, gs.Box):
        if a.dtype == np.bool_ or not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
            raise ActionError(f"{where}: action {action!r} has dtype {a.dtype}; the action space {space} takes floats")
        if a.shape != expected:
            raise ActionError(f"{where}: action has shape {a.shape}, expected {expected} for the action space {space}")
        a = a.astype(np.float32)
        if np.any(np.isnan(a)):
            raise ValueError(f"{where}: action contains NaN; the action space is {space}")
        return a
    raise ActionError(f"{where}: {type(space).__name__} action spaces are not supported by the adapters ({space})")


# ---- rendering -------------------------------------------------------------------------------


def supported_render_modes(env: Environment) -> list[str]:
    """Render modes ``env`` supports: rgb_array (and human, if pygame is installed) when it
    implements ``render``, ansi when it implements ``render_text``."""
    cls = type(env.unwrapped)
    modes = []
    if cls.render is not Environment.render:
        if importlib.util.find_spec("pygame") is not None:
            modes.append("human")
        modes.append("rgb_array")
    if cls.render_text is not Environment.render_text:
        modes.append("ansi")
    return modes


def check_render_mode(render_mode: str | None, modes: list[str], name: str) -> None:
    if render_mode is not None and render_mode not in modes:
        raise ValueError(f"render_mode={render_mode!r} is not supported by {name}; supported: {modes} or None")


class HumanWindow(Window):
    """The adapters' ``render_mode="human"`` window (`jaxenvs.rendering.pygame_window.Window`);
    a missing pygame raises Gymnasium's ``DependencyNotInstalled``."""

    def show(self, frame: np.ndarray) -> bool:
        try:
            return super().show(frame)
        except ImportError as e:
            raise gymnasium.error.DependencyNotInstalled(
                'render_mode="human" needs pygame: pip install "jaxenvs[render]"'
            ) from e


# ---- legal-action masks (full_action_set environments) ---------------------------------------


@functools.lru_cache(maxsize=64)
def _mask_fn(env: Environment, batched: bool):
    fn = env.legal_action_mask
    return jax.jit(jax.vmap(fn, in_axes=(0, None)) if batched else fn)


class ActionMasks:
    """The legal-action masks an adapter hands out for an env with ``traits.action_style ==
    "full_action_set"`` (``active`` is false for the others, which get none): ``update(obs, state,
    params)`` after every reset and step takes them from ``obs["action_mask"]`` (already on the
    host; the observation carries the mask of the state it belongs to, also after an auto-reset),
    or, when a wrapper removed it from the observation, from a jitted
    `jaxenvs.core.Environment.legal_action_mask` of ``state``. ``int8()`` is the copy that goes
    into ``info["action_mask"]``, ``bool()`` what ``action_masks()`` returns (sb3-contrib's
    ``MaskablePPO`` calls it before every step)."""

    def __init__(self, env: Environment, batched: bool):
        self.env, self.batched = env, batched
        self.active = env.traits.action_style == "full_action_set"
        self.mask: np.ndarray | None = None

    def update(self, obs: Any, state: Any, params: Any) -> None:
        if not self.active:
            return
        if isinstance(obs, dict) and "action_mask" in obs:
            self.mask = np.asarray(obs["action_mask"]) != 0
        else:
            self.mask = np.asarray(_mask_fn(self.env, self.batched)(state, params))

    def int8(self) -> np.ndarray:
        return self.mask.astype(np.int8)

    def bool(self) -> np.ndarray:
        if not self.active:
            raise AttributeError(
                f"{self.env.name} has no legal-action mask (traits.action_style={self.env.traits.action_style!r})"
            )
        if self.mask is None:
            raise RuntimeError("call reset() before action_masks()")
        return self.mask.copy()
