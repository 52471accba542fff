"""Opponents for turn-based games: jittable, vmappable ``policy(key, obs) -> action`` on ONE
agent's observation, and the names a game declares for them.

A policy acts on ONE agent's observation as a ``full_action_set`` game gives it:
``obs = {"observation": ..., "action_mask": uint8[n]}`` (no agent or batch axis; `jax.vmap` it
for a batch). It returns an int32 scalar action, legal whenever the mask has a legal action (a
non-mover's answer is ignored by a sequential game).

**Named opponents.** ``random`` (uniform among the legal moves: `random_legal`, on
`jaxenvs.spaces.Discrete.sample` with the mask) plays every masked game; a game class declares
its own in the ``OPPONENTS`` hook (as it declares its legend; `jaxenvs.core.Environment` declares the
hooks), ``name -> (policy, meaning)``::

    class TicTacToe(Environment):
        OPPONENTS = {"perfect": (jaxenvs.games.tic_tac_toe.perfect, "minimax, never loses")}

`named_opponents(env)` lists them, `make_opponent(spec, env)` builds one (a name, or a policy
function such as a trained run's, `jaxenvs.train.load_policy`, which the command lines load from a
run directory; nothing here needs more than jax and numpy).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp

from jaxenvs import spaces
from jaxenvs.registration import registry

__all__ = [
    "Policy", "random_legal", "uniform_among", "NamedOpponent", "named_opponents", "make_opponent",
    "OpponentError", "is_two_player_game", "allowed_opponents", "mask_of", "observation_of",
]

Policy = Callable[[jax.Array, dict], jax.Array]
"""``policy(key, obs) -> action``: typed PRNG key, one agent's observation dict, int32 scalar."""


def mask_of(obs, n: int | None = None, who: str = "policy") -> jax.Array:
    """bool ``[n]`` from ``obs["action_mask"]``, with a trace-time check of its structure."""
    if not isinstance(obs, dict) or "action_mask" not in obs:
        raise TypeError(
            f"{who} takes one agent's observation dict {{'observation': ..., 'action_mask': uint8[n]}}, "
            f"got {type(obs).__name__}" + (f" with keys {sorted(obs)}" if isinstance(obs, dict) else "")
        )
    mask = jnp.asarray(obs["action_mask"])
    if mask.ndim != 1 or (n is not None and mask.shape != (n,)):
        want = f"[{n}]" if n is not None else "[n]"
        raise ValueError(
            f"{who}: obs['action_mask'] must have shape {want} (one agent, no batch axis; jax.vmap the "
            f"policy for a batch), got {mask.shape}"
        )
    return mask != 0


def observation_of(obs, shape: tuple[int, ...], who: str) -> jax.Array:
    """``obs["observation"]`` checked to have ``shape`` (one agent, no batch axis)."""
    x = jnp.asarray(obs["observation"])
    if x.shape != shape:
        raise ValueError(
            f"{who}: obs['observation'] must have shape {list(shape)} (one agent, no batch axis; jax.vmap "
            f"the policy for a batch), got {list(x.shape)}"
        )
    return x


def uniform_among(key, allowed) -> jax.Array:
    """int32 scalar (or ``[...]`` for ``allowed`` bool ``[..., n]``): uniform among the True
    entries (`jaxenvs.spaces.Discrete.sample` with ``allowed`` as the mask); 0 where none is True
    (a non-mover, whose answer a sequential game ignores)."""
    allowed = jnp.asarray(allowed, bool)
    draw = spaces.Discrete(allowed.shape[-1]).sample(key, allowed.shape[:-1], mask=allowed)
    return jnp.where(jnp.any(allowed, axis=-1), draw, 0).astype(jnp.int32)


def random_legal(key, obs) -> jax.Array:
    """int32 scalar: uniform among the legal actions of ``obs["action_mask"]`` (uint8/bool ``[n]``);
    0 when none is legal. Works for any masked game."""
    return uniform_among(key, mask_of(obs, who="random_legal"))


# ---- names ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class NamedOpponent:
    """A named opponent of a game: its name, its ``policy(key, obs) -> action`` and what it does."""

    name: str
    policy: Policy
    meaning: str


RANDOM = NamedOpponent("random", random_legal, "uniformly random among the legal moves")


class OpponentError(ValueError):
    """An opponent that does not exist or does not play this game; the message lists what does."""


def is_two_player_game(env) -> bool:
    """Two agents with opposed interests (zero-sum): a game to report win / draw / loss of."""
    traits = getattr(env, "traits", None)
    return getattr(env, "num_agents", 1) == 2 and getattr(traits, "utility", None) == "zero_sum"


def _game_class(env):
    return type(getattr(env, "unwrapped", env))


def named_opponents(env) -> dict[str, NamedOpponent]:
    """``{name: NamedOpponent}`` for ``env`` (an environment or its class): ``random``, then the
    ones its class declares in ``OPPONENTS``."""
    cls = env if isinstance(env, type) else _game_class(env)
    out = {"random": RANDOM}
    for name, (policy, meaning) in cls.OPPONENTS.items():
        out[name] = NamedOpponent(name, policy, meaning)
    return out


def _env_id(env) -> str:
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None else _game_class(env).__name__


def allowed_opponents(env, runs: bool = True) -> str:
    """What `make_opponent` accepts for ``env``, in words."""
    names = ", ".join(f"{n!r} ({o.meaning})" for n, o in named_opponents(env).items())
    return names + (f", or a run directory of jaxenvs-train trained on {_env_id(env)}" if runs else "")


def make_opponent(spec: str | Policy, env, label: str | None = None) -> tuple[str, Policy]:
    """``(label, policy)`` of the opponent ``spec`` on the two-player game ``env``: a name of
    `named_opponents`, or a policy function (``policy(key, obs)``, e.g. `jaxenvs.train.load_policy`'s
    record of a run trained on the same game), labelled ``label`` (default ``"policy"``).
    `OpponentError` for a name that does not exist (the message lists what does), a run directory
    given as a name (load it first), or a game that is not a two-player zero-sum one."""
    env_id = _env_id(env)
    if not is_two_player_game(env):
        raise OpponentError(
            f"opponents are for two-player zero-sum games; {env_id} has {getattr(env, 'num_agents', 1)} agent(s)"
            f" and {getattr(getattr(env, 'traits', None), 'utility', 'no')} utility"
        )
    if callable(spec):
        return label or "policy", spec
    text = str(spec)
    named = named_opponents(env)
    if text in named:
        return f"{text} ({named[text].meaning})", named[text].policy
    if os.sep in text or Path(text).exists() or text.startswith("."):
        raise OpponentError(f"{text!r} is a path, not an opponent's name: a trained run plays as the policy "
                            f"jaxenvs.train.load_policy({text!r}) returns; for {env_id} the names are "
                            f"{allowed_opponents(env, runs=False)}")
    elsewhere = _games_declaring(text)
    if elsewhere:
        raise OpponentError(f"opponent {text!r} plays {' and '.join(elsewhere)} only, not {env_id}; for {env_id} "
                            f"choose {allowed_opponents(env)}")
    raise OpponentError(f"unknown opponent {text!r}; for {env_id} choose {allowed_opponents(env)}")


def _games_declaring(name: str) -> list[str]:
    """The registered ids of the built-in games whose class declares the opponent ``name``."""
    out = []
    for env_id, spec in registry.items():
        entry = spec.entry_point
        if not isinstance(entry, str) or not entry.startswith("jaxenvs.envs."):
            continue
        try:
            module, _, attr = entry.partition(":")
            cls = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            continue
        if name in cls.OPPONENTS:
            out.append(env_id)
    return out
