"""jaxenvs environments behind gymnax's ``Environment`` API: `to_gymnax`.

PureJaxRL's single-file algorithms, rejax, Stoix and purejaxql are written against gymnax's API.
``to_gymnax(env)`` gives any single-agent jaxenvs environment (any wrappers) that API::

    genv = to_gymnax(jaxenvs.make("GridWorld-v0"), api="legacy")
    params = genv.default_params                       # has .max_steps_in_episode
    obs, state = genv.reset(key, params)
    obs, state, reward, done, info = genv.step(key, state, action, params)          # "legacy"
    obs, state, reward, terminated, truncated, info = genv.step(key, state, action, params)  # "v1"

Two step signatures, because gymnax's changed and its consumers did not all follow:

* ``api="legacy"``: gymnax 0.0.x's 5-tuple ``(obs, state, reward, done, info)``, which PureJaxRL
  and rejax 0.1.x consume; ``done = terminated | truncated`` and ``info["discount"] = 1 -
  terminated`` (float32), so truncation-aware code can still bootstrap a time-limit end;
* ``api="v1"``: gymnax 1.0's 6-tuple ``(obs, state, reward, terminated, truncated, info)`` with
  ``info["terminated"]``, ``info["truncated"]``, ``info["final_observation"]`` (the observation
  the episode ended on, before the reset) and ``info["discount"]``, as gymnax 1.0's ``step`` gives.

Both auto-reset the way gymnax does: when an episode ends, ``obs``/``state`` are those of a fresh
episode drawn with a split of the step key. An `jaxenvs.wrappers.AutoReset` on the
outside of ``env`` is removed first (gymnax resets itself). The time limit is
``params.max_steps_in_episode`` (gymnax consumers read it, e.g. rejax's evaluation loop), counted in
the adapter's state: by default the ``max_episode_steps`` of ``env``'s ``TimeLimit`` or spec; pass
``max_steps_in_episode=`` for environments without one. Other ``info`` keys of ``env`` pass through.

Spaces are gymnax ``spaces`` objects (so ``isinstance(space, gymnax.environments.spaces.Discrete)``
holds, as rejax checks). An observation that is not a single array (GridWorld's dict) is flattened
with `jaxenvs.spaces.flatten` into a float32 vector (Box parts reshaped, Discrete parts
one-hot) and the observation space is the matching Box; ``flatten_obs=True`` flattens Box
observations too. Actions must be ``Discrete`` (``start`` is added back) or ``Box``.

Multi-agent environments are refused: gymnax's API has one agent. `SingleAgentView` turns
one into a single-agent environment by fixing the other agents' policy (e.g. HurdleRace's
runner 0 against a random or scripted runner 1).

Requires the optional gymnax package (``pip install "jaxenvs[gymnax]"``, gymnax 1.0.x).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Literal

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs._optional import require
from jaxenvs import spaces, struct
from jaxenvs.core import Environment
from jaxenvs.wrappers.base import AutoReset, TimeLimit, Wrapper, strip_autoreset, tree_select

__all__ = ["to_gymnax", "GymnaxAdapter", "GymnaxParams", "GymnaxState", "SingleAgentView", "to_gymnax_space"]

APIS = ("legacy", "v1")


@struct.dataclass
class GymnaxParams:
    """gymnax-style params: the jaxenvs env's params and the episode step limit (an int, as
    gymnax's own ``EnvParams.max_steps_in_episode``; traced once it enters ``jit``)."""

    env_params: Any
    max_steps_in_episode: Any


@struct.dataclass
class GymnaxState:
    """The jaxenvs env's state and the steps taken in this episode (int32), as gymnax's ``time``."""

    env_state: Any
    time: jax.Array


def to_gymnax_space(space: spaces.Space):
    """The gymnax ``spaces`` object for a jaxenvs Discrete (start 0), Box, Dict or Tuple space."""
    gs = require("gymnax.environments.spaces", extra="gymnax", purpose="the gymnax adapter")

    if isinstance(space, spaces.Discrete):
        return gs.Discrete(int(space.n))
    if isinstance(space, spaces.Box):
        return gs.Box(jnp.asarray(space.low), jnp.asarray(space.high), tuple(space.shape), jnp.dtype(space.dtype))
    if isinstance(space, spaces.Dict):
        return gs.Dict({k: to_gymnax_space(s) for k, s in space.spaces.items()})
    if isinstance(space, spaces.Tuple):
        return gs.Tuple([to_gymnax_space(s) for s in space.spaces])
    raise TypeError(f"gymnax has no space for {space!r}; supported: Discrete, Box, Dict, Tuple")


def _time_limit_of(env: Environment) -> int | None:
    e = env
    while isinstance(e, Wrapper):
        if isinstance(e, TimeLimit):
            return e.max_episode_steps
        e = e.env
    spec = env.spec
    return None if spec is None else spec.max_episode_steps


class GymnaxAdapter:
    """gymnax's ``Environment`` API over a single-agent jaxenvs environment (see the module docs).

    Build it with `to_gymnax`. ``reset`` and ``step`` are jitted with the adapter static,
    as gymnax's are; they also work inside the caller's ``jit``/``vmap``/``scan``.
    """

    def __init__(
        self,
        env: Environment,
        api: Literal["legacy", "v1"] = "legacy",
        max_steps_in_episode: int | None = None,
        flatten_obs: bool = False,
    ):
        if not isinstance(env, Environment):
            raise TypeError(f"to_gymnax takes a jaxenvs Environment, got {type(env).__name__}")
        if api not in APIS:
            raise ValueError(
                f"to_gymnax api must be 'legacy' (gymnax 0.0.x's 5-tuple: PureJaxRL, rejax 0.1.x) or "
                f"'v1' (gymnax 1.0's 6-tuple), got {api!r}"
            )
        if env.multi_agent:
            raise ValueError(
                f"{env.name} has {env.num_agents} agents; gymnax's API has one. Wrap it in "
                "jaxenvs.adapters.gymnax.SingleAgentView(env, agent=0, others_policy=...) to train one agent "
                "against fixed others, or use jaxenvs.adapters.pettingzoo for multi-agent training"
            )
        self.env = strip_autoreset(env)
        if _has_autoreset(self.env):
            raise ValueError(
                "to_gymnax resets episodes itself; pass the env without an inner AutoReset "
                "(jaxenvs.make(..., autoreset=False) and your wrappers on top)"
            )
        limit = _time_limit_of(env) if max_steps_in_episode is None else max_steps_in_episode
        if limit is None:
            raise ValueError(
                f"{env.name} has no time limit (no TimeLimit wrapper, spec.max_episode_steps None); gymnax "
                "consumers read params.max_steps_in_episode: pass to_gymnax(env, max_steps_in_episode=N)"
            )
        if not isinstance(limit, (int, np.integer)) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"max_steps_in_episode must be an int >= 1, got {limit!r}")
        self.api = api
        self.max_steps_in_episode = int(limit)
        params = self.env.default_params
        self._obs_space = self.env.observation_space(params)
        self._flatten = flatten_obs or not isinstance(self._obs_space, spaces.Box)
        act = self.env.action_space(params)
        if not isinstance(act, (spaces.Discrete, spaces.Box)):
            raise TypeError(
                f"{env.name}'s action space {act!r} has no gymnax equivalent; gymnax consumers take "
                "Discrete or Box actions (wrap the env to expose one)"
            )
        self._action_start = int(act.start) if isinstance(act, spaces.Discrete) else 0

    # ---- gymnax's attributes ---------------------------------------------------------------------
    @property
    def default_params(self) -> GymnaxParams:
        return GymnaxParams(self.env.default_params, self.max_steps_in_episode)

    @property
    def name(self) -> str:
        return self.env.name

    @property
    def num_actions(self) -> int:
        act = self.env.action_space(self.env.default_params)
        return int(act.n) if isinstance(act, spaces.Discrete) else int(np.prod(act.shape))

    def observation_space(self, params: GymnaxParams | None = None):
        space = self._obs_space
        if self._flatten:
            space = spaces.flatten_space(space)
        return to_gymnax_space(space)

    def action_space(self, params: GymnaxParams | None = None):
        act = self.env.action_space(self.env.default_params)
        if isinstance(act, spaces.Discrete):
            return to_gymnax_space(spaces.Discrete(act.n))
        return to_gymnax_space(act)

    # ---- dynamics --------------------------------------------------------------------------------
    def _obs(self, obs):
        return spaces.flatten(self._obs_space, obs) if self._flatten else obs

    def reset_env(self, key, params: GymnaxParams):
        obs, state = self.env.reset(key, params.env_params)
        return self._obs(obs), GymnaxState(state, jnp.zeros((), jnp.int32))

    def step_env(self, key, state: GymnaxState, action, params: GymnaxParams):
        """One step without the reset: ``(obs, state, reward, terminated, truncated, info)``."""
        if self._action_start:
            action = action + self._action_start
        obs, env_state, reward, terminated, truncated, info = self.env.step(key, state.env_state, action, params.env_params)
        time = state.time + 1
        truncated = truncated | (time >= params.max_steps_in_episode)
        return self._obs(obs), GymnaxState(env_state, time), reward, terminated, truncated, dict(info)

    @functools.partial(jax.jit, static_argnums=0)
    def reset(self, key, params: GymnaxParams | None = None):
        return self.reset_env(key, self.default_params if params is None else params)

    @functools.partial(jax.jit, static_argnums=0)
    def step(self, key, state: GymnaxState, action, params: GymnaxParams | None = None):
        params = self.default_params if params is None else params
        key_step, key_reset = jax.random.split(key)
        obs_st, state_st, reward, terminated, truncated, info = self.step_env(key_step, state, action, params)
        obs_re, state_re = self.reset_env(key_reset, params)
        done = terminated | truncated
        obs = tree_select(done, obs_re, obs_st)
        state = tree_select(done, state_re, state_st)
        info["discount"] = 1.0 - terminated.astype(jnp.float32)
        if self.api == "legacy":
            return obs, state, reward, done, info
        info.update(terminated=terminated, truncated=truncated, final_observation=obs_st)
        return obs, state, reward, terminated, truncated, info

    def __repr__(self) -> str:
        return f"<GymnaxAdapter api={self.api!r} {self.env!r}>"


def _has_autoreset(env: Environment) -> bool:
    while isinstance(env, Wrapper):
        if isinstance(env, AutoReset):
            return True
        env = env.env
    return False


def to_gymnax(
    env: Environment,
    api: Literal["legacy", "v1"] = "legacy",
    max_steps_in_episode: int | None = None,
    flatten_obs: bool = False,
) -> GymnaxAdapter:
    """``env`` (single-agent, any wrappers) behind gymnax's ``Environment`` API.

    ``api="legacy"`` returns gymnax 0.0.x's 5-tuple from ``step`` (PureJaxRL, rejax 0.1.x),
    ``api="v1"`` gymnax 1.0's 6-tuple; see the module docstring for ``info``, the time limit and how
    observations are flattened. Raises ValueError for multi-agent environments (see
    `SingleAgentView`) and environments without a time limit unless ``max_steps_in_episode``
    is given.
    """
    return GymnaxAdapter(env, api=api, max_steps_in_episode=max_steps_in_episode, flatten_obs=flatten_obs)


@struct.dataclass
class SingleAgentViewState:
    env_state: Any
    obs: Any  # every agent's last observation (the others' policy reads its agents' rows)


class SingleAgentView(Wrapper):
    """One agent of a multi-agent environment, the others acting by a fixed policy.

    ``others_policy(key, obs) -> actions`` sees every agent's observation (leading agent axis) and
    returns actions for all agents (leading agent axis); the row of ``agent`` is replaced by the
    learner's action. Observation, reward and the learner's action are ``agent``'s row; flags and
    ``info`` are the episode's. ``step_env`` splits its key into the transition's key and the
    policy's key. The default policy draws uniformly random actions for the others.
    """

    def __init__(self, env: Environment, agent: int = 0, others_policy: Callable | None = None):
        super().__init__(env)
        if not env.multi_agent:
            raise ValueError(f"SingleAgentView takes a multi-agent environment; {env.name} has one agent")
        if not isinstance(agent, int) or not 0 <= agent < env.num_agents:
            raise ValueError(f"agent must be an int in [0, {env.num_agents}), got {agent!r}")
        self.agent = agent
        space = env.action_space(env.default_params)
        n = env.num_agents
        self.others_policy = others_policy or (lambda key, obs: space.sample(key, (n,)))

    @property
    def traits(self):
        import dataclasses

        return dataclasses.replace(self.env.traits, num_agents=1)

    def _mine(self, tree):
        return jax.tree.map(lambda x: x[self.agent], tree)

    def reset_env(self, key, params):
        obs, state = self.env.reset_env(key, params)
        return self._mine(obs), SingleAgentViewState(state, obs)

    def step_env(self, key, state, action, params):
        key_step, key_policy = jax.random.split(key)
        actions = jnp.asarray(self.others_policy(key_policy, state.obs))
        actions = actions.at[self.agent].set(jnp.asarray(action, actions.dtype))
        obs, env_state, reward, terminated, truncated, info = self.env.step_env(key_step, state.env_state, actions, params)
        return self._mine(obs), SingleAgentViewState(env_state, obs), reward[self.agent], terminated, truncated, info

    def inner_state(self, state):
        return state.env_state
