"""Wrapper base class and the two wrappers every registered environment gets from ``make``.

A wrapper is itself an `jaxenvs.core.Environment`: it overrides ``reset_env``/``step_env``
and calls the inner environment's ``reset_env``/``step_env`` (so the action check runs once, at
the outermost ``step``). A wrapper that keeps extra state wraps the inner state in its own
dataclass and overrides `Wrapper.inner_state`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jaxenvs import struct

from jaxenvs import prng
from jaxenvs.core import GAME_HOOKS, Environment, check_params

__all__ = [
    "step_draws_randomness",
    "strip_autoreset",
    "has_wrapper",
    "same_step_reset",
    "Forwarding",
    "Wrapper",
    "WithParams",
    "TimeLimit",
    "TimeLimitState",
    "AutoReset",
    "tree_select",
]


def tree_select(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """Leafwise ``jnp.where(pred, on_true, on_false)``; ``pred`` is a scalar bool."""
    return jax.tree.map(lambda t, f: jnp.where(pred, t, f), on_true, on_false)


def step_draws_randomness(env: Environment) -> bool:
    """Whether ``env``'s ``step_env`` uses its key, decided on the whole wrapper stack: true when a
    wrapper in it draws randomness in its own step (`Wrapper.draws_in_step`, e.g. an
    `AutoReset` that resets inside ``step``) or when the base env's traits do not say
    ``chance="deterministic"`` (``jaxenvs.check_env`` verifies that such a step ignores its key).
    Batched paths give every env its own step key only when this is true."""
    while isinstance(env, Wrapper):
        if env.draws_in_step:
            return True
        env = env.env
    return env.traits.chance != "deterministic"


def same_step_reset(done, obs, state, info: dict, reset_obs, reset_state, batched: bool = False):
    """The auto-reset rule, shared by `AutoReset`, `jaxenvs.VectorEnv` and the
    adapters: ``(obs, state, info)`` where the episodes that ended (``done``) continue from
    ``(reset_obs, reset_state)``, with the observation they ended on in ``info["final_obs"]``
    (equal to ``obs`` where ``done`` is false). ``batched``: ``done`` is bool[num_envs] and every
    leaf has that leading axis; otherwise ``done`` is a scalar."""
    select = jax.vmap(tree_select) if batched else tree_select
    info = dict(info)
    info["final_obs"] = obs
    return select(done, reset_obs, obs), select(done, reset_state, state), info


class Forwarding:
    """Forwards attribute lookups, ``default_params`` and the static description (``traits``,
    ``render_fps``, ``spec``, ``unwrapped``, ``name``) to ``self.env``: what `Wrapper` and
    `jaxenvs.VectorEnv` share."""

    env: Environment

    def __getattr__(self, name):
        # only called when normal lookup fails: forward to the wrapped env
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    @property
    def default_params(self):
        return self.env.default_params

    @property
    def traits(self):
        return self.env.traits

    @property
    def render_fps(self):
        return self.env.render_fps

    @property
    def spec(self):
        return self.env.spec

    @property
    def unwrapped(self) -> Environment:
        return self.env.unwrapped

    @property
    def name(self) -> str:
        return self.env.name


def _forward(name: str) -> property:
    return property(lambda self: getattr(self.env, name), doc=f"The wrapped env's ``{name}`` (a game hook).")


for _hook in GAME_HOOKS:  # declared on Environment, so __getattr__ alone would not reach the wrapped game's
    setattr(Forwarding, _hook, _forward(_hook))


def _not_an_environment(wrapper: str, env: Any) -> str:
    """The message for a wrapper given something other than a jaxenvs Environment, naming what it
    got (a Gymnasium or PettingZoo env, a class) and what to do instead."""
    import sys

    head = f"{wrapper} wraps a jaxenvs Environment (reset/step as pure JAX functions)"
    gym = sys.modules.get("gymnasium")
    if gym is not None and isinstance(env, gym.Env):
        spec = getattr(env, "spec", None)
        env_id = getattr(spec, "id", None) or "ID"
        return (
            f"{head}, got a Gymnasium environment ({type(env).__name__} {env_id}). Wrap it with Gymnasium's "
            f"own wrappers (gymnasium.wrappers.{wrapper} where there is one), or use a JAX environment: "
            f"jaxenvs.make(...) for jaxenvs' and gymnax's (jaxenvs.make('gymnax/{env_id}') where gymnax has it), "
            "or port it (docs: tutorials/custom-environment.md; jaxenvs.spaces.from_gymnasium converts its "
            "spaces). To go the other way, jaxenvs.adapters.gymnasium.GymnasiumEnv turns a jaxenvs env into a Gymnasium one"
        )
    pz = sys.modules.get("pettingzoo")
    if pz is not None and isinstance(env, (pz.AECEnv, pz.ParallelEnv)):
        return f"{head}, got a PettingZoo environment ({type(env).__name__}); use PettingZoo's wrappers on it"
    if isinstance(env, type) and issubclass(env, Environment):
        return f"{head}, got the class {env.__name__}: pass an instance ({env.__name__}(...)) or jaxenvs.make(id)"
    return f"{head}, got {type(env).__name__}"


class Wrapper(Forwarding, Environment):
    """Forwards everything to ``self.env``; subclasses override what they change.

    A subclass whose ``step_env`` draws randomness of its own (more than its inner env's step
    draws) sets ``draws_in_step = True``, so that batched paths give it one key per env
    (`step_draws_randomness`).
    """

    draws_in_step: bool = False

    def __init__(self, env: Environment):
        if not isinstance(env, Environment):
            raise TypeError(_not_an_environment(type(self).__name__, env))
        self.env = env

    def reset_env(self, key, params):
        return self.env.reset_env(key, params)

    def step_env(self, key, state, action, params):
        return self.env.step_env(key, state, action, params)

    def observation_space(self, params=None):
        return self.env.observation_space(params)

    def action_space(self, params=None):
        return self.env.action_space(params)

    def validate_params(self, params):
        return self.env.validate_params(params)

    def inner_state(self, state):
        """The wrapped environment's state inside this wrapper's ``state``."""
        return state

    def with_inner_state(self, state, inner):
        """This wrapper's ``state`` with the wrapped environment's state replaced by ``inner`` (the
        inverse of `inner_state`; a wrapper state keeps the inner one in its ``env_state`` field)."""
        if type(self).inner_state is Wrapper.inner_state:
            return inner
        return state.replace(env_state=inner)

    def _params(self, params):
        return self.default_params if params is None else params

    # turn-based games: forwarded through every wrapper, on the inner state
    def legal_action_mask(self, state, params=None):
        return self.env.legal_action_mask(self.inner_state(state), self._params(params))

    def current_player(self, state, params=None):
        return self.env.current_player(self.inner_state(state), self._params(params))

    def is_chance_node(self, state, params=None):
        return self.env.is_chance_node(self.inner_state(state), self._params(params))

    def chance_outcomes(self, state, params=None):
        return self.env.chance_outcomes(self.inner_state(state), self._params(params))

    def apply_chance(self, state, outcome, params=None):
        inner = self.env.apply_chance(self.inner_state(state), outcome, self._params(params))
        return self.with_inner_state(state, inner)

    def unwrapped_state(self, state):
        """The base environment's state inside ``state`` (through every wrapper)."""
        inner = self.inner_state(state)
        return self.env.unwrapped_state(inner) if isinstance(self.env, Wrapper) else inner

    def render(self, state, params=None):
        return self.env.render(self.inner_state(state), params)

    def render_text(self, state, params=None):
        return self.env.render_text(self.inner_state(state), params)

    def __repr__(self):
        return f"<{type(self).__name__}{repr(self.env)}>"


def strip_autoreset(env: Environment) -> Environment:
    """``env`` without its outermost `AutoReset` (for code that resets episodes itself)."""
    return env.env if isinstance(env, AutoReset) else env


def has_wrapper(env: Environment, wrapper_type: type) -> bool:
    """Whether a wrapper of ``wrapper_type`` sits anywhere in ``env``'s wrapper chain."""
    while isinstance(env, Wrapper):
        if isinstance(env, wrapper_type):
            return True
        env = env.env
    return False


class WithParams(Wrapper):
    """Gives ``env`` other ``default_params`` (what ``make``'s params keyword arguments set)."""

    def __init__(self, env: Environment, params: Any):
        super().__init__(env)
        self._params = check_params(env, params)

    @property
    def default_params(self):
        return self._params


@struct.dataclass
class TimeLimitState:
    env_state: Any
    time: jax.Array  # int32 scalar: steps taken in this episode


class TimeLimit(Wrapper):
    """Sets ``truncated`` once ``max_episode_steps`` steps have been taken in an episode.

    ``terminated`` is passed through untouched: hitting the limit is never a terminal state, so
    learners can bootstrap from the final observation. As in Gymnasium, both flags are true when
    the MDP terminates on the last allowed step.
    """

    def __init__(self, env: Environment, max_episode_steps: int):
        super().__init__(env)
        if has_wrapper(env, AutoReset):
            raise ValueError(
                f"TimeLimit over {env!r}, which resets its episodes itself (an AutoReset inside): the limit "
                "would count across episodes and cut none of them. Put the time limit below the auto-reset: "
                "jaxenvs.make(id, max_episode_steps=N), or AutoReset(TimeLimit(jaxenvs.make(id, autoreset=False), N))"
            )
        if not isinstance(max_episode_steps, int) or isinstance(max_episode_steps, bool) or max_episode_steps < 1:
            raise ValueError(f"TimeLimit needs max_episode_steps as an int >= 1, got {max_episode_steps!r}")
        self.max_episode_steps = max_episode_steps

    def reset_env(self, key, params):
        obs, state = self.env.reset_env(key, params)
        return obs, TimeLimitState(state, jnp.zeros((), jnp.int32))

    def step_env(self, key, state, action, params):
        obs, env_state, reward, terminated, truncated, info = self.env.step_env(key, state.env_state, action, params)
        time = state.time + 1
        truncated = truncated | (time >= self.max_episode_steps)
        return obs, TimeLimitState(env_state, time), reward, terminated, truncated, info

    def inner_state(self, state):
        return state.env_state


class AutoReset(Wrapper):
    """Starts a new episode in the same ``step`` call that ended the previous one.

    When ``terminated | truncated``, the returned ``obs``/``state`` belong to a freshly drawn
    initial state (a new draw for every episode), while ``reward``, the flags and ``info`` are those
    of the final transition. The observation the episode ended on is in ``info["final_obs"]``
    (equal to ``obs`` on steps that did not end an episode), so a truncated episode can be
    bootstrapped from it (`same_step_reset`).

    The step key is split into the transition's key and the reset's key, except when the wrapped
    stack draws no randomness in ``step`` (`step_draws_randomness`): then the whole key goes
    to the reset (one split less per step).

    One AutoReset per stack: wrapping an environment that already resets itself is refused (its
    episodes would end inside it, out of this wrapper's sight). Wrappers that must see episodes
    end (TimeLimit) go below it, wrappers whose state outlives episodes (RecordEpisodeStatistics,
    NormalizeObservation) above it.
    """

    draws_in_step = True

    def __init__(self, env: Environment):
        super().__init__(env)
        if has_wrapper(env, AutoReset):
            raise ValueError(
                f"AutoReset over {env!r}, which already resets its episodes itself (an AutoReset inside): "
                "info['final_obs'] would hold the new episode's observation. Use the environment as it is, "
                "or build it with jaxenvs.make(id, autoreset=False) and wrap that"
            )

    def split_key(self, key):
        """``(key_step, key_reset)``: the keys this wrapper's ``step_env`` gives the inner step and
        the reset (the same key twice when the inner stack draws no randomness in ``step``)."""
        if step_draws_randomness(self.env):
            return tuple(prng.split(key))
        return key, key

    def step_env(self, key, state, action, params):
        key_step, key_reset = self.split_key(key)
        obs, state, reward, terminated, truncated, info = self.env.step_env(key_step, state, action, params)
        reset_obs, reset_state = self.env.reset_env(key_reset, params)
        obs, state, info = same_step_reset(terminated | truncated, obs, state, info, reset_obs, reset_state)
        return obs, state, reward, terminated, truncated, info
