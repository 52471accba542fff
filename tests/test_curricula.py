"""Curricula in the trainer (train/curricula.py): PLR's buffer bookkeeping and replay distribution,
ACCEL's mutations, `none` as the plain program, resuming, a user's own env under every
curriculum, the held-out check, and a trained policy on a given level."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs import spaces, struct
from jaxenvs.core import Environment, Traits
from jaxenvs.levels import ParamSpace, Uniform, level_to_json, stack_levels, unstack_levels
from jaxenvs.train import curricula
from jaxenvs.train.configs import get_config
from jaxenvs.train.curricula import CurriculumState, HeldOutOverlap, LevelBuffer, check_disjoint, insert_levels, replay_probs
from jaxenvs.train.trainers import make_trainer

from helpers import assert_trees_equal, tiny_run_dir

TINY = dict(num_envs=4, num_steps=8, update_epochs=1, num_minibatches=2, hidden_sizes=(8,), plr_buffer_size=8,
            plr_min_fill=0.25)


# ---- a user's own env: a corridor whose goal cell is a params field with a declared space ---------
@struct.dataclass
class CorridorParams:
    goal: jax.Array = 5  # int32[], the goal cell in [1, LENGTH - 1]


@struct.dataclass
class CorridorState:
    pos: jax.Array


LENGTH = 8


class Corridor(Environment):
    """Walk right (1) or left (0) from cell 0; reward 1 and the episode ends on the goal cell."""

    traits = Traits(num_agents=1, chance="deterministic", information="perfect", reward_style="terminal")

    @property
    def default_params(self):
        return CorridorParams()

    def param_space(self):
        return ParamSpace(self.default_params, goal=Uniform(1, LENGTH - 1))

    def reset_env(self, key, params):
        state = CorridorState(pos=jnp.zeros((), jnp.int32))
        return self._obs(state, params), state

    def step_env(self, key, state, action, params):
        pos = jnp.clip(state.pos + jnp.where(action == 1, 1, -1), 0, LENGTH - 1).astype(jnp.int32)
        done = pos == params.goal
        state = CorridorState(pos=pos)
        return self._obs(state, params), state, done.astype(jnp.float32), done, jnp.zeros((), bool), {}

    def _obs(self, state, params):
        return jnp.stack([state.pos, jnp.asarray(params.goal)]).astype(jnp.float32) / (LENGTH - 1)

    def observation_space(self, params=None):
        return spaces.Box(0.0, 1.0, (2,), np.float32)

    def action_space(self, params=None):
        return spaces.Discrete(2)


class NoSpace(Corridor):
    param_space = None


TEST_ENVS = {"curricula_test/Corridor-v0": Corridor, "curricula_test/NoSpace-v0": NoSpace}


@pytest.fixture(scope="module", autouse=True)
def registered():
    """The user envs, registered for this module's tests only: other modules list and check every
    registered env, and these have no golden digest or picture."""
    for env_id, cls in TEST_ENVS.items():
        jaxenvs.register(env_id, cls, max_episode_steps=20)
    yield
    for env_id in TEST_ENVS:
        jaxenvs.registry.pop(env_id, None)


# ---- PLR's buffer ---------------------------------------------------------------------------------
def _buffer(scores, filled=None, last_played=None):
    k = len(scores)
    return LevelBuffer(
        levels=CorridorParams(goal=jnp.arange(100, 100 + k, dtype=jnp.int32)),
        scores=jnp.asarray(scores, jnp.float32),
        last_played=jnp.zeros((k,), jnp.int32) if last_played is None else jnp.asarray(last_played, jnp.int32),
        filled=jnp.ones((k,), bool) if filled is None else jnp.asarray(filled, bool),
    )


def test_insert_fills_empty_slots_then_replaces_the_lowest_score_only_when_higher():
    buf = _buffer([0.0] * 3, filled=[False] * 3)
    levels = CorridorParams(goal=jnp.asarray([1, 2, 3], jnp.int32))
    buf = insert_levels(buf, levels, jnp.asarray([0.5, 0.2, 0.9]), 1)
    np.testing.assert_array_equal(buf.levels.goal, [1, 2, 3])
    np.testing.assert_array_equal(buf.filled, [True] * 3)
    np.testing.assert_allclose(buf.scores, [0.5, 0.2, 0.9])
    # 4 (score 0.3) replaces level 2 (0.2, the lowest); 5 (score 0.1) is below every score: dropped
    buf = insert_levels(buf, CorridorParams(goal=jnp.asarray([4, 5], jnp.int32)), jnp.asarray([0.3, 0.1]), 2)
    np.testing.assert_array_equal(buf.levels.goal, [1, 4, 3])
    np.testing.assert_allclose(buf.scores, [0.5, 0.3, 0.9])
    np.testing.assert_array_equal(buf.last_played, [1, 2, 1])
    # a level already held updates its own slot, whatever its score
    buf = insert_levels(buf, CorridorParams(goal=jnp.asarray([3], jnp.int32)), jnp.asarray([0.05]), 3)
    np.testing.assert_array_equal(buf.levels.goal, [1, 4, 3])
    np.testing.assert_allclose(buf.scores, [0.5, 0.3, 0.05])
    np.testing.assert_array_equal(buf.last_played, [1, 2, 3])


def test_rank_and_topk_weights_and_staleness_are_exact():
    scores = [0.1, 0.7, 0.4, 0.0]
    buf = _buffer(scores, filled=[True, True, True, False], last_played=[1, 3, 2, 0])
    t = 0.5
    p = np.asarray(replay_probs(buf, 5, "rank", t, 0.0))
    want = np.array([1 / 3, 1.0, 1 / 2, 0.0]) ** (1 / t)  # ranks 3, 1, 2; the empty slot never
    np.testing.assert_allclose(p, want / want.sum(), rtol=1e-6)
    p = np.asarray(replay_probs(buf, 5, "topk", t, 0.0, topk=2))
    np.testing.assert_allclose(p, [0, 0.5, 0.5, 0], rtol=1e-6)
    # staleness: clock - last_played = 4, 2, 3 over the filled slots
    p = np.asarray(replay_probs(buf, 5, "rank", t, 1.0))
    np.testing.assert_allclose(p, [4 / 9, 2 / 9, 3 / 9, 0], rtol=1e-6)


def test_replay_draws_match_the_rank_weights():
    """200,000 draws as `Curriculum.begin` makes them: every slot's frequency within 5 standard
    errors (binomial, at most 0.0011 here) of its probability."""
    buf = _buffer([0.3, 0.9, 0.1, 0.5, 0.7, 0.2], last_played=[0, 1, 2, 3, 4, 5])
    p = replay_probs(buf, 6, "rank", 0.3, 0.3)
    n = 200_000
    draws = np.asarray(jax.jit(lambda k: jax.random.choice(k, 6, (n,), p=p))(jax.random.key(1)))
    freq = np.bincount(draws, minlength=6) / n
    p = np.asarray(p)
    se = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(freq - p) <= 5 * se + 1e-12), (freq, p)
    assert p.argmax() == 1 and abs(p.sum() - 1) < 1e-6


# ---- training under each curriculum ---------------------------------------------------------------
@pytest.fixture(scope="module")
def maze_runs():
    """2 seeds x 3 updates of Maze under PLR (regret scores) and ACCEL, vmapped over seeds."""
    out = {}
    for name in ("plr", "accel"):
        cfg = get_config("Maze-v0", curriculum=name, plr_score="regret", total_timesteps=4 * 8 * 3, **TINY)
        trainer = make_trainer(cfg)
        runner, metrics = jax.jit(jax.vmap(trainer._train))(jax.random.split(jax.random.key(0), 2))
        out[name] = trainer, runner, metrics
    return out


def test_plr_buffer_clock_and_staleness_after_updates(maze_runs):
    trainer, runner, metrics = maze_runs["plr"]
    cs = runner.env_state
    assert isinstance(cs, CurriculumState)
    np.testing.assert_array_equal(cs.clock, [3, 3])  # one tick per update, per seed
    filled = np.asarray(cs.buffer.filled)
    assert filled.sum(axis=1).min() >= 4  # the first update inserted its 4 fresh levels
    last = np.asarray(cs.buffer.last_played)
    assert np.all(last[filled] >= 1) and np.all(last[filled] <= 3)
    # the scores are exact regrets: optimal return - mean return, within [0 - 1, 1]
    assert np.all(np.asarray(metrics["curriculum_buffer_score"]) <= 1.0)
    env = trainer.env.unwrapped
    levels = jax.tree.map(lambda x: np.asarray(x)[0][filled[0]], cs.buffer.levels)
    optimum = np.asarray(jax.vmap(lambda lv: env.optimal_return(lv, 250))(levels))
    assert np.all(np.asarray(cs.buffer.scores)[0][filled[0]] <= optimum + 1e-6)


def test_accel_mutations_stay_in_the_param_space(maze_runs):
    trainer, runner, metrics = maze_runs["accel"]
    space = trainer.curriculum.space
    cs = runner.env_state
    pending = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), cs.pending)
    assert bool(jax.jit(jax.vmap(space.contains))(pending).all())
    held = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), cs.buffer.levels)
    filled = np.asarray(cs.buffer.filled).reshape(-1)
    inside = np.asarray(jax.jit(jax.vmap(space.contains))(held))
    assert inside[filled].all()
    # and a mutation differs from its level in exactly one wall cell
    one = jax.tree.map(lambda x: x[0, 0], cs.levels)
    edited = space.mutate(jax.random.key(3), one)
    assert int(np.sum(np.asarray(edited.walls) != np.asarray(one.walls))) == 1
    assert bool(space.contains(edited))


def test_none_is_the_same_program_and_touches_no_curriculum(monkeypatch):
    """curriculum none: no curriculum object, the runner's env state is the plain one, and the
    lowered update is identical with every curricula entry point made to fail."""
    cfg = get_config("GridWorld-v0", num_envs=4, num_steps=8, update_epochs=1, num_minibatches=2, hidden_sizes=(8,))
    assert cfg.curriculum == "none"

    def lowered():
        trainer = make_trainer(cfg)
        assert trainer.curriculum is None
        runner = jax.eval_shape(trainer.init, jax.random.key(0))
        assert not isinstance(runner.env_state, CurriculumState)
        return jax.jit(trainer._run_updates, static_argnames="num_updates").lower(runner, None, num_updates=2).as_text()

    before = lowered()

    def fail(*a, **k):
        raise AssertionError("curriculum none called into train.curricula")

    for name in ("reset", "step", "begin", "end", "metrics"):
        monkeypatch.setattr(curricula.Curriculum, name, fail)
    assert lowered() == before
    dr = make_trainer(cfg.replace(env_id="GridWorld-v0", curriculum="dr"))
    assert dr.curriculum is not None  # the same config with a curriculum does call them
    with pytest.raises(AssertionError, match="called into"):
        dr.init(jax.random.key(0))


def test_resume_reproduces_the_run(tmp_path):
    from jaxenvs.train.checkpoint import load_checkpoint, save_checkpoint
    from jaxenvs.train.configs import RunSettings

    cfg = get_config("curricula_test/Corridor-v0", curriculum="accel", total_timesteps=4 * 8 * 4, **TINY)
    trainer = make_trainer(cfg)
    init = jax.jit(jax.vmap(trainer.init))
    run = jax.jit(jax.vmap(lambda r: trainer._run_updates(r, None, 2)))
    start = init(jax.random.split(jax.random.key(5), 2))
    straight = run(run(start)[0])[0]
    half = run(start)[0]
    path = save_checkpoint(tmp_path / "ckpt.msgpack", cfg, half, RunSettings(num_seeds=2))
    _, loaded, meta = load_checkpoint(path, trainer, RunSettings(num_seeds=2))
    assert meta["update"] == 2
    assert_trees_equal(jax.tree.map(np.asarray, jax.random.key_data(loaded.key)), np.asarray(jax.random.key_data(half.key)))
    resumed = run(loaded)[0]
    assert_trees_equal(jax.device_get(resumed.env_state.buffer), jax.device_get(straight.env_state.buffer))
    assert_trees_equal(jax.device_get(resumed.params), jax.device_get(straight.params))


@pytest.mark.parametrize("name", ["dr", "plr", "accel"])
def test_a_users_env_with_a_param_space_trains_under_each_curriculum(name):
    cfg = get_config("curricula_test/Corridor-v0", curriculum=name, total_timesteps=4 * 8 * 3, **TINY)
    trainer = make_trainer(cfg)
    runner, metrics = trainer.train(jax.random.key(2))
    assert not bool(np.asarray(metrics["nonfinite"]).any())
    cs = runner.env_state
    space = trainer.curriculum.space
    assert bool(jax.vmap(space.contains)(cs.levels).all())
    seen = set(np.asarray(curricula.trained_levels(jax.tree.map(lambda x: x[None], runner)).goal).tolist())
    assert seen <= set(range(1, LENGTH)) and len(seen) >= 2  # levels drawn from the space, not the default only
    if name != "dr":
        assert float(metrics["curriculum_buffer_filled"][-1]) > 0


def test_bad_settings_fail_when_the_trainer_is_built():
    with pytest.raises(ValueError, match="declares no param space"):
        make_trainer(get_config("curricula_test/NoSpace-v0", curriculum="dr", **TINY))
    with pytest.raises(ValueError, match="optimal_return"):
        make_trainer(get_config("curricula_test/Corridor-v0", curriculum="plr", plr_score="regret", **TINY))
    with pytest.raises(ValueError, match="plr_topk"):
        make_trainer(get_config("curricula_test/Corridor-v0", curriculum="plr", plr_prioritization="topk", plr_topk=9, **TINY))
    with pytest.raises(ValueError, match="curriculum"):
        get_config("curricula_test/Corridor-v0", curriculum="random", **TINY)
    with pytest.raises(ValueError, match="plr_replay_prob"):
        get_config("curricula_test/Corridor-v0", curriculum="plr", plr_replay_prob=1.5, **TINY)
    with pytest.raises(ValueError, match="single-agent"):
        make_trainer(get_config("HurdleRace-v0", curriculum="dr", **TINY))
    with pytest.raises(ValueError, match="TRPO"):
        make_trainer(get_config("curricula_test/Corridor-v0", algo="trpo", curriculum="plr", num_envs=4, num_steps=8))


# ---- held-out levels ------------------------------------------------------------------------------
def test_heldout_check_fails_on_an_overlapping_set_and_passes_a_disjoint_one(maze_runs):
    trainer, runner, _ = maze_runs["plr"]
    heldout = curricula.heldout_levels_of(trainer.env)
    trained = curricula.trained_levels(jax.device_get(runner))
    assert check_disjoint(heldout, trained) >= 4
    assert curricula.heldout_check(trainer, runner)["heldout_disjoint_from"] >= 4
    leaked = stack_levels(unstack_levels(trained) + [unstack_levels(heldout)[7]])
    with pytest.raises(HeldOutOverlap, match="shares 1 level"):
        check_disjoint(heldout, leaked)


def test_heldout_metrics_on_the_maze(maze_runs):
    trainer, runner, _ = maze_runs["plr"]
    params = jax.tree.map(lambda x: x[0], runner.params)
    m = curricula.heldout_metrics(trainer, params, jax.random.key(0))
    assert m["heldout_levels"] >= 505 and 0 < m["heldout_solvable"] < m["heldout_levels"]
    assert 0.0 <= m["heldout_cvar10_solve_rate"] <= m["heldout_success_rate"] <= 1.0
    assert m["heldout_mean_regret"] >= -1e-6  # no policy beats the exact optimum
    # an open maze with the goal next to the start: a solve rate the policy can be checked on
    env = trainer.env.unwrapped
    easy = env.default_params.replace(walls=np.zeros((13, 13), bool), start=np.array([0, 0], np.int32),
                                      goal=np.array([0, 1], np.int32))
    m = curricula.heldout_metrics(trainer, params, jax.random.key(0), levels=stack_levels([easy]), episodes_per_level=8)
    assert m["heldout_levels"] == 1 and m["heldout_solvable"] == 1
    assert m["heldout_mean_regret"] == pytest.approx(float(env.optimal_return(easy)) - m["heldout_mean_return"], abs=1e-6)


# ---- a trained policy on a given level --------------------------------------------------------------
@pytest.fixture(scope="module")
def maze_run_dir(tmp_path_factory):
    cfg = get_config("Maze-v0", curriculum="dr", total_timesteps=4 * 8 * 2, **TINY)
    return tiny_run_dir(tmp_path_factory.mktemp("runs"), "maze", cfg)


def test_load_policy_plays_a_level_from_json(maze_run_dir, tmp_path):
    from jaxenvs.train import load_policy

    policy = load_policy(maze_run_dir)
    walls = np.ones((13, 13), bool)
    walls[0, :3] = False  # a corridor of 3 cells: any policy that moves right twice solves it
    level = policy.make_env().default_params.replace(walls=walls, start=np.array([0, 0], np.int32),
                                                     goal=np.array([0, 2], np.int32))
    path = tmp_path / "level.json"
    path.write_text(json.dumps(level_to_json(level)))
    env = policy.make_env(path)
    np.testing.assert_array_equal(np.asarray(env.default_params.walls), walls)
    out = policy.play_level(path)
    assert set(out) == {"return", "length", "terminated"}
    if out["terminated"]:
        assert out["return"] == pytest.approx(1 - 0.9 * out["length"] / 250)
    else:
        assert out["return"] == 0.0 and out["length"] == 250
    with pytest.raises(ValueError, match="holds 5"):
        policy.make_env(jaxenvs.envs.maze.LEVELS_DIR + "/hard.json")


def test_play_cli_shows_the_level(maze_run_dir, tmp_path, capsys):
    from jaxenvs.cli import main
    from jaxenvs.envs.maze import hard_levels

    level = unstack_levels(hard_levels())[0]
    path = tmp_path / "hard0.json"
    path.write_text(json.dumps(level_to_json(level)))
    assert main(["play", str(maze_run_dir), "--level", str(path), "--render", "text", "--max-steps", "3"]) == 0
    out = capsys.readouterr().out
    first = out.split("--- episode 1, t=0\n", 1)[1].splitlines()[:13]
    walls = np.asarray(level.walls)
    assert [[c == "#" for c in row] for row in first] == walls.tolist()
    assert main(["play", "Maze-v0", "--level", str(tmp_path / "missing.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_evaluate_cli_reports_the_heldout_check(maze_run_dir, capsys):
    from jaxenvs.cli import main

    assert main(["evaluate", str(maze_run_dir), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["heldout_disjoint_from"] >= 1
    seed = result["seeds"][0]
    assert seed["heldout_levels"] >= 505 and 0 <= seed["heldout_cvar10_solve_rate"] <= seed["heldout_success_rate"] <= 1
