"""PettingZoo adapters: `ParallelEnv`, a multi-agent jaxenvs environment as a
``pettingzoo.ParallelEnv``, and `AECEnv`, a turn-based (``dynamics="sequential"``) one as a
``pettingzoo.AECEnv``::

    from jaxenvs.adapters.pettingzoo import AECEnv, ParallelEnv
    env = ParallelEnv("RockPaperScissors-v0")
    obs, infos = env.reset(seed=0)
    obs, rewards, terminations, truncations, infos = env.step({a: env.action_space(a).sample() for a in env.agents})

    game = AECEnv("TicTacToe-v0")
    game.reset(seed=0)
    for agent in game.agent_iter():
        obs, reward, terminated, truncated, info = game.last()
        game.step(None if terminated or truncated else game.action_space(agent).sample(obs["action_mask"]))
"""

from __future__ import annotations

import dataclasses

import functools
from copy import deepcopy
from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from jaxenvs._optional import require

require("pettingzoo", extra="pettingzoo", purpose="the PettingZoo adapter (jaxenvs.adapters.pettingzoo)")
require("gymnasium", extra="pettingzoo", purpose="the PettingZoo adapter (jaxenvs.adapters.pettingzoo)")

import pettingzoo  # noqa: E402
from gymnasium.utils import seeding  # noqa: E402

from jaxenvs import spaces
from jaxenvs.adapters import Runner, resolve_env, seed_to_key
from jaxenvs.adapters.host import (HumanWindow, check_action, check_render_mode, host_value, obs_to_numpy,
                                   supported_render_modes)
from jaxenvs.spaces import to_gymnasium
from jaxenvs.wrappers.chance import FoldChanceNodes

__all__ = ["ParallelEnv", "AECEnv", "classic_env"]


def classic_env(name: str, **kwargs):
    """PettingZoo's classic AEC game ``name`` (e.g. ``"tictactoe_v3"``, ``"connect_four_v3"``),
    built through PettingZoo's registry, ``pettingzoo.make("aec", "classic/<name>")`` (PettingZoo
    1.27 warns that importing the ``pettingzoo.classic.<name>`` modules is deprecated); on releases
    without a registry (1.24, this package's floor) from that module's ``env``. ``kwargs`` go to
    the game's constructor (e.g. ``render_mode``). Zero-argument factories for `verify_port`:
    ``functools.partial(classic_env, "tictactoe_v3")``."""
    if hasattr(pettingzoo, "make"):
        return pettingzoo.make("aec", f"classic/{name}", **kwargs)
    import importlib

    return importlib.import_module(f"pettingzoo.classic.{name}").env(**kwargs)


def _agent_space(space: spaces.Space, obs_shape: Any, n: int, i: int) -> spaces.Space:
    """Agent ``i``'s observation space, from the env's space and the shapes of its observation.

    A space leaf whose shape equals the observation leaf's shape without the agent axis is shared
    by all agents; one whose shape includes the agent axis is sliced (Box bounds, MultiDiscrete
    ``nvec``; a sliced 1-D MultiDiscrete becomes a Discrete).
    """
    if isinstance(space, spaces.Dict):
        return spaces.Dict({k: _agent_space(s, obs_shape[k], n, i) for k, s in space.spaces.items()})
    if isinstance(space, spaces.Tuple):
        return spaces.Tuple([_agent_space(s, o, n, i) for s, o in zip(space.spaces, obs_shape)])
    shape = tuple(obs_shape.shape)
    if shape[:1] != (n,):
        raise ValueError(f"observation leaf of shape {shape} has no leading agent axis of size {n}")
    if tuple(space.shape) == shape[1:]:
        return space
    if tuple(space.shape) == shape:
        if isinstance(space, spaces.Box):
            return spaces.Box(space.low[i], space.high[i], shape[1:], space.dtype)
        if isinstance(space, spaces.MultiDiscrete):
            nvec = space.nvec[i]
            return spaces.Discrete(int(nvec)) if nvec.ndim == 0 else spaces.MultiDiscrete(nvec)
        if isinstance(space, spaces.MultiBinary) and len(shape) > 1:
            return spaces.MultiBinary(list(shape[1:]))
    raise ValueError(f"observation space {space} does not fit observations of shape {shape} for {n} agents")


def _int8_mask(space):
    """A Dict observation space with its ``"action_mask"`` entry as int8 (what PettingZoo's games
    give and Gymnasium's ``Discrete.sample(mask=...)`` requires); other spaces unchanged."""
    if isinstance(space, gymnasium.spaces.Dict) and "action_mask" in space.spaces:
        mask = space.spaces["action_mask"]
        spaces_ = dict(space.spaces)
        spaces_["action_mask"] = gymnasium.spaces.Box(0, 1, mask.shape, np.int8)
        return gymnasium.spaces.Dict(spaces_)
    return space


class _Rendered:
    """What both PettingZoo views share: their spaces per agent, ``render()`` and ``close()``
    (each draws its frame with ``_frame``)."""

    def observation_space(self, agent: str):
        return self.observation_spaces[agent]

    def action_space(self, agent: str):
        return self.action_spaces[agent]

    def render(self):
        """rgb_array: uint8[H, W, 3]; ansi: str; human and None: None (human draws in reset/step)."""
        if self.render_mode is None or self.render_mode == "human":
            return None
        if self.state is None:
            raise RuntimeError("call reset() before render()")
        if self.render_mode == "rgb_array":
            return self._frame()
        return self.jaxenvs_env.render_text(self.state, self.params)

    def close(self):
        if self._window is not None:
            self._window.close()


class ParallelEnv(_Rendered, pettingzoo.ParallelEnv):
    """A multi-agent jaxenvs environment as a ``pettingzoo.ParallelEnv``.

    Args:
        env_or_id: a registered id (built with ``jaxenvs.make(id, autoreset=False, **make_kwargs)``;
            the spec's TimeLimit sets truncation) or a jaxenvs Environment (outermost AutoReset removed).
        params: the environment's params (``None``: its ``default_params``).
        render_mode: ``"rgb_array"``, ``"ansi"``, ``"human"`` (pygame, drawn after reset and step)
            or None, as ``metadata["render_modes"]`` allows.
        **make_kwargs: passed to ``jaxenvs.make``.

    Agents are ``env.agents`` (``"0"``, ``"1"``, ...). Every dict returned is keyed by the live
    agents; the episode ends for all agents at once (jaxenvs flags are episode-level), after which
    ``agents`` is empty until ``reset``. ``step`` needs one action per live agent. Info leaves
    with a leading agent axis are split per agent, other leaves are given to every agent. Seeding
    as `jaxenvs.adapters.gymnasium.GymnasiumEnv`: ``reset(seed=s)`` starts the key chain at
    ``jax.random.key(s)``, ``reset()`` continues it. Reset options are ignored.

    A turn-based environment (``traits.dynamics == "sequential"``, e.g. ``TicTacToe-v0``) follows
    PettingZoo's turn-based convention for parallel envs (its ``turn_based_aec_to_parallel``):
    every live agent passes an action, only the action of the agent to move
    (``env.current_player(state)``) is applied, the others' are ignored whatever their value
    (they must still lie in the action space), and each agent's observation carries its
    ``"action_mask"`` (int8, PettingZoo's and Gymnasium's mask dtype), all zero for the agents not
    to move. `AECEnv` is the native view of such
    games.
    """

    metadata = {"render_modes": ["human", "rgb_array", "ansi"], "render_fps": 4, "is_parallelizable": True}

    def __init__(self, env_or_id, params=None, render_mode: str | None = None, **make_kwargs):
        env, params = resolve_env(env_or_id, params, make_kwargs)
        if not env.multi_agent:
            raise ValueError(
                f"{env.name} is a single-agent environment; use jaxenvs.adapters.gymnasium.GymnasiumEnv"
            )
        _setup(self, env, params, render_mode, parallelizable=True)
        n = env.num_agents
        obs_shape, _ = jax.eval_shape(env.reset, jax.random.key(0), params)
        obs_space = env.observation_space(params)
        self.observation_spaces = {
            a: _int8_mask(to_gymnasium(_agent_space(obs_space, obs_shape, n, i))) for i, a in enumerate(self.possible_agents)
        }
        act_space = to_gymnasium(env.action_space(params))
        self.action_spaces = {a: deepcopy(act_space) for a in self.possible_agents}
        self._run = Runner(env, False)
        self._key = self.state = self.np_random = None
        self._window = HumanWindow(env.name, env.render_fps) if render_mode == "human" else None

    def reset(self, seed: int | None = None, options: dict | None = None):
        key = _reset_key(self, seed)
        (self._key, _, self.state), obs = self._run("reset", key, self.params)
        self.agents = list(self.possible_agents)
        if self._window is not None:
            self._window.show(self._frame())
        return self._split_obs(obs), {a: {} for a in self.agents}

    def step(self, actions: dict):
        if not self.agents:
            raise RuntimeError("the episode is over (no live agents): call reset() before step()")
        if not isinstance(actions, dict):
            raise TypeError(
                f"step takes a dict mapping each agent in {self.agents} to its action, got {type(actions).__name__}"
            )
        missing = [a for a in self.agents if a not in actions]
        unknown = [a for a in actions if a not in self.agents]
        if missing or unknown:
            raise ValueError(
                f"step needs exactly one action per live agent {self.agents}; missing {missing}, unknown {unknown}"
            )
        action = np.stack([
            check_action(self.action_spaces[a], actions[a], where=f"{self.jaxenvs_env.name}.step (agent {a!r})")
            for a in self.agents
        ])
        (self._key, _, self.state), (obs, reward, terminated, truncated, info) = self._run(
            "step", self._key, self.state, action, self.params
        )
        agents = self.agents
        n = len(self.possible_agents)
        infos = {
            a: {k: host_value(v[i] if np.ndim(v) and np.shape(v)[0] == n else v) for k, v in info.items()}
            for i, a in enumerate(agents)
        }
        result = (
            self._split_obs(obs),
            {a: float(reward[i]) for i, a in enumerate(agents)},
            {a: bool(terminated) for a in agents},
            {a: bool(truncated) for a in agents},
            infos,
        )
        if terminated or truncated:
            self.agents = []
        if self._window is not None:
            self._window.show(self._frame())
        return result

    def _split_obs(self, obs) -> dict:
        return {
            a: obs_to_numpy(self.observation_spaces[a], jax.tree.map(lambda leaf: leaf[i], obs))
            for i, a in enumerate(self.possible_agents)
        }

    def _frame(self) -> np.ndarray:
        return np.array(self._run.fns.render(self.state, self.params))


# ---- turn-based games: the AEC view ---------------------------------------------------------


def _decisions_only(env):
    """``env``, with its explicit chance nodes folded into the steps (`FoldChanceNodes`) when it
    has any: PettingZoo's agents see decision states only."""
    return _fold_chance(env) if env.traits.chance == "explicit_stochastic" else env


@functools.lru_cache(maxsize=64)
def _fold_chance(env):
    return FoldChanceNodes(env)




def _reopened(state):
    """`(state with its "terminated" field set to False, that field)` for a state (or a wrapper's
    state around one) that records the end of the game in a field `terminated`; `(state, None)`
    otherwise."""
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        names = {f.name for f in dataclasses.fields(state)}
        if "terminated" in names:
            return state.replace(terminated=jnp.zeros_like(state.terminated)), state.terminated
        for name in names:
            inner, ended = _reopened(getattr(state, name))
            if ended is not None:
                return state.replace(**{name: inner}), ended
    return state, None


@functools.lru_cache(maxsize=64)
def _aec_functions(env):
    """Jitted ``reset(key, params)`` and ``step(key, state, action, params)`` for `AECEnv`, each
    returning ``(key, state)`` for the device and, for the host, the observation without its mask,
    the legal-action mask (bool[num_agents, n]) and the agent to move (plus the step's reward,
    flags and info). Cached per environment object, so adapters over one object compile once."""

    def strip(obs):
        if isinstance(obs, dict) and "action_mask" in obs and "observation" in obs:
            return obs["observation"]
        return obs

    def view(state, params):
        mask = env.legal_action_mask(state, params)
        open_state, ended = _reopened(state)
        if ended is not None:
            # after the end PettingZoo's classic games still list the selected agent's moves as if
            # the game went on (tictactoe_v3's empty cells, connect_four_v3's open columns)
            mask = jnp.where(ended, env.legal_action_mask(open_state, params), mask)
        return mask, env.current_player(state, params)

    def reset(key, params):
        key, sub = jax.random.split(key)
        obs, state = env.reset(sub, params)
        return (key, state), (strip(obs), *view(state, params))

    def step(key, state, action, params):
        key, sub = jax.random.split(key)
        obs, state, reward, terminated, truncated, info = env.step(sub, state, action, params)
        return (key, state), (strip(obs), *view(state, params), reward, terminated, truncated, info)

    return jax.jit(reset), jax.jit(step)


class AECEnv(_Rendered, pettingzoo.AECEnv):
    """A turn-based jaxenvs environment (``traits.dynamics == "sequential"``, a Discrete action
    space) as a ``pettingzoo.AECEnv``: agents act one at a time, in the order the game sets.

    Args:
        env_or_id: a registered id (built with ``jaxenvs.make(id, autoreset=False, **make_kwargs)``;
            the spec's TimeLimit sets truncation) or a jaxenvs Environment (outermost AutoReset
            removed). Explicit chance nodes (``traits.chance == "explicit_stochastic"``) are folded
            into the steps with `jaxenvs.wrappers.FoldChanceNodes`: agents see decisions only.
        params: the environment's params (``None``: its ``default_params``).
        render_mode: ``"rgb_array"``, ``"ansi"``, ``"human"`` or None, as ``metadata["render_modes"]``
            allows.
        **make_kwargs: passed to ``jaxenvs.make``.

    PettingZoo's conventions, as its classic games keep them:

    * ``agent_selection`` is ``env.current_player(state)``; ``step(action)`` applies that agent's
      action (the other agents' rows of the joint action are ignored by the game);
    * ``observe(agent)`` is ``{"observation": ..., "action_mask": int8[n]}``: the agent's slice of
      the environment's observation (its ``"observation"`` entry when it is a dict holding one) and
      its row of `jaxenvs.core.Environment.legal_action_mask`, all zero for agents not to move;
      after the end, as PettingZoo's classic games, the moves left on the board (free cells,
      open columns) in the mask of the agent selected at the time (the one after the last mover,
      then whichever `_was_dead_step` selects), all zero for the others;
    * ``rewards`` holds every live agent's reward of the last step, ``_cumulative_rewards`` (what
      ``last()`` returns) sums them since that agent last acted: ``step`` zeroes the mover's sum,
      then adds the step's rewards to every agent's;
    * ``terminations``/``truncations`` are set for every agent at once when the episode ends; then
      each agent in turn must be stepped with ``None`` (PettingZoo's ``_was_dead_step``), which
      removes it from ``agents``; ``agents`` is empty once all are gone;
    * ``infos[agent]`` holds the step's info values (leaves with a leading agent axis split per
      agent), e.g. ``"illegal_action"``. An illegal move ends the game as the environment defines
      (TicTacToe: mover -1, the other +1, where PettingZoo's ``TerminateIllegalWrapper`` gives 0).

    Seeding as `ParallelEnv`: ``reset(seed=s)`` starts the key chain at ``jax.random.key(s)``,
    ``reset()`` continues it. Reset options are ignored.
    """

    metadata = {"render_modes": ["human", "rgb_array", "ansi"], "render_fps": 4, "is_parallelizable": False}

    def __init__(self, env_or_id, params=None, render_mode: str | None = None, **make_kwargs):
        env, params = resolve_env(env_or_id, params, make_kwargs)
        if not env.multi_agent or env.traits.dynamics != "sequential":
            raise ValueError(
                f"AECEnv takes turn-based environments (traits.dynamics='sequential', two or more agents); "
                f"{env.name} has {env.num_agents} agent(s) and dynamics={env.traits.dynamics!r}"
                + ("; use ParallelEnv" if env.multi_agent else "; use jaxenvs.adapters.gymnasium.GymnasiumEnv")
            )
        act_space = env.action_space(params)
        if not isinstance(act_space, spaces.Discrete):
            raise ValueError(f"AECEnv needs a Discrete action space (legal-action masks), {env.name} has {act_space}")
        env = _decisions_only(env)
        _setup(self, env, params, render_mode, parallelizable=False)
        n = env.num_agents
        obs_shape, _ = jax.eval_shape(env.reset, jax.random.key(0), params)
        obs_space = env.observation_space(params)
        if isinstance(obs_space, spaces.Dict) and {"observation", "action_mask"} <= set(obs_space.spaces):
            obs_space, obs_shape = obs_space.spaces["observation"], obs_shape["observation"]
        mask_space = gymnasium.spaces.Box(0, 1, (act_space.n,), np.int8)
        self.observation_spaces = {
            a: gymnasium.spaces.Dict(
                {"observation": to_gymnasium(_agent_space(obs_space, obs_shape, n, i)), "action_mask": deepcopy(mask_space)}
            )
            for i, a in enumerate(self.possible_agents)
        }
        gym_act = to_gymnasium(act_space)
        self.action_spaces = {a: deepcopy(gym_act) for a in self.possible_agents}
        self._reset_fn, self._step_fn = _aec_functions(env)
        self._key = self.state = self.np_random = None
        self._obs = self._mask = None
        self._ended = False
        self._window = HumanWindow(env.name, env.render_fps) if render_mode == "human" else None

    def reset(self, seed: int | None = None, options: dict | None = None):
        key = _reset_key(self, seed)
        (self._key, self.state), host = self._reset_fn(key, self.params)
        self._obs, self._mask, player = jax.device_get(host)
        self._ended = False
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self.agent_selection = self.possible_agents[int(player)]
        self._skip_agent_selection = None
        if self._window is not None:
            self._window.show(self._frame())

    def observe(self, agent: str):
        if self._obs is None:
            raise RuntimeError("call reset() before observe() (there is no observation before the first reset)")
        if agent not in self.possible_agents:
            raise ValueError(f"observe: unknown agent {agent!r}; the agents are {self.possible_agents}")
        i = self.possible_agents.index(agent)
        space = self.observation_spaces[agent]
        observation = obs_to_numpy(space["observation"], jax.tree.map(lambda leaf: leaf[i], self._obs))
        if self._ended:
            # PettingZoo's classic games after the end: the moves left (free cells, open columns)
            # in the mask of whichever agent is selected now (it changes as the dead agents are
            # stepped out), all zero for the others
            selected = agent == self.agent_selection
            return {"observation": observation, "action_mask": (self._mask.any(axis=0) & selected).astype(np.int8)}
        return {"observation": observation, "action_mask": self._mask[i].astype(np.int8)}

    def last(self, observe: bool = True):
        """PettingZoo's ``last()``: the observation, cumulative reward, termination, truncation and
        info of the agent to act (``agent_selection``)."""
        if self._obs is None:
            raise RuntimeError("call reset() before last() (no agent is selected before the first reset)")
        return super().last(observe)

    def step(self, action):
        if self._obs is None:
            raise RuntimeError("call reset() before step()")
        if not self.agents:
            raise RuntimeError("the episode is over (no live agents): call reset() before step()")
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            return self._was_dead_step(action)
        if action is None:
            raise ValueError(f"agent {agent!r} is to move and must pass an action; None is only for agents whose episode ended")
        i = self.possible_agents.index(agent)
        move = check_action(self.action_spaces[agent], action, where=f"{self.jaxenvs_env.name}.step (agent {agent!r})")
        joint = np.zeros((len(self.possible_agents),), np.int32)
        joint[i] = move
        (self._key, self.state), host = self._step_fn(self._key, self.state, joint, self.params)
        self._obs, self._mask, player, reward, terminated, truncated, info = jax.device_get(host)
        self._ended = bool(terminated or truncated)
        n = len(self.possible_agents)
        self._cumulative_rewards[agent] = 0.0
        self.rewards = {a: float(reward[self.possible_agents.index(a)]) for a in self.agents}
        self._accumulate_rewards()
        self.terminations = {a: bool(terminated) for a in self.agents}
        self.truncations = {a: bool(truncated) for a in self.agents}
        self.infos = {
            a: {
                k: host_value(v[j] if np.ndim(v) and np.shape(v)[0] == n else v)
                for k, v in info.items()
            }
            for a in self.agents
            for j in [self.possible_agents.index(a)]
        }
        self.agent_selection = self.possible_agents[int(player)]
        if self._window is not None:
            self._window.show(self._frame())

    def _frame(self) -> np.ndarray:
        return np.array(_render_fn(self.jaxenvs_env)(self.state, self.params))


@functools.lru_cache(maxsize=64)
def _render_fn(env):
    return jax.jit(env.render)


def _reset_key(adapter, seed: int | None) -> jax.Array:
    """The key a PettingZoo adapter's ``reset(seed)`` starts from: ``seed_to_key(seed)`` (and a
    ``np_random`` seeded with it), else a fresh seed on the first reset, else the adapter's own
    key chain."""
    if seed is not None:
        adapter.np_random, _ = seeding.np_random(seed)
        return seed_to_key(seed)
    if adapter._key is None:
        adapter.np_random, _ = seeding.np_random()
        return seed_to_key(int(adapter.np_random.integers(2**32)))
    return adapter._key


def _setup(adapter, env, params, render_mode, *, parallelizable: bool) -> None:
    """What both PettingZoo adapters' constructors set: the env and its params, PettingZoo's
    metadata, the checked render mode and the agents (none until `reset`)."""
    adapter.jaxenvs_env, adapter.params = env, params
    adapter.metadata = {
        "render_modes": supported_render_modes(env),
        "render_fps": env.render_fps,
        "name": env.name,
        "is_parallelizable": parallelizable,
    }
    check_render_mode(render_mode, adapter.metadata["render_modes"], env.name)
    adapter.render_mode = render_mode
    adapter.possible_agents = list(env.agents)
    adapter.agents = []
