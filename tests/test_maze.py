"""Maze-v0's exact dynamics: walls and borders block, the goal terminates with JaxUED's reward, the
agent-centred view, the in-jit BFS against a Python BFS on random levels, optimal return and
regret, the level generator and mutation, level text/JSON, the held-out set."""

from __future__ import annotations

import collections
import hashlib
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs.envs import maze
from jaxenvs.envs.maze import DOWN, LEFT, RIGHT, UP, Maze, level_from_text
from jaxenvs.levels import level_from_json, level_hash, level_hashes, level_to_json, overlap, param_space

ENV = Maze()

LEVEL = level_from_text(
    """
S.#..
..#..
.##.#
.....
#..G.
""",
    max_steps=20,
)
SMALL = Maze(size=5, view_size=3)


def python_bfs(walls, goal):
    """Fewest moves from every cell to ``goal`` (-1: unreachable), breadth-first on a deque."""
    h, w = walls.shape
    dist = np.full((h, w), -1)
    if walls[goal]:
        return dist
    dist[goal] = 0
    queue = collections.deque([goal])
    while queue:
        y, x = queue.popleft()
        for dy, dx in maze.DIRECTIONS:
            ny, nx = y + dy, x + dx
            if 0 <= ny < h and 0 <= nx < w and not walls[ny, nx] and dist[ny, nx] < 0:
                dist[ny, nx] = dist[y, x] + 1
                queue.append((ny, nx))
    return dist


@pytest.fixture(scope="module")
def levels():
    """300 levels of the default param space (13 x 13, up to 60 walls), drawn in one program."""
    return jax.jit(lambda k: ENV.param_space().sample(k, (300,)))(jax.random.key(0))


def test_bfs_matches_python_bfs_on_random_levels(levels):
    dist = np.asarray(jax.jit(jax.vmap(maze.distances))(levels.walls, levels.goal))
    walls, goal, start = np.asarray(levels.walls), np.asarray(levels.goal), np.asarray(levels.start)
    for i in range(len(walls)):
        np.testing.assert_array_equal(dist[i], python_bfs(walls[i], tuple(goal[i])), err_msg=f"level {i}")
    lengths = np.asarray(jax.jit(jax.vmap(ENV.shortest_path_length))(levels))
    np.testing.assert_array_equal(lengths, dist[np.arange(len(walls)), start[:, 0], start[:, 1]])
    # the sample holds both kinds: solvable and unsolvable levels
    assert (lengths > 0).sum() > 100 and (lengths == -1).sum() > 0


def test_generator_levels_are_valid(levels):
    walls, start, goal = np.asarray(levels.walls), np.asarray(levels.start), np.asarray(levels.goal)
    n = np.arange(len(walls))
    assert walls.sum(axis=(1, 2)).max() <= maze.DEFAULT_NUM_WALLS and walls.sum(axis=(1, 2)).min() > 40
    assert not walls[n, start[:, 0], start[:, 1]].any() and not walls[n, goal[:, 0], goal[:, 1]].any()
    assert np.all(np.any(start != goal, axis=1))
    assert bool(jnp.all(jax.jit(jax.vmap(ENV.param_space().contains))(levels)))
    ENV.validate_params(levels)  # stacked params validate as a whole


def test_mutation_flips_one_cell_other_than_start_and_goal(levels):
    mutated = jax.jit(jax.vmap(maze.mutate_level))(jax.random.split(jax.random.key(1), 300), levels)
    diff = np.asarray(mutated.walls != levels.walls)
    assert np.all(diff.sum(axis=(1, 2)) == 1)
    n, start, goal = np.arange(300), np.asarray(levels.start), np.asarray(levels.goal)
    assert not diff[n, start[:, 0], start[:, 1]].any() and not diff[n, goal[:, 0], goal[:, 1]].any()
    np.testing.assert_array_equal(np.asarray(mutated.start), start)


def test_walls_and_border_block_and_goal_pays_the_reward():
    env = SMALL
    obs, state = env.reset(jax.random.key(0), LEVEL)
    np.testing.assert_array_equal(np.asarray(state.pos), [0, 0])
    step = jax.jit(lambda s, a: env.step(jax.random.key(0), s, a, LEVEL))
    # up and left leave the grid: blocked; right then right hits the wall at (0, 2)
    for action, pos in ((UP, [0, 0]), (LEFT, [0, 0]), (RIGHT, [0, 1]), (RIGHT, [0, 1]), (DOWN, [1, 1]), (DOWN, [1, 1])):
        obs, state, reward, terminated, truncated, info = step(state, jnp.int32(action))
        np.testing.assert_array_equal(np.asarray(state.pos), pos)
        assert float(reward) == 0.0 and not bool(terminated) and not bool(truncated)
    assert int(info["time"]) == 6
    # left, down to row 3, right to column 3 (12 steps), then down onto the goal (4, 3)
    for action in (LEFT, DOWN, DOWN, RIGHT, RIGHT, RIGHT):
        obs, state, reward, terminated, *_ = step(state, jnp.int32(action))
        assert not bool(terminated)
    obs, state, reward, terminated, *_ = step(state, jnp.int32(DOWN))
    assert bool(terminated) and int(state.time) == 13
    assert float(reward) == pytest.approx(1 - 0.9 * 13 / 20, abs=1e-6)
    assert reward.dtype == jnp.float32


def test_shortest_path_is_optimal_and_regret_is_exact():
    env = SMALL
    d = int(env.shortest_path_length(LEVEL))
    assert d == python_bfs(np.asarray(LEVEL.walls), (4, 3))[0, 0] == 7
    assert float(env.optimal_return(LEVEL, 20)) == pytest.approx(1 - 0.9 * 7 / 20, abs=1e-6)
    # walking down the BFS distances reaches the goal in exactly d steps with the optimal return
    dist = np.asarray(maze.distances(LEVEL.walls, LEVEL.goal))
    obs, state = env.reset(jax.random.key(0), LEVEL)
    step = jax.jit(lambda s, a: env.step(jax.random.key(0), s, a, LEVEL))
    total, steps, terminated = 0.0, 0, False
    while not terminated:
        y, x = np.asarray(state.pos)
        action = next(a for a, (dy, dx) in enumerate(maze.DIRECTIONS)
                      if 0 <= y + dy < 5 and 0 <= x + dx < 5 and dist[y + dy, x + dx] == dist[y, x] - 1)
        obs, state, reward, terminated, *_ = step(state, jnp.int32(action))
        total, steps = total + float(reward), steps + 1
    assert steps == d and total == pytest.approx(float(env.optimal_return(LEVEL, 20)), abs=1e-6)
    assert float(env.regret(LEVEL, total, 20)) == pytest.approx(0.0, abs=1e-6)
    assert float(env.regret(LEVEL, 0.0, 20)) == pytest.approx(float(env.optimal_return(LEVEL, 20)))
    # a time limit shorter than the path: nothing can be earned
    assert float(env.optimal_return(LEVEL, 6)) == 0.0


def test_unsolvable_level_has_no_path():
    walled = LEVEL.replace(walls=jnp.asarray(LEVEL.walls).at[3, 3].set(True).at[4, 2].set(True).at[4, 4].set(True))
    assert int(SMALL.shortest_path_length(walled)) == -1 and float(SMALL.optimal_return(walled)) == 0.0


def test_observation_is_the_agent_centred_window():
    env = SMALL  # view 3 x 3 on the 5 x 5 level
    state = maze.EnvState(pos=jnp.asarray([3, 3], jnp.int32), time=jnp.int32(0))
    obs = np.asarray(env._obs(state, LEVEL))
    walls = np.asarray(LEVEL.walls)
    assert obs.shape == (3, 3, 2) and obs.dtype == np.float32
    np.testing.assert_array_equal(obs[..., 0], walls[2:5, 2:5])
    goal = np.zeros((3, 3))
    goal[2, 1] = 1  # the goal (4, 3) seen from (3, 3): one row down, one column left
    np.testing.assert_array_equal(obs[..., 1], goal)
    corner = np.asarray(env._obs(state.replace(pos=jnp.asarray([0, 0], jnp.int32)), LEVEL))
    np.testing.assert_array_equal(corner[..., 0], [[1, 1, 1], [1, 0, 0], [1, 0, 0]])  # outside the grid is wall
    assert ENV.observation_space().contains(ENV.reset(jax.random.key(0))[0])


def test_render_and_text():
    env = SMALL
    _, state = env.reset(jax.random.key(0), LEVEL)
    frame = np.asarray(jax.jit(env.render)(state, LEVEL))
    assert frame.shape == (80, 80, 3) and frame.dtype == np.uint8
    c = maze.CELL_PX
    np.testing.assert_array_equal(frame[c // 2, 2 * c + c // 2], maze.WALL_COLOR)  # wall (0, 2)
    np.testing.assert_array_equal(frame[4 * c + c // 2, 3 * c + c // 2], (0, 160, 0))  # goal (4, 3)
    np.testing.assert_array_equal(frame[c // 2, c // 2], (255, 0, 0))  # agent on (0, 0)
    np.testing.assert_array_equal(frame[4 * c + c // 2, 4 * c + c // 2], (255, 255, 255))  # outside the view
    assert env.render_text(state, LEVEL) == "A.#..\n..#..\n.##.#\n.....\n#..G."


def test_validate_params_and_text_errors():
    with pytest.raises(ValueError, match=r"start \[0, 2\] and goal \[4, 3\] must be distinct free cells"):
        SMALL.validate_params(LEVEL.replace(start=jnp.asarray([0, 2], jnp.int32)))
    with pytest.raises(ValueError, match="must be distinct"):
        SMALL.validate_params(LEVEL.replace(start=LEVEL.goal))
    with pytest.raises(ValueError, match=r"start must be integer \(row, column\) cells in \[0, 4\]"):
        SMALL.validate_params(LEVEL.replace(start=jnp.asarray([5, 0], jnp.int32)))
    with pytest.raises(ValueError, match=r"exactly one 'G' needed, found 0"):
        level_from_text("S..\n...")
    with pytest.raises(ValueError, match="unknown cell characters"):
        level_from_text("S.x\n..G")
    with pytest.raises(ValueError, match="view_size must be an odd int"):
        Maze(view_size=4)


def test_level_json_and_hash_round_trip(levels):
    one = jax.tree.map(lambda x: x[7], levels)
    back = level_from_json(json.dumps(level_to_json(one)), ENV.default_params)
    assert level_hash(back) == level_hash(one)
    np.testing.assert_array_equal(np.asarray(back.walls), np.asarray(one.walls))


def test_heldout_set_is_fixed_and_disjoint_from_training(levels):
    heldout = maze.heldout_levels()
    hashes = level_hashes(heldout)
    assert len(hashes) == maze.NUM_HELDOUT_GENERATED + 5 and len(set(hashes)) == len(hashes)
    with open(os.path.join(maze.LEVELS_DIR, "heldout.sha256")) as f:
        assert hashlib.sha256("\n".join(hashes).encode()).hexdigest() == f.read().split()[0]
    assert overlap(heldout, levels) == []  # the training draws of seed 0 share none of them
    assert len(overlap(heldout, jax.tree.map(lambda x: x[:3], heldout))) == 3  # the check can fail
    hard = maze.hard_levels()
    np.testing.assert_array_equal(np.asarray(jax.vmap(ENV.shortest_path_length)(hard)), [86, 96, 24, 46, -1])


def test_registered_with_time_limit_and_space():
    env = jaxenvs.make("Maze-v0")
    assert env.spec.max_episode_steps == 250 == ENV.default_params.max_steps
    assert int(ENV.shortest_path_length()) == 32
    assert param_space(env).generator is not None
