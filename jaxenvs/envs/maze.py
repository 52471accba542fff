"""Maze: a grid maze whose walls, start and goal are params (JaxUED's Maze, with 4 moves).

An agent walks from ``start`` to ``goal`` on a ``size x size`` grid (13 by default, as JaxUED's)
whose cells are free or walls. The level lives in the params, so one compiled program plays a
batch of different mazes (`jaxenvs.levels`, `jaxenvs.VectorEnv`'s per-env levels):

* params: ``walls`` bool[size, size] (row, column), ``start`` and ``goal`` int32[2] (row, column),
  ``max_steps`` (the horizon of the reward's time discount; the registered time limit is 250,
  equal to the default);
* reset: the agent on ``start``, ``time`` 0 (no randomness: the level is the params);
* actions ``UP = 0`` (row - 1), ``RIGHT = 1`` (column + 1), ``DOWN = 2`` (row + 1), ``LEFT = 3``
  (column - 1); a move into a wall or off the grid leaves the agent in place; every step adds 1 to
  ``time``;
* reward, as JaxUED's: ``1 - 0.9 * min(time, max_steps) / max_steps`` (float32) on the step that
  reaches the goal (``terminated``), else 0;
* observation: float32[view_size, view_size, 2], the agent-centred window of cells (5 x 5 by
  default, the agent on its centre cell, rows downwards): channel 0 is 1 on a wall or outside the
  grid, channel 1 is 1 on the goal. ``info["time"]`` (int32) is the step count.

The observation follows JaxUED's and MiniGrid's partial, agent-centred view (what makes levels
matter: the agent must explore), but with four absolute moves instead of MiniGrid's
left/right/forward: then the fewest steps from start to goal is exactly the breadth-first
distance over cells, so `Maze.shortest_path_length`, `Maze.optimal_return` and `Maze.regret` are
exact for every level (with turns, optimal returns need a search over (cell, direction)).
The distance is computed in ``jit`` by a fixed number (``size**2 - 1``) of frontier
expansions, with no data-dependent loop (`distances`), so it runs on an accelerator without
reading anything back.

Levels: `generate_level` puts up to ``num_walls`` walls on cells drawn uniformly with
replacement (JaxUED's DR generator; fewer walls when draws coincide), then start and goal on two
distinct free cells drawn uniformly. A generated maze is **not** always solvable;
``shortest_path_length(params) == -1`` says which are not (their optimal return is 0).
`Maze.param_space` is that generator with ACCEL's mutation (`mutate_level`: one cell other than
start and goal flips between wall and free). `heldout_levels` is a fixed held-out set.

Stepping a terminated state (no auto-reset): the dynamics apply unchanged (as GridWorld's). Params
are checked on the host by ``validate_params``: start and goal inside the grid, on free cells and
distinct; ``max_steps >= 1``. Traced params with a start on a wall play as given.
"""

from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import prng, spaces, struct
from jaxenvs.core import Environment, Traits, require_param
from jaxenvs.rendering import draw
from jaxenvs.levels import ParamSpace, concat_levels, load_levels

UP, RIGHT, DOWN, LEFT = 0, 1, 2, 3
# rows: action index -> (d_row, d_col)
DIRECTIONS = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]], dtype=np.int32)
NUM_ACTIONS = len(DIRECTIONS)
DEFAULT_SIZE = 13
DEFAULT_MAX_STEPS = 250
DEFAULT_NUM_WALLS = 60
CELL_PX = 16
WALL_COLOR = (60, 60, 60)
VIEW_COLOR = (255, 245, 200)
LEVELS_DIR = os.path.join(os.path.dirname(__file__), "maze_levels")
HELDOUT_SEED = 48_000  # the generated part of the held-out set: param_space().sample(key(HELDOUT_SEED), (500,))
NUM_HELDOUT_GENERATED = 500


# the default level of the 13 x 13 maze (``#`` wall, ``S`` start, ``G`` goal; see `level_from_text`)
DEFAULT_LAYOUT = """
S....#.......
.###.#.#####.
.#...#.....#.
.#.#####.#.#.
.#.......#...
.#####.###.#.
.....#...#.#.
####.###.#.#.
.....#...#.#.
.#####.###.#.
.#.....#...#.
.#.#####.###.
...#........G
"""


@struct.dataclass
class EnvParams:
    walls: jax.Array  # bool[size, size], True on a wall; (row, column)
    start: jax.Array  # int32[2], (row, column) of the agent's first cell
    goal: jax.Array  # int32[2], (row, column) of the goal
    max_steps: int = DEFAULT_MAX_STEPS  # horizon of the reward's time discount; >= 1


@struct.dataclass
class EnvState:
    pos: jax.Array  # int32[2], (row, column)
    time: jax.Array  # int32[], steps taken


def distances(walls: jax.Array, goal: jax.Array) -> jax.Array:
    """int32[H, W]: the fewest moves from each cell to ``goal`` through free cells; -1 on walls and
    on cells that cannot reach the goal. ``H * W - 1`` frontier expansions (the longest shortest
    path of a grid is shorter), each a min over the 4 neighbours: fixed work, jittable, vmappable."""
    h, w = walls.shape
    inf = jnp.int32(h * w)
    free = ~jnp.asarray(walls)
    rows, cols = jnp.arange(h)[:, None], jnp.arange(w)[None, :]
    d0 = jnp.where((rows == goal[0]) & (cols == goal[1]) & free, 0, inf).astype(jnp.int32)

    def expand(_, d):
        pad = jnp.pad(d, 1, constant_values=inf)
        nb = jnp.minimum(jnp.minimum(pad[:-2, 1:-1], pad[2:, 1:-1]), jnp.minimum(pad[1:-1, :-2], pad[1:-1, 2:]))
        return jnp.where(free, jnp.minimum(d, nb + 1), inf)

    d = jax.lax.fori_loop(0, h * w - 1, expand, d0)
    return jnp.where(d >= inf, -1, d).astype(jnp.int32)


def generate_level(key: jax.Array, params: EnvParams, num_walls: int = DEFAULT_NUM_WALLS) -> EnvParams:
    """``params`` with a random maze: up to ``num_walls`` walls on cells drawn uniformly with
    replacement, then start and goal on two distinct free cells drawn uniformly (``max_steps``
    kept). Not always solvable (see `Maze.shortest_path_length`). Jittable, vmappable."""
    h, w = params.walls.shape
    if not 0 <= num_walls <= h * w - 2:
        raise ValueError(f"Maze generate_level: num_walls must be in [0, {h * w - 2}] (two cells stay free), got {num_walls}")
    k_walls, k_cells = prng.split(key)
    # modulo bias below 2**-32 * size**2 (negligible); a comparison, not a scatter: XLA fuses it
    cells = (prng.bits(k_walls, (num_walls,)) % jnp.uint32(h * w)).astype(jnp.int32)
    flat = jnp.arange(h * w, dtype=jnp.int32)
    walls = jnp.any(cells[:, None] == flat[None, :], axis=0)
    scores = jnp.where(walls, -1.0, prng.uniform(k_cells, (h * w,)))
    first = jnp.argmax(scores)  # two distinct free cells, uniformly: the two largest scores
    second = jnp.argmax(jnp.where(flat == first, -2.0, scores))
    pick = jnp.stack([first, second]).astype(jnp.int32)
    to_rc = lambda i: jnp.stack([i // w, i % w]).astype(jnp.int32)  # noqa: E731
    return params.replace(walls=walls.reshape(h, w), start=to_rc(pick[0]), goal=to_rc(pick[1]))


def mutate_level(key: jax.Array, params: EnvParams) -> EnvParams:
    """ACCEL's maze edit: one cell other than start and goal, drawn uniformly, flips between wall
    and free. Jittable, vmappable."""
    h, w = params.walls.shape
    flat = jnp.arange(h * w)
    keep = (flat == params.start[0] * w + params.start[1]) | (flat == params.goal[0] * w + params.goal[1])
    cell = jnp.argmax(jnp.where(keep, -1.0, prng.uniform(key, (h * w,))))
    walls = jnp.asarray(params.walls).reshape(-1)
    return params.replace(walls=walls.at[cell].set(~walls[cell]).reshape(h, w))


def level_from_text(rows, max_steps: int = DEFAULT_MAX_STEPS) -> EnvParams:
    """A level drawn as text, one string per row: ``#`` wall, ``.`` free, ``S`` start, ``G`` goal
    (exactly one of each); raises ValueError naming what is wrong."""
    rows = [r for r in (rows.strip().splitlines() if isinstance(rows, str) else rows)]
    if not rows or len({len(r) for r in rows}) != 1:
        raise ValueError("Maze level_from_text: rows must be non-empty strings of one length")
    grid = np.array([list(r) for r in rows])
    bad = set(grid.ravel()) - set("#.SG")
    if bad:
        raise ValueError(f"Maze level_from_text: unknown cell characters {sorted(bad)}; use # . S G")
    where = {c: np.argwhere(grid == c) for c in "SG"}
    for c, found in where.items():
        if len(found) != 1:
            raise ValueError(f"Maze level_from_text: exactly one {c!r} needed, found {len(found)}")
    # numpy leaves: a level built while a function is traced holds no tracer
    return EnvParams(
        walls=grid == "#",
        start=where["S"][0].astype(np.int32),
        goal=where["G"][0].astype(np.int32),
        max_steps=np.int32(max_steps),
    )


class Maze(Environment):
    """Walk from start to goal in a maze that is a params value (see the module docstring).

    ``size`` (cells per side) and ``view_size`` (odd; the observation's window) fix shapes, so
    they are constructor arguments; ``num_walls`` is the default param space's wall count (None:
    60 on the 13 x 13 maze, the same density, ``60 * size**2 // 169``, on other sizes).
    """

    traits = Traits(num_agents=1, chance="deterministic", information="perfect", reward_style="terminal")
    render_fps = 8
    ACTION_NAMES = ("up", "right", "down", "left")
    # what the frame's colours mean (jaxenvs.rendering.legend)
    legend = (((WALL_COLOR, "wall"), (draw.GREEN, "goal"), (draw.RED, "agent"), (VIEW_COLOR, "agent's view")),)

    def __init__(self, size: int = DEFAULT_SIZE, view_size: int = 5, num_walls: int | None = None):
        if not isinstance(size, int) or isinstance(size, bool) or size < 2:
            raise ValueError(f"Maze size must be an int >= 2, got {size!r}")
        if not isinstance(view_size, int) or isinstance(view_size, bool) or view_size < 1 or view_size % 2 == 0:
            raise ValueError(f"Maze view_size must be an odd int >= 1, got {view_size!r}")
        if num_walls is None and isinstance(size, int):
            num_walls = DEFAULT_NUM_WALLS * size * size // (DEFAULT_SIZE * DEFAULT_SIZE)
        if not isinstance(num_walls, int) or isinstance(num_walls, bool) or not 0 <= num_walls <= size * size - 2:
            raise ValueError(f"Maze num_walls must be an int in [0, {size * size - 2}], got {num_walls!r}")
        self.size, self.view_size, self.num_walls = size, view_size, num_walls

    @functools.cached_property
    def default_params(self) -> EnvParams:
        """`DEFAULT_LAYOUT` for the 13 x 13 maze; for other sizes an open grid (no walls) with the
        start in the top-left corner and the goal in the bottom-right one."""
        n = self.size
        if n == DEFAULT_SIZE:
            level = level_from_text(DEFAULT_LAYOUT)
            return level.replace(max_steps=DEFAULT_MAX_STEPS)
        return EnvParams(
            walls=np.zeros((n, n), bool),
            start=np.zeros((2,), np.int32),
            goal=np.full((2,), n - 1, np.int32),
        )

    def param_space(self):
        """`generate_level` with ``num_walls`` walls, `mutate_level` as the mutation, and
        `level_is_valid` as the validity test of ``contains``."""
        return ParamSpace(
            self.default_params,
            generator=functools.partial(generate_level, num_walls=self.num_walls),
            mutate=mutate_level,
            valid=self.level_is_valid,
        )

    def validate_params(self, params: EnvParams) -> None:
        require_param("Maze", "max_steps", params.max_steps, integer=True, low=1)
        walls, start, goal = np.asarray(params.walls), np.asarray(params.start), np.asarray(params.goal)
        if walls.dtype != np.bool_:
            raise ValueError(f"Maze walls must be a bool array, got dtype {walls.dtype}")
        for name, rc in (("start", start), ("goal", goal)):
            if not np.issubdtype(rc.dtype, np.integer) or np.any(rc < 0) or np.any(rc >= self.size):
                raise ValueError(f"Maze {name} must be integer (row, column) cells in [0, {self.size - 1}], got {rc.tolist()}")
        flat = walls.reshape(*walls.shape[:-2], -1)
        on = lambda rc: np.take_along_axis(flat, (rc[..., 0] * self.size + rc[..., 1])[..., None], -1)[..., 0]  # noqa: E731
        ok = ~on(start) & ~on(goal) & np.any(start != goal, axis=-1)
        if not np.all(ok):
            raise ValueError(
                f"Maze start {start.tolist()} and goal {goal.tolist()} must be distinct free cells (not walls)"
            )

    def heldout_levels(self) -> EnvParams:
        """This maze's fixed held-out set (module function `heldout_levels`; computed once)."""
        if "_heldout" not in self.__dict__:
            self.__dict__["_heldout"] = heldout_levels(self)
        return self.__dict__["_heldout"]

    def level_is_valid(self, params: EnvParams) -> jax.Array:
        """bool[]: start and goal inside the grid, distinct, on free cells; ``max_steps >= 1``."""
        n = self.size
        inside = jnp.all((params.start >= 0) & (params.start < n) & (params.goal >= 0) & (params.goal < n))
        start, goal = jnp.clip(params.start, 0, n - 1), jnp.clip(params.goal, 0, n - 1)
        free = lambda rc: ~jnp.asarray(params.walls)[rc[0], rc[1]]  # noqa: E731
        return inside & free(start) & free(goal) & jnp.any(start != goal) & (jnp.asarray(params.max_steps) >= 1)

    # ---- exact values of a level --------------------------------------------------------------
    def shortest_path_length(self, params: EnvParams | None = None) -> jax.Array:
        """int32[]: the fewest steps from start to goal, -1 when the goal cannot be reached
        (`distances`; jittable, vmap it over a batch of levels)."""
        params = self.default_params if params is None else params
        return distances(params.walls, params.goal)[params.start[0], params.start[1]]

    def optimal_return(self, params: EnvParams | None = None, max_episode_steps: int = DEFAULT_MAX_STEPS) -> jax.Array:
        """float32[]: the highest undiscounted episode return: ``1 - 0.9 * d / max_steps`` for a
        shortest path of ``d <= max_episode_steps`` steps (the time limit), else 0."""
        params = self.default_params if params is None else params
        d = self.shortest_path_length(params)
        solvable = (d >= 0) & (d <= max_episode_steps)
        return jnp.where(solvable, self._goal_reward(d, params), 0.0).astype(jnp.float32)

    def regret(self, params: EnvParams, episode_return, max_episode_steps: int = DEFAULT_MAX_STEPS) -> jax.Array:
        """float32: `optimal_return` minus ``episode_return`` (the exact regret of an episode)."""
        return self.optimal_return(params, max_episode_steps) - jnp.asarray(episode_return, jnp.float32)

    @staticmethod
    def _goal_reward(time, params):
        m = jnp.asarray(params.max_steps, jnp.float32)
        return (1.0 - 0.9 * jnp.minimum(time.astype(jnp.float32), m) / m).astype(jnp.float32)

    # ---- dynamics -----------------------------------------------------------------------------
    def reset_env(self, key, params):
        state = EnvState(pos=jnp.asarray(params.start, jnp.int32), time=jnp.zeros((), jnp.int32))
        return self._obs(state, params), state

    def step_env(self, key, state, action, params):
        action = jnp.clip(action, 0, NUM_ACTIONS - 1)
        n = self.size
        target = state.pos + jnp.asarray(DIRECTIONS)[action]
        inside = jnp.all((target >= 0) & (target < n))
        safe = jnp.clip(target, 0, n - 1)
        blocked = ~inside | jnp.asarray(params.walls)[safe[0], safe[1]]
        pos = jnp.where(blocked, state.pos, target).astype(jnp.int32)
        time = state.time + 1
        terminated = jnp.all(pos == params.goal)
        reward = jnp.where(terminated, self._goal_reward(time, params), 0.0).astype(jnp.float32)
        state = EnvState(pos=pos, time=time)
        return self._obs(state, params), state, reward, terminated, jnp.zeros((), bool), {"time": time}

    def _obs(self, state, params):
        r, n = self.view_size // 2, self.size
        offs = jnp.arange(-r, r + 1)
        rows, cols = state.pos[0] + offs, state.pos[1] + offs
        inside = ((rows >= 0) & (rows < n))[:, None] & ((cols >= 0) & (cols < n))[None, :]
        walls = jnp.asarray(params.walls)[jnp.clip(rows, 0, n - 1)[:, None], jnp.clip(cols, 0, n - 1)[None, :]]
        goal = (rows == params.goal[0])[:, None] & (cols == params.goal[1])[None, :]
        return jnp.stack([walls | ~inside, goal], axis=-1).astype(jnp.float32)

    def observation_space(self, params=None):
        return spaces.Box(0.0, 1.0, (self.view_size, self.view_size, 2), np.float32)

    def action_space(self, params=None):
        return spaces.Discrete(NUM_ACTIONS)

    # ---- pictures -----------------------------------------------------------------------------
    def render(self, state, params=None):
        """uint8[size * 16, size * 16, 3]: free cells white, walls dark grey, the agent's view
        tinted yellow, the goal green, the agent a red disc."""
        n, r = self.size, self.view_size // 2
        rows, cols = jnp.arange(n)[:, None], jnp.arange(n)[None, :]
        in_view = (jnp.abs(rows - state.pos[0]) <= r) & (jnp.abs(cols - state.pos[1]) <= r)
        colour = jnp.where(in_view[..., None], jnp.asarray(VIEW_COLOR, jnp.uint8), jnp.asarray(draw.WHITE, jnp.uint8))
        colour = jnp.where(jnp.asarray(params.walls)[..., None], jnp.asarray(WALL_COLOR, jnp.uint8), colour)
        goal = (rows == params.goal[0]) & (cols == params.goal[1])
        colour = jnp.where(goal[..., None], jnp.asarray(draw.GREEN, jnp.uint8), colour)
        frame = jnp.repeat(jnp.repeat(colour, CELL_PX, axis=0), CELL_PX, axis=1)
        cy, cx = (state.pos[0] + 0.5) * CELL_PX, (state.pos[1] + 0.5) * CELL_PX
        return draw.fill_circle(frame, cx, cy, CELL_PX / 3, draw.RED)

    def render_text(self, state, params=None):
        walls, pos, goal = np.asarray(params.walls), tuple(np.asarray(state.pos)), tuple(np.asarray(params.goal))
        return "\n".join(
            "".join("A" if (y, x) == pos else "G" if (y, x) == goal else "#" if walls[y, x] else "." for x in range(self.size))
            for y in range(self.size)
        )


def hard_levels(env: Maze | None = None) -> EnvParams:
    """The hand-made hard levels (a batch) of ``maze_levels/hard.json``, for the default 13 x 13
    maze: long corridors, a spiral, dead ends, an unsolvable one."""
    env = Maze() if env is None else env
    return load_levels(os.path.join(LEVELS_DIR, "hard.json"), env.default_params)


def heldout_levels(env: Maze | None = None) -> EnvParams:
    """The held-out set (a batch of 500 + the hard ones): ``NUM_HELDOUT_GENERATED`` levels of the
    default param space drawn with ``jax.random.key(HELDOUT_SEED)`` (a seed no training run uses
    by default; `jaxenvs.levels.overlap` checks a training batch against them), followed by
    `hard_levels`. ``maze_levels/heldout.sha256`` holds the SHA-256 of their hashes, so a change in
    the generator or in JAX's random numbers that would move the set is caught by the tests."""
    env = Maze() if env is None else env
    generated = jax.jit(lambda k: env.param_space().sample(k, (NUM_HELDOUT_GENERATED,)))(jax.random.key(HELDOUT_SEED))
    return concat_levels([generated, hard_levels(env)])


__all__ = [
    "Maze",
    "EnvParams",
    "EnvState",
    "distances",
    "generate_level",
    "mutate_level",
    "level_from_text",
    "hard_levels",
    "heldout_levels",
]
