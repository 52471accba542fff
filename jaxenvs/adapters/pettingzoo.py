"""PettingZoo adapter: :class:`ParallelEnv`, a multi-agent jaxenvs environment as a
``pettingzoo.ParallelEnv``::

    from jaxenvs.adapters.pettingzoo import ParallelEnv
    env = ParallelEnv("RockPaperScissors-v0")
    obs, infos = env.reset(seed=0)
    obs, rewards, terminations, truncations, infos = env.step({a: env.action_space(a).sample() for a in env.agents})
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

import jax
import numpy as np
from jaxenvs._optional import require

require("pettingzoo", extra="pettingzoo", purpose="the PettingZoo adapter (jaxenvs.adapters.pettingzoo)")
require("gymnasium", extra="pettingzoo", purpose="the PettingZoo adapter (jaxenvs.adapters.pettingzoo)")

import pettingzoo  # noqa: E402
from gymnasium.utils import seeding  # noqa: E402

from jaxenvs import spaces
from jaxenvs.adapters import Runner, resolve_env, seed_to_key
from jaxenvs.adapters.host import (
    HumanWindow,
    check_action,
    check_render_mode,
    host_value,
    obs_to_numpy,
    supported_render_modes,
)
from jaxenvs.spaces import to_gymnasium

__all__ = ["ParallelEnv"]


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


class ParallelEnv(pettingzoo.ParallelEnv):
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
    as :class:`~jaxenvs.adapters.gymnasium.GymnasiumEnv`: ``reset(seed=s)`` starts the key chain at
    ``jax.random.key(s)``, ``reset()`` continues it. Reset options are ignored.
    """

    metadata = {"render_modes": ["human", "rgb_array", "ansi"], "render_fps": 4, "is_parallelizable": True}

    def __init__(self, env_or_id, params=None, render_mode: str | None = None, **make_kwargs):
        env, params = resolve_env(env_or_id, params, make_kwargs)
        if not env.multi_agent:
            raise ValueError(
                f"{env.name} is a single-agent environment; use jaxenvs.adapters.gymnasium.GymnasiumEnv"
            )
        self.jaxenvs_env, self.params = env, params
        self.metadata = {
            "render_modes": supported_render_modes(env),
            "render_fps": env.render_fps,
            "name": env.name,
            "is_parallelizable": True,
        }
        check_render_mode(render_mode, self.metadata["render_modes"], env.name)
        self.render_mode = render_mode
        self.possible_agents = list(env.agents)
        self.agents: list[str] = []
        n = env.num_agents
        obs_shape, _ = jax.eval_shape(env.reset, jax.random.key(0), params)
        obs_space = env.observation_space(params)
        self.observation_spaces = {
            a: to_gymnasium(_agent_space(obs_space, obs_shape, n, i)) for i, a in enumerate(self.possible_agents)
        }
        act_space = to_gymnasium(env.action_space(params))
        self.action_spaces = {a: deepcopy(act_space) for a in self.possible_agents}
        self._run = Runner(env, False)
        self._key = self.state = self.np_random = None
        self._window = HumanWindow(env.name, env.render_fps) if render_mode == "human" else None

    def observation_space(self, agent: str):
        return self.observation_spaces[agent]

    def action_space(self, agent: str):
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)
            key = seed_to_key(seed)
        elif self._key is None:
            self.np_random, _ = seeding.np_random()
            key = seed_to_key(int(self.np_random.integers(2**32)))
        else:
            key = self._key
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
