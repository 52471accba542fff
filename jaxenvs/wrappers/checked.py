"""Opt-in checked mode: invalid input raises instead of following the documented fallback.

Inside ``jit`` nothing can raise on a value, so `CheckedActions` records
``jax.experimental.checkify`` checks and `checked` turns a function into one that raises
``checkify.JaxRuntimeError`` naming what was wrong when a check fails::

    env = jaxenvs.make("GridWorld-v0", checked=True)
    step = jaxenvs.checked(env.step)          # jitted; raises on an invalid action

What checked mode catches, beyond the trace-time checks every ``step`` makes:

* an action outside the action space: out of range, NaN, an integer clipped from beyond int32
  (in a sequential game, the current player's row only: the other rows are ignored);
* an illegal move in an env with legal actions (``action_style="full_action_set"``): the message
  names the action and the legal set (the mask);
* traced params that the environment's ``validate_params`` rejects (concrete params are
  validated by ``reset``/``step`` in any mode); they are read on the host with a callback;
* ``apply_chance`` with a traced outcome that is out of range, of probability 0 in
  ``chance_outcomes``, or given at a state that is not a chance node;
* a ``step`` from a state in which the episode already terminated (without an auto-reset in
  between): the wrapper keeps a ``terminated`` flag in its state (`CheckedState`);
* a state that the params cannot produce (``env.state_fits_params``: a GridWorld state of
  ``size=8`` stepped with ``size=5`` params), at the step it enters;
* host integers outside int32's range among the arguments of a function made by `checked`
  (a ValueError before the call: ``jax.jit`` would wrap them, e.g. ``2**32 + 1`` into ``1``,
  while x64 is off).

A failed check raises `CheckError` (a ``checkify.JaxRuntimeError``) whose message names the env,
the step of the episode (``step 3``: the steps since its reset, counted in `CheckedState`), what
was wrong and what is allowed. In a batch, ``checked(env.step, batched=True)`` vmaps the function
itself and names each failing env of the batch by its index (``env 2 of 4``); with
``checked(jax.vmap(env.step))`` checkify can only report the first failure, without its index.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from jaxenvs import struct
from jaxenvs.core import SHAPES_ONLY, is_concrete
from jaxenvs.wrappers.base import Wrapper

__all__ = ["CheckedActions", "CheckedState", "CheckError", "NotCheckedError", "checked"]


class CheckError(checkify.JaxRuntimeError):
    """A check of checked mode failed: the message names the env, the step, what was wrong and what
    is allowed (and the env's index in a batch made by ``checked(..., batched=True)``)."""


class NotCheckedError(RuntimeError):
    """A checked environment (``make(..., checked=True)``) traced outside `checked`: its checks
    have nowhere to report to."""


# > 0 while a function made by `checked` is being traced (tracing runs on the caller's thread)
_TRACING_CHECKED = threading.local()


def _check(env_name: str, pred, msg: str, **fmt) -> None:
    """``checkify.check``, refused at trace time with a clear error when the function is traced
    (``jax.jit``, ``vmap``, ``scan``) without `checked` around it: checkify would fail only later,
    when the program is lowered, with "checkify.check not functionalized"."""
    if getattr(SHAPES_ONLY, "depth", 0):
        return  # traced for its shapes only (the state check of reset/step): nothing to check
    if not is_concrete(pred) and not getattr(_TRACING_CHECKED, "depth", 0):
        raise NotCheckedError(
            f"{env_name} was made with checked=True, so its reset/step must run under jaxenvs.checked "
            "(e.g. step = jaxenvs.checked(env.step), or jaxenvs.checked(my_rollout)) rather than a plain "
            "jax.jit/vmap/scan; or make it with checked=False"
        )
    checkify.check(pred, msg, **fmt)


@struct.dataclass
class CheckedState:
    env_state: Any
    terminated: jax.Array  # bool scalar: the last step terminated the episode
    steps: jax.Array  # int32 scalar: the steps taken since the episode's reset (named in messages)


class CheckedActions(Wrapper):
    """Adds checkify checks: the action lies in the action space (and is not NaN), traced params
    pass ``validate_params``, and no step follows a terminated one without a reset.

    The wrapped ``reset``/``step`` must run under `checked` when traced (``jit``, ``vmap``,
    ``scan``); traced without it they raise `NotCheckedError` at trace time.
    """

    def _check_params(self, params):
        if is_concrete(params):
            return  # validated on entry by reset/step

        def valid(p):
            try:
                self.env.validate_params(jax.tree.map(np.asarray, p))
            except (TypeError, ValueError):
                return np.bool_(False)
            return np.bool_(True)

        ok = jax.pure_callback(valid, jax.ShapeDtypeStruct((), jnp.bool_), params, vmap_method="sequential")
        _check(
            self.env.name, ok, f"{self.env.name}: params rejected by validate_params (call env.validate_params on their values for why)"
        )

    def reset_env(self, key, params):
        self._check_params(params)
        obs, state = self.env.reset_env(key, params)
        return obs, CheckedState(state, jnp.zeros((), bool), jnp.zeros((), jnp.int32))

    def step_env(self, key, state, action, params):
        self._check_params(params)
        space = self.env.action_space(params)
        traits = self.env.traits
        name, t = f"{self.env.name}, step {{t}}", state.steps  # `t` filled in by checkify from the state
        chance = self.env.is_chance_node(state.env_state, params)  # the action is ignored there
        if traits.dynamics == "sequential":
            # only the mover's row is read; the others are ignored whatever their value
            player = self.env.current_player(state.env_state, params)
            _check(
                self.env.name,
                chance | space.contains(jnp.asarray(action)[player]),
                f"{name}: action of agent {{player}} out of the action space: {{action}}; allowed: {space}",
                action=action,
                player=player,
                t=t,
            )
        else:
            _check(
                self.env.name,
                self.env.action_in_space(action, params),
                f"{name}: action out of the action space: {{action}}; allowed: {space}",
                action=action,
                t=t,
            )
        if traits.action_style == "full_action_set":
            self._check_legal(state.env_state, action, params, chance, name, t)
        _check(
            self.env.name,
            ~state.terminated,
            f"{name}: step after the episode terminated; reset first (or use AutoReset)",
            t=t,
        )
        _check(
            self.env.name,
            self.env.state_fits_params(state.env_state, params),
            f"{name}: the state does not fit these params (was it made by reset with other params?); "
            "allowed: states that reset and step with the same params produce",
            t=t,
        )
        obs, env_state, reward, terminated, truncated, info = self.env.step_env(key, state.env_state, action, params)
        return obs, CheckedState(env_state, terminated, state.steps + 1), reward, terminated, truncated, info

    def _check_legal(self, env_state, action, params, chance, name, t):
        """checkify check: the action is legal (the mover's in a sequential game, every agent's
        otherwise); the message names the action and the legal set (the mask, 1 = legal)."""
        mask = self.env.legal_action_mask(env_state, params)
        n = mask.shape[-1]
        action = jnp.asarray(action)
        if self.env.traits.dynamics == "sequential":
            player = self.env.current_player(env_state, params)
            mask, action = mask[player], action[player]
            what = "agent {player}'s action {action}"
        else:
            player = jnp.int32(0)
            what = "action {action}"
        legal = jnp.all((action >= 0) & (action < n) & jnp.take_along_axis(
            mask, jnp.clip(action, 0, n - 1)[..., None], axis=-1)[..., 0])
        _check(
            self.env.name,
            chance | legal,
            f"{name}: illegal move: {what} is not among the legal actions; allowed: the actions whose mask "
            "entry is 1 ({mask})",
            action=action,
            player=player,
            mask=mask.astype(jnp.int32),
            t=t,
        )

    def apply_chance(self, state, outcome, params=None):
        """The wrapped env's ``apply_chance``, with a traced ``outcome`` checked: the state is a chance
        node and the outcome's probability in ``chance_outcomes`` is > 0 (concrete arguments are
        checked on the host by the env itself, `jaxenvs.core.check_chance_outcome`)."""
        params = self._params(params)
        if not is_concrete((state, outcome, params)):
            inner = state.env_state
            probs = self.env.chance_outcomes(inner, params)
            o = jnp.asarray(outcome)
            ok = self.env.is_chance_node(inner, params) & (o >= 0) & (o < probs.shape[-1])
            ok = ok & (probs[jnp.clip(o, 0, probs.shape[-1] - 1)] > 0)
            _check(
                self.env.name,
                ok,
                f"{self.env.name}: apply_chance outcome {{outcome}} is not possible here (chance_outcomes {{probs}}; "
                "apply_chance acts at chance nodes only, on outcomes of probability > 0)",
                outcome=o,
                probs=probs,
            )
        return super().apply_chance(state, outcome, params)

    def inner_state(self, state):
        return state.env_state


def _check_host_ints(tree) -> None:
    info = np.iinfo(np.int32)
    for path, x in jax.tree_util.tree_leaves_with_path(tree):
        if isinstance(x, bool) or not isinstance(x, (int, np.integer, np.ndarray)):
            continue
        a = np.asarray(x)
        if a.dtype.kind in "iu" and a.size and (a.min() < info.min or a.max() > info.max):
            raise ValueError(
                f"checked: argument{jax.tree_util.keystr(path)} holds integers outside int32's range "
                f"[{info.min}, {info.max}] (min {a.min()}, max {a.max()}); jax.jit would wrap them"
            )


def _message(error: checkify.Error, size: int | None) -> str | None:
    """The failed checks' text without checkify's own words (``(`check` failed)``, its traceback
    note); with ``size``, one line per failing env of the batch, named by its index."""
    def clean(e) -> str:
        return str(e).split(" (`check` failed)")[0].strip()

    exc = error.get_exception()
    if exc is None:
        return None
    mapping = getattr(exc, "error_mapping", None)
    if mapping is None:
        return clean(exc)
    return "\n".join(f"env {', '.join(map(str, idx))} of {size}: {clean(e)}" for idx, e in mapping.items())


def checked(fn: Callable, jit: bool = True, batched: bool = False) -> Callable:
    """``fn`` (e.g. ``env.step``, or a whole rollout) made to raise `CheckError` on failed checks.

    ``jit=False`` runs ``fn`` under checkify without compiling it as a whole (the result raises on
    the host, so it cannot itself go inside a ``jax.jit``). ``batched=True`` maps ``fn`` over the
    leading axis of every argument (as ``jax.vmap(fn)`` does) with the checks inside the map, so the
    message names each failing env by its index in the batch.
    """

    def traced(*args, **kwargs):
        _TRACING_CHECKED.depth = getattr(_TRACING_CHECKED, "depth", 0) + 1
        try:
            return fn(*args, **kwargs)
        finally:
            _TRACING_CHECKED.depth -= 1

    f = checkify.checkify(traced)
    if batched:
        f = jax.vmap(f)
    if jit:
        f = jax.jit(f)

    def wrapper(*args, **kwargs):
        if not jax.config.jax_enable_x64:
            _check_host_ints((args, kwargs))
        err, out = f(*args, **kwargs)
        leaves = jax.tree.leaves((args, kwargs))
        text = _message(err, np.shape(leaves[0])[0] if batched and leaves else None)
        if text is not None:
            raise CheckError(text)
        return out

    return wrapper
