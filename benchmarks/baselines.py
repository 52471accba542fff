"""What users would otherwise write: tutorial-style Python object environments (numpy) and a lean
hand-written JAX GridWorld with no API at all (the ceiling that shows what the jaxenvs API costs).

The object envs follow the tutorials' code: Gymnasium's GridWorldEnv ("Make your own custom
environment") and garage's PointEnv, as ``gymnasium.Env`` subclasses when gymnasium is installed
(so Gymnasium's ``SyncVectorEnv`` can run them), plain classes with the same methods otherwise.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

try:
    import gymnasium as gym
    from gymnasium import spaces as gspaces

    _Base = gym.Env
except ImportError:  # the Python-loop baseline still runs without gymnasium
    gym = None
    _Base = object


class GridWorldObjectEnv(_Base):
    """Gymnasium's tutorial GridWorldEnv, as written there (numpy, one env per object)."""

    metadata = {"render_modes": []}

    def __init__(self, size: int = 5, max_episode_steps: int = 300):
        self.size = size
        self.max_episode_steps = max_episode_steps
        self._action_to_direction = {
            0: np.array([1, 0]),
            1: np.array([0, 1]),
            2: np.array([-1, 0]),
            3: np.array([0, -1]),
        }
        if gym is not None:
            self.observation_space = gspaces.Dict(
                {
                    "agent": gspaces.Box(0, size - 1, shape=(2,), dtype=int),
                    "target": gspaces.Box(0, size - 1, shape=(2,), dtype=int),
                }
            )
            self.action_space = gspaces.Discrete(4)
        self.np_random_ = np.random.default_rng(0)

    def _get_obs(self):
        return {"agent": self._agent_location, "target": self._target_location}

    def _get_info(self):
        return {"distance": np.linalg.norm(self._agent_location - self._target_location, ord=1)}

    def reset(self, seed=None, options=None):
        if gym is not None:
            super().reset(seed=seed)
            rng = self.np_random
        else:
            rng = self.np_random_ = np.random.default_rng(seed) if seed is not None else self.np_random_
        self._t = 0
        self._agent_location = rng.integers(0, self.size, size=2, dtype=int)
        self._target_location = self._agent_location
        while np.array_equal(self._target_location, self._agent_location):
            self._target_location = rng.integers(0, self.size, size=2, dtype=int)
        return self._get_obs(), self._get_info()

    def step(self, action):
        direction = self._action_to_direction[int(action)]
        self._agent_location = np.clip(self._agent_location + direction, 0, self.size - 1)
        terminated = bool(np.array_equal(self._agent_location, self._target_location))
        self._t += 1
        truncated = self._t >= self.max_episode_steps
        reward = 1.0 if terminated else 0.0
        return self._get_obs(), reward, terminated, truncated, self._get_info()


class PointObjectEnv(_Base):
    """garage's tutorial PointEnv (numpy, one env per object)."""

    metadata = {"render_modes": []}

    def __init__(self, max_episode_steps: int = 100):
        self.max_episode_steps = max_episode_steps
        if gym is not None:
            self.observation_space = gspaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
            self.action_space = gspaces.Box(-0.1, 0.1, shape=(2,), dtype=np.float32)
        self.np_random_ = np.random.default_rng(0)

    def reset(self, seed=None, options=None):
        if gym is not None:
            super().reset(seed=seed)
            rng = self.np_random
        else:
            rng = self.np_random_
        self._t = 0
        self._point = rng.uniform(-1, 1, size=(2,)).astype(np.float32)
        return np.copy(self._point), {}

    def step(self, action):
        self._point = self._point + np.clip(action, -0.1, 0.1).astype(np.float32)
        x, y = self._point
        reward = -((x**2 + y**2) ** 0.5)
        terminated = bool(abs(x) < 0.01 and abs(y) < 0.01)
        self._t += 1
        truncated = self._t >= self.max_episode_steps
        return np.copy(self._point), float(reward), terminated, truncated, {}


OBJECT_ENVS = {"GridWorld-v0": GridWorldObjectEnv, "PointEnv-v0": PointObjectEnv}


def python_loop_steps_per_sec(env_id: str, num_envs: int, total_steps: int, seed: int = 0) -> float:
    """Steps/s of ``num_envs`` object envs stepped one by one in a Python loop, random actions."""
    import time

    envs = [OBJECT_ENVS[env_id]() for _ in range(num_envs)]
    rng = np.random.default_rng(seed)
    for i, e in enumerate(envs):
        e.reset(seed=seed + i)
    sample = (lambda: rng.integers(0, 4)) if env_id == "GridWorld-v0" else (lambda: rng.uniform(-0.1, 0.1, 2))
    n_iters = max(1, total_steps // num_envs)
    t0 = time.perf_counter()
    for _ in range(n_iters):
        for e in envs:
            _, _, term, trunc, _ = e.step(sample())
            if term or trunc:
                e.reset()
    return n_iters * num_envs / (time.perf_counter() - t0)


def sync_vector_steps_per_sec(env_id: str, num_envs: int, total_steps: int, seed: int = 0) -> float | None:
    """Steps/s of Gymnasium's SyncVectorEnv over the object env (None without gymnasium)."""
    if gym is None:
        return None
    import time

    venv = gym.vector.SyncVectorEnv([OBJECT_ENVS[env_id] for _ in range(num_envs)])
    venv.reset(seed=seed)
    venv.action_space.seed(seed)
    n_iters = max(1, total_steps // num_envs)
    t0 = time.perf_counter()
    for _ in range(n_iters):
        venv.step(venv.action_space.sample())
    dt = time.perf_counter() - t0
    venv.close()
    return n_iters * num_envs / dt


_DIRS = np.array([[1, 0], [0, 1], [-1, 0], [0, -1]], np.int32)


def make_lean_grid_world(num_envs: int, num_steps: int, size: int = 5, max_episode_steps: int = 300):
    """A hand-written GridWorld rollout with random actions, as lean as JAX allows: agent and
    target in plain int32[num_envs, 2] arrays, ONE ``jax.random.bits`` draw of one uint32 per env
    per step, from which the random action (bits 0-1), the reset cell of the agent (bits 2-15) and
    the target's offset from it (bits 16-31) are all taken; resets selected with ``jnp.where``.
    Same dynamics, time limit and same-step auto-reset as ``make("GridWorld-v0")`` (the modulo
    draws are uniform up to 2**-9 relative bias). Returns ``run(key) -> total reward`` (not jitted)."""
    n_cells = size * size
    dirs = jnp.asarray(_DIRS)

    def cells(bits):
        a = ((bits >> 2) & 0x3FFF) % n_cells
        t = (bits >> 16) % (n_cells - 1)
        t = (t + (t >= a)).astype(jnp.int32)  # uniform among the other cells
        a = a.astype(jnp.int32)
        return jnp.stack([a % size, a // size], -1), jnp.stack([t % size, t // size], -1)

    def body(carry, key):
        agent, target, time = carry
        bits = jax.random.bits(key, (num_envs,), jnp.uint32)
        agent = jnp.clip(agent + dirs[(bits & 3).astype(jnp.int32)], 0, size - 1)
        terminated = jnp.all(agent == target, axis=-1)
        time = time + 1
        done = terminated | (time >= max_episode_steps)
        new_agent, new_target = cells(bits)
        agent = jnp.where(done[:, None], new_agent, agent)
        target = jnp.where(done[:, None], new_target, target)
        time = jnp.where(done, 0, time)
        return (agent, target, time), terminated.sum()

    def run(key):
        key_reset, key_steps = jax.random.split(key)
        agent, target = cells(jax.random.bits(key_reset, (num_envs,), jnp.uint32))
        carry = (agent, target, jnp.zeros(num_envs, jnp.int32))
        _, rewards = jax.lax.scan(body, carry, jax.random.split(key_steps, num_steps))
        return rewards.sum()

    return run


# ---- turn-based games: Pgx, PettingZoo and OpenSpiel -----------------------------------------

# jaxenvs id -> (Pgx env id, PettingZoo classic module, OpenSpiel game)
GAMES = {
    "TicTacToe-v0": ("tic_tac_toe", "tictactoe_v3", "tic_tac_toe"),
    "ConnectFour-v0": ("connect_four", "connect_four_v3", "connect_four"),
}


def make_pgx_rollout(env_id: str, num_envs: int, num_steps: int, sampler: str = "categorical"):
    """Pgx's same game as Pgx's own speed benchmark runs it: ``jax.vmap(env.init)`` and
    ``jax.vmap(auto_reset(env.step, env.init))`` (``pgx.experimental``), one key per env per step,
    random legal actions drawn by ``sampler``: ``"categorical"``, Pgx's benchmark's
    ``jax.random.categorical`` over ``log(legal_action_mask)``, or ``"masked_uniform"``, the
    sampler jaxenvs' random-legal rollouts use (`jaxenvs.spaces.Discrete.sample` with the mask: one
    random word per env, `jaxenvs.rollout.batch_random_policy`), so that both sides of a ratio draw
    their moves alike. Returns ``run(key) -> total reward`` (not jitted)."""
    from jaxenvs import spaces

    if sampler not in ("categorical", "masked_uniform"):
        raise ValueError(f"sampler must be 'categorical' or 'masked_uniform', got {sampler!r}")
    import pgx
    from pgx.experimental import auto_reset

    env = pgx.make(GAMES[env_id][0])
    space = spaces.Discrete(env.num_actions)
    init = jax.vmap(env.init)
    step = jax.vmap(auto_reset(env.step, env.init))

    def body(carry, key):
        state, total = carry
        k_act, k_step = jax.random.split(key)
        if sampler == "categorical":
            logits = jnp.log(state.legal_action_mask.astype(jnp.float32))
            action = jax.random.categorical(k_act, logits, axis=-1)
        else:
            action = space.sample(k_act, (num_envs,), mask=state.legal_action_mask)
        state = step(state, action, jax.random.split(k_step, num_envs))
        return (state, total + jnp.sum(state.rewards)), None

    def run(key):
        key_init, key_run = jax.random.split(key)
        state = init(jax.random.split(key_init, num_envs))
        (_, total), _ = jax.lax.scan(body, (state, jnp.zeros((), jnp.float32)), jax.random.split(key_run, num_steps))
        return total

    return run


def pettingzoo_loop_steps_per_sec(env_id: str, total_steps: int, seed: int = 0) -> float:
    """Moves/s of PettingZoo's AEC game (``classic.<game>.env()``, its standard wrappers) played by
    random legal moves in a Python loop, reset when the game ends (the dead agents' ``None`` steps
    are part of the loop but not counted as moves)."""
    import time
    from jaxenvs.adapters.pettingzoo import classic_env

    env = classic_env(GAMES[env_id][1])
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    moves = 0
    t0 = time.perf_counter()
    while moves < total_steps:
        obs, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            if not env.agents:
                env.reset()
            continue
        env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        moves += 1
    return moves / (time.perf_counter() - t0)


def openspiel_loop_steps_per_sec(env_id: str, total_steps: int, seed: int = 0) -> float:
    """Moves/s of OpenSpiel's game (``pyspiel.load_game``) played by random legal moves in a
    Python loop (``legal_actions``, ``apply_action``; a new initial state when the game ends)."""
    import time

    import pyspiel

    game = pyspiel.load_game(GAMES[env_id][2])
    rng = np.random.default_rng(seed)
    state = game.new_initial_state()
    t0 = time.perf_counter()
    for _ in range(total_steps):
        state.apply_action(int(rng.choice(state.legal_actions())))
        if state.is_terminal():
            state = game.new_initial_state()
    return total_steps / (time.perf_counter() - t0)
