"""Reference implementations of the five tutorials' environments, in numpy, with the originals' logic.

These are what :func:`jaxenvs.testing.verify_port` checks the built-in ports against
(tests/test_verify_port.py). Each follows its tutorial's code, translated to Gymnasium's API
(``reset(seed=...)`` and ``self.np_random``; five-tuple ``step``) or PettingZoo's ``ParallelEnv``:

* :class:`GridWorldEnv` -- Gymnasium's "Make your own custom environment" (``GridWorldEnv``),
  ``make_grid_world()`` adds ``TimeLimit(300)`` as the tutorial's registration does;
* :class:`PointEnv` -- garage's "Adding a new environment" tutorial: position += action,
  reward ``-sqrt(x^2 + y^2)``, done within 0.01 on both axes (the tutorial neither clips actions
  nor bounds the plane); ``make_point_env()`` adds ``TimeLimit(100)``;
* :class:`HurdleRaceEnv` -- POSGGym's custom-environment tutorial (``HurdleRaceModel``) as a
  PettingZoo ``ParallelEnv`` with the model's state ``(positions, hurdles)`` and 50 steps at most;
* :class:`MazeEnv` -- jaxenvs' Maze-v0 written plainly from its docstring (JaxUED's reward, four
  absolute moves, the agent-centred 5 x 5 view) on its default 13 x 13 level; ``make_maze()`` adds
  ``TimeLimit(250)``;
* :class:`LotteryEnv` and :class:`RockPaperScissorsEnv` -- ReinforcementLearning.jl's
  ``LotteryEnv`` and ``RockPaperScissorsEnv`` (one-shot games; RPS as a ``ParallelEnv``).

``STATE_TO_JAX`` maps each reference's state to the jaxenvs port's state, for ``state_to_jax``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit
from pettingzoo import ParallelEnv

from jaxenvs.envs import grid_world, hurdle_race, lottery, maze, point_env, rock_paper_scissors


class GridWorldEnv(gym.Env):
    """Gymnasium's tutorial GridWorld (rendering left out)."""

    metadata = {"render_modes": [], "render_fps": 4}

    def __init__(self, size: int = 5):
        self.size = size
        self.observation_space = spaces.Dict(
            {
                "agent": spaces.Box(0, size - 1, shape=(2,), dtype=int),
                "target": spaces.Box(0, size - 1, shape=(2,), dtype=int),
            }
        )
        self.action_space = spaces.Discrete(4)
        # right, up, left, down
        self._action_to_direction = {
            0: np.array([1, 0]),
            1: np.array([0, 1]),
            2: np.array([-1, 0]),
            3: np.array([0, -1]),
        }

    def _get_obs(self):
        return {"agent": self._agent_location, "target": self._target_location}

    def _get_info(self):
        return {"distance": np.linalg.norm(self._agent_location - self._target_location, ord=1)}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self._agent_location = self.np_random.integers(0, self.size, size=2, dtype=int)
        # sample the target's location randomly until it does not coincide with the agent's
        self._target_location = self._agent_location
        while np.array_equal(self._target_location, self._agent_location):
            self._target_location = self.np_random.integers(0, self.size, size=2, dtype=int)
        return self._get_obs(), self._get_info()

    def step(self, action):
        direction = self._action_to_direction[action]
        self._agent_location = np.clip(self._agent_location + direction, 0, self.size - 1)
        terminated = np.array_equal(self._agent_location, self._target_location)
        reward = 1 if terminated else 0
        return self._get_obs(), reward, terminated, False, self._get_info()


def make_grid_world(size: int = 5):
    return TimeLimit(GridWorldEnv(size), max_episode_steps=300)


class PointEnv(gym.Env):
    """garage's tutorial PointEnv (``done`` becomes ``terminated``)."""

    metadata = {"render_modes": []}

    def __init__(self):
        self.observation_space = spaces.Box(low=-np.inf, high=np.inf, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Box(low=-0.1, high=0.1, shape=(2,), dtype=np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self._state = self.np_random.uniform(-1, 1, size=(2,))
        return np.copy(self._state), {}

    def step(self, action):
        self._state = self._state + action
        x, y = self._state
        reward = -((x**2 + y**2) ** 0.5)
        done = abs(x) < 0.01 and abs(y) < 0.01
        return np.copy(self._state), reward, done, False, {}


def make_point_env():
    return TimeLimit(PointEnv(), max_episode_steps=100)


class HurdleRaceEnv(ParallelEnv):
    """POSGGym's tutorial HurdleRace: two runners on identical tracks of cells 0..10."""

    metadata = {"name": "HurdleRace", "render_modes": []}
    RUN, JUMP = 0, 1
    NOHURDLE, HURDLE = 0, 1

    def __init__(self, track_length: int = 10, hurdle_slots=((1, 2), (4, 5), (7, 8)), jump_success_rate=0.9,
                 max_episode_steps: int = 50):
        self.track_length = track_length
        self.hurdle_slots = hurdle_slots
        self.jump_success_rate = jump_success_rate
        self.max_episode_steps = max_episode_steps
        self.possible_agents = ["0", "1"]
        self.agents = []
        self.np_random = np.random.default_rng()

    def observation_space(self, agent):
        return spaces.Discrete(2)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def _obs(self):
        return {a: self.HURDLE if self.pos[i] + 1 in self.hurdles else self.NOHURDLE for i, a in enumerate(self.possible_agents)}

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.hurdles = [int(self.np_random.choice(slot)) for slot in self.hurdle_slots]
        self.pos = [0, 0]
        self.steps = 0
        self.agents = list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def _next_pos(self, pos, action):
        if action == self.RUN:
            if pos + 1 in self.hurdles:
                return pos  # ran into the hurdle
            pos += 1
            if pos + 1 not in self.hurdles:
                pos += 1
            return min(pos, self.track_length)
        # JUMP: one cell; over a hurdle only with probability jump_success_rate
        if pos + 1 in self.hurdles and self.np_random.random() >= self.jump_success_rate:
            return pos
        return min(pos + 1, self.track_length)

    def step(self, actions):
        self.pos = [self._next_pos(self.pos[i], actions[a]) for i, a in enumerate(self.possible_agents)]
        self.steps += 1
        finished = [p >= self.track_length for p in self.pos]
        done = any(finished)
        if all(finished):
            rewards = [0.0, 0.0]
        elif finished[0]:
            rewards = [1.0, -1.0]
        elif finished[1]:
            rewards = [-1.0, 1.0]
        else:
            rewards = [0.0, 0.0]
        truncated = not done and self.steps >= self.max_episode_steps
        agents = self.possible_agents
        out = (
            self._obs(),
            dict(zip(agents, rewards)),
            {a: done for a in agents},
            {a: truncated for a in agents},
            {a: {"pos": self.pos[i]} for i, a in enumerate(agents)},
        )
        if done or truncated:
            self.agents = []
        return out


class LotteryEnv(gym.Env):
    """ReinforcementLearning.jl's LotteryEnv: ``:PowerRich``, ``:MegaHaul`` or ``nothing``."""

    metadata = {"render_modes": []}
    ACTIONS = ("PowerRich", "MegaHaul", None)

    def __init__(self):
        self.observation_space = spaces.Discrete(2)  # is_terminated
        self.action_space = spaces.Discrete(3)
        self.reward = None

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.reward = None
        return int(self.reward is not None), {}

    def step(self, action):
        choice = self.ACTIONS[action]
        if choice == "PowerRich":
            self.reward = 100_000_000 if self.np_random.random() < 0.01 else -10
        elif choice == "MegaHaul":
            self.reward = 1_000_000 if self.np_random.random() < 0.05 else -10
        else:
            self.reward = 0
        return int(self.reward is not None), self.reward, True, False, {}


class RockPaperScissorsEnv(ParallelEnv):
    """ReinforcementLearning.jl's RockPaperScissorsEnv: both players choose at once, one round."""

    metadata = {"name": "RockPaperScissors", "render_modes": []}
    ACTIONS = ("rock", "paper", "scissors")
    BEATS = {("rock", "scissors"), ("paper", "rock"), ("scissors", "paper")}

    def __init__(self):
        self.possible_agents = ["0", "1"]
        self.agents = []
        self.reward = (0, 0)

    def observation_space(self, agent):
        return spaces.Discrete(2)  # is_terminated

    def action_space(self, agent):
        return spaces.Discrete(3)

    def reset(self, seed=None, options=None):
        self.done = False
        self.agents = list(self.possible_agents)
        return {a: 0 for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        c0, c1 = self.ACTIONS[actions["0"]], self.ACTIONS[actions["1"]]
        self.reward = (1, -1) if (c0, c1) in self.BEATS else (-1, 1) if (c1, c0) in self.BEATS else (0, 0)
        self.done = True
        agents = self.possible_agents
        self.agents = []
        return (
            {a: 1 for a in agents},
            dict(zip(agents, self.reward)),
            {a: True for a in agents},
            {a: False for a in agents},
            {a: {} for a in agents},
        )


class MazeEnv(gym.Env):
    """A grid maze in plain numpy: ``#`` walls, start ``S``, goal ``G`` (rows downwards)."""

    metadata = {"render_modes": []}
    MOVES = {0: (-1, 0), 1: (0, 1), 2: (1, 0), 3: (0, -1)}  # up, right, down, left

    def __init__(self, layout: str = maze.DEFAULT_LAYOUT, max_steps: int = 250, view: int = 5):
        rows = layout.strip().splitlines()
        self.walls = np.array([[c == "#" for c in r] for r in rows])
        self.start = next((y, x) for y, r in enumerate(rows) for x, c in enumerate(r) if c == "S")
        self.goal = next((y, x) for y, r in enumerate(rows) for x, c in enumerate(r) if c == "G")
        self.max_steps, self.view = max_steps, view
        self.observation_space = spaces.Box(0.0, 1.0, (view, view, 2), np.float32)
        self.action_space = spaces.Discrete(4)

    def _obs(self):
        r = self.view // 2
        obs = np.zeros((self.view, self.view, 2), np.float32)
        for i in range(self.view):
            for j in range(self.view):
                y, x = self._pos[0] - r + i, self._pos[1] - r + j
                inside = 0 <= y < self.walls.shape[0] and 0 <= x < self.walls.shape[1]
                obs[i, j, 0] = 1.0 if not inside or self.walls[y, x] else 0.0
                obs[i, j, 1] = 1.0 if (y, x) == self.goal else 0.0
        return obs

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self._pos, self._t = self.start, 0
        return self._obs(), {}

    def step(self, action):
        dy, dx = self.MOVES[int(action)]
        y, x = self._pos[0] + dy, self._pos[1] + dx
        if 0 <= y < self.walls.shape[0] and 0 <= x < self.walls.shape[1] and not self.walls[y, x]:
            self._pos = (y, x)
        self._t += 1
        terminated = self._pos == self.goal
        reward = 1.0 - 0.9 * min(self._t, self.max_steps) / self.max_steps if terminated else 0.0
        return self._obs(), reward, terminated, False, {"time": self._t}


def make_maze():
    return TimeLimit(MazeEnv(), max_episode_steps=250)


# reference env -> the jaxenvs port's (unwrapped) state
STATE_TO_JAX = {
    "GridWorld-v0": lambda e: grid_world.EnvState(agent=e.unwrapped._agent_location, target=e.unwrapped._target_location),
    "PointEnv-v0": lambda e: point_env.EnvState(position=e.unwrapped._state),
    "HurdleRace-v0": lambda e: hurdle_race.EnvState(pos=np.array(e.pos), hurdles=np.array(e.hurdles)),
    "Maze-v0": lambda e: maze.EnvState(pos=np.array(e.unwrapped._pos, np.int32), time=np.int32(e.unwrapped._t)),
    "Lottery-v0": lambda e: lottery.EnvState(
        played=np.int32(e.reward is not None), action=np.int32(-1), won=np.bool_(False)
    ),
    "RockPaperScissors-v0": lambda e: rock_paper_scissors.EnvState(
        played=np.int32(e.done), actions=np.array([-1, -1])
    ),
}

REFERENCES = {
    "GridWorld-v0": make_grid_world,
    "PointEnv-v0": make_point_env,
    "HurdleRace-v0": HurdleRaceEnv,
    "Lottery-v0": LotteryEnv,
    "RockPaperScissors-v0": RockPaperScissorsEnv,
    "Maze-v0": make_maze,
}


class SlipperyCorridorEnv(gym.Env):
    """A slippery corridor of 7 cells in plain Gymnasium, with no transition table: the agent
    starts in cell 3 and moves left (0) or right (1), but with probability `slip` it moves the
    other way; each step costs `step_cost`, reaching cell 6 pays 1; cells 0 and 6 end the
    episode. ``make_corridor()`` adds ``TimeLimit(50)``. (The stochastic env of the port
    verification tests: `benchmarks/verify_power.py` ports it.)"""

    metadata = {"render_modes": []}

    def __init__(self, slip: float = 0.2, step_cost: float = 0.1):
        self.slip, self.step_cost = slip, step_cost
        self.observation_space = spaces.Discrete(7)
        self.action_space = spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 3
        return self.pos, {}

    def step(self, action):
        move = 1 if action == 1 else -1
        if self.np_random.random() < self.slip:
            move = -move
        self.pos += move
        terminated = self.pos in (0, 6)
        reward = -self.step_cost + (1.0 if self.pos == 6 else 0.0)
        return self.pos, reward, terminated, False, {}


def make_corridor():
    return TimeLimit(SlipperyCorridorEnv(), 50)
