"""PPO (train.ppo): one compilation, determinism per key, vmap over seeds and hyperparameters,
learning on small budgets, Box-bounded continuous actions, checkpoints and resuming."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenvs.train.checkpoint import load_checkpoint, save_checkpoint
from jaxenvs.train.configs import PPOConfig, RunSettings, get_config
from jaxenvs.train.episodes import payoff_matrix
from jaxenvs.train.grading import evaluate_params
from jaxenvs.train.networks import Gaussian
from jaxenvs.train.base import stack_hparams
from jaxenvs.train.trainers import make_trainer

# GridWorld, 16 envs x 16 steps per update, 48 updates (12,288 env steps)
GRID = dict(num_envs=16, num_steps=16, total_timesteps=12_288, lr=1e-3)


def tree_equal(a, b) -> bool:
    return all(jax.tree.leaves(jax.tree.map(lambda x, y: bool(jnp.array_equal(x, y)), a, b)))


@pytest.fixture(scope="module")
def grid():
    trainer = make_trainer(get_config("GridWorld-v0", **GRID))
    runs = {seed: trainer.train(jax.random.key(seed)) for seed in (0, 1)}
    return trainer, runs


def test_train_compiles_once_and_is_deterministic_per_key(grid):
    trainer, runs = grid
    again, metrics = trainer.train(jax.random.key(0))
    assert trainer.traces["train"] == 1
    assert tree_equal(again.params, runs[0][0].params)
    assert not tree_equal(runs[1][0].params, runs[0][0].params)  # another key, another run
    assert metrics["episode_return"].shape == (trainer.config.num_updates,)
    # a raw PRNGKey is accepted and is the same key as its typed form
    raw, _ = trainer.train(jax.random.key_data(jax.random.key(0)))
    assert tree_equal(raw.params, runs[0][0].params)


def test_gridworld_learns_near_optimal_paths(grid):
    trainer, runs = grid
    m = evaluate_params(trainer, runs[0][0].params)
    # a uniformly random walk needs about 10x the Manhattan distance on a 5x5 grid
    assert m["success_rate"] == 1.0
    assert m["length_ratio"] <= 1.1, m
    lengths = np.asarray(runs[0][1]["episode_length"])
    assert np.nanmean(lengths[:3]) > 3 * np.nanmean(lengths[-3:])


@pytest.fixture(scope="module")
def tiny():
    """GridWorld, 8 envs x 8 steps, 2 updates: for checks of exact equality."""
    trainer = make_trainer(get_config("GridWorld-v0", num_envs=8, num_steps=8, total_timesteps=128))
    return trainer, jax.jit(jax.vmap(trainer.train))


def test_vmap_over_seeds_matches_separate_runs(tiny):
    tiny, train_many = tiny
    keys = jnp.stack([jax.random.key(0), jax.random.key(1)])
    batched, metrics = train_many(keys, stack_hparams(tiny.config, 2))
    assert metrics["episode_return"].shape == (2, tiny.config.num_updates)
    for i in (0, 1):
        single, _ = tiny.train(keys[i])
        for a, b in zip(jax.tree.leaves(jax.tree.map(lambda x: x[i], batched.params)), jax.tree.leaves(single.params)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert not np.allclose(jax.tree.leaves(batched.params)[0][0], jax.tree.leaves(batched.params)[0][1])


def test_vmap_over_learning_rate_in_one_program(tiny):
    tiny, train_many = tiny
    keys = jnp.stack([jax.random.key(3)] * 2)
    runner, _ = train_many(keys, stack_hparams(tiny.config, 2, lr=[0.0, 1e-2]))
    # the init in a program of the same (seed-vmapped) shape: the kernels' Gram-Schmidt rounds the
    # same way there (a batched and an unbatched program may differ in the last bits)
    init = jax.jit(jax.vmap(tiny.init))(keys)
    first = lambda tree: jax.tree.map(lambda x: x[0], tree)  # noqa: E731
    second = lambda tree: jax.tree.map(lambda x: x[1], tree)  # noqa: E731
    assert tree_equal(first(runner.params), first(init.params))  # lr 0: nothing moves
    assert not tree_equal(second(runner.params), second(init.params))
    with pytest.raises(ValueError, match="lr has shape"):
        stack_hparams(tiny.config, 2, lr=[1e-3])


def test_lottery_picks_power_rich():
    trainer = make_trainer(get_config("Lottery-v0"))
    runner, _ = trainer.train(jax.random.key(0))
    m = evaluate_params(trainer, runner.params)
    assert m["greedy_action"] == 0 and m["prob_power_rich"] > 0.5, m


def test_rock_paper_scissors_self_play_returns_to_uniform_from_a_biased_policy():
    trainer = make_trainer(get_config("RockPaperScissors-v0"))
    runner = trainer.init(jax.random.key(0))
    head = runner.params["params"]["policy_head"]
    biased = {**head, "bias": jnp.array([2.0, 0.0, 0.0])}  # P(Rock) ~ 0.78
    runner = runner.replace(params={"params": {**runner.params["params"], "policy_head": biased}})
    before = evaluate_params(trainer, runner.params)
    runner, _ = trainer.run_updates(runner, num_updates=trainer.config.num_updates)
    after = evaluate_params(trainer, runner.params)
    assert before["exploitability"] > 0.5
    assert after["exploitability"] <= 0.1, after


def test_payoff_matrix_is_read_off_the_environment():
    trainer = make_trainer(get_config("RockPaperScissors-v0", num_envs=2))
    from jaxenvs import make

    payoff = payoff_matrix(make("RockPaperScissors-v0", autoreset=False), jax.random.key(0))
    np.testing.assert_array_equal(payoff, [[0, -1, 1], [1, 0, -1], [-1, 1, 0]])  # Rock, Paper, Scissors
    assert trainer.num_agents == 2 and trainer.batch_size == 4


def test_continuous_actions_respect_box_bounds_and_log_prob_is_of_the_unclipped_sample():
    trainer = make_trainer(get_config("PointEnv-v0", num_envs=64))
    runner = trainer.init(jax.random.key(0))
    params = jax.tree.map(lambda x: x, runner.params)
    params["params"]["log_std"] = jnp.full((2,), 1.0)  # std e: most samples fall outside [-1, 1]
    actions = trainer.act(params, runner.obs, jax.random.key(1))
    assert actions.shape == (64, 2) and actions.dtype == jnp.float32
    space = trainer.env.action_space()
    assert bool(jnp.all((actions >= space.low) & (actions <= space.high)))
    assert bool(jnp.any(actions == space.high)) and bool(jnp.any(actions == space.low))  # clipped samples
    mean, log_std = np.array([0.3, -0.2]), np.array([0.5, -1.0])
    u = np.array([2.5, -3.0])  # outside the box: the density is still the Gaussian's at u
    expected = np.sum(-0.5 * ((u - mean) / np.exp(log_std)) ** 2 - log_std - 0.5 * np.log(2 * np.pi))
    assert float(Gaussian(jnp.asarray(mean), jnp.asarray(log_std)).log_prob(jnp.asarray(u))) == pytest.approx(expected, rel=1e-5)


def test_checkpoint_round_trip_and_exact_resume(tiny, tmp_path):
    tiny, _ = tiny
    cfg, settings = tiny.config, RunSettings(num_seeds=2, seed=7)
    run_one = jax.jit(jax.vmap(lambda r: tiny.run_updates(r, num_updates=1)))
    start = jax.jit(jax.vmap(tiny.init))(jnp.stack([jax.random.key(5), jax.random.key(6)]))  # one program, not op by op
    straight, _ = run_one(run_one(start)[0])
    half, _ = run_one(start)
    path = save_checkpoint(tmp_path / "ckpt.msgpack", cfg, half, settings)
    loaded_trainer, loaded, meta = load_checkpoint(path)
    assert meta["update"] == 1 and meta["env_steps"] == cfg.steps_per_update
    assert loaded_trainer.config == cfg and meta["run"] == settings
    assert tree_equal(loaded.params, half.params) and tree_equal(loaded.opt_state, half.opt_state)
    assert tree_equal(jax.random.key_data(loaded.key), jax.random.key_data(half.key))
    resumed, _ = run_one(loaded)
    assert tree_equal(resumed.params, straight.params)
    first = lambda tree: jax.tree.map(lambda x: x[0], tree)  # noqa: E731
    assert evaluate_params(loaded_trainer, first(loaded.params)) == evaluate_params(tiny, first(half.params))


def test_bad_configs_are_rejected_with_the_allowed_values():
    with pytest.raises(ValueError, match="num_envs must be an int >= 1"):
        PPOConfig(num_envs=0)
    with pytest.raises(TypeError, match="unknown PPOConfig field.*'lrr'"):
        get_config("GridWorld-v0", lrr=1e-3)
    with pytest.raises(ValueError, match="not divisible by num_minibatches"):
        make_trainer(get_config("GridWorld-v0", num_envs=3, num_steps=3, num_minibatches=4))
    with pytest.raises(KeyError, match="GridWorld-v0"):
        make_trainer(get_config("GridWorld-v9"))


@pytest.mark.parametrize("n", [1, 2, 7, 256, 1024, 4096])
def test_minibatch_permutation_is_jax_random_permutation(n):
    from jaxenvs.train.permutation import minibatch_permutation

    for seed in range(3):
        key = jax.random.key(seed)
        np.testing.assert_array_equal(minibatch_permutation(key, n), jax.random.permutation(key, n))


def test_the_shuffles_stable_argsort_keeps_ties_in_index_order():
    """The radix sort under `minibatch_permutation` is a stable argsort (numpy's, value for value)
    at its size limit 2**16 too, with keys that tie in one half or whole (a sort that broke ties by
    anything but the index, or mixed the halves up, would differ)."""
    from jaxenvs.train.permutation import _stable_argsort_uint32

    argsort = jax.jit(_stable_argsort_uint32)
    for n in (3, 1000, 2**16):
        bits = np.asarray(jax.random.bits(jax.random.key(n), (n,), jnp.uint32))
        for keys in (bits, bits & np.uint32(0xFFFF0000), bits & np.uint32(0x0000FFFF), bits % np.uint32(7)):
            np.testing.assert_array_equal(argsort(keys), np.argsort(keys, kind="stable"))


def test_next_values_are_the_critic_of_final_obs_wherever_gae_bootstraps():
    """The rollout's own values stand in for V(final_obs) on steps that ended no episode; with a
    5-step limit the rollouts have truncations, terminations and plain steps, per seed under vmap."""
    trainer = make_trainer(get_config("PointEnv-v0", env_kwargs={"max_episode_steps": 5}, num_envs=4, num_steps=16))

    def both(key):
        runner = trainer.init(key)
        runner, (traj, _) = trainer._rollout(runner, trainer.config.hparams())
        _, direct = trainer.network.apply(runner.params, traj.final_obs)
        return traj, trainer._next_values(runner.params, traj), direct

    traj, fast, direct = jax.jit(jax.vmap(both))(jax.random.split(jax.random.key(0), 2))
    used = ~np.asarray(traj.terminated)  # terminated steps bootstrap from 0 in gae
    assert np.asarray(traj.truncated).any() and np.asarray(traj.terminated | traj.truncated).sum() < traj.terminated.size
    np.testing.assert_allclose(np.asarray(fast)[used], np.asarray(direct)[used], rtol=1e-6, atol=1e-6)


def test_the_gpu_paths_of_the_shuffle_and_the_bootstrap_values_give_the_cpu_paths_values(monkeypatch):
    """On a GPU or TPU the minibatch shuffle is ``jax.random.permutation`` itself and the values of
    truncated steps come from a select instead of a ``lax.cond`` (XLA reads a cond's predicate on the
    host there): traced here with the backend's name patched (fresh functions, so JAX's trace cache
    cannot hand back the CPU trace), both give the CPU path's values
    exactly, with and without truncations before the last step."""
    from jaxenvs.train.permutation import minibatch_permutation

    trainer = make_trainer(get_config("PointEnv-v0", env_kwargs={"max_episode_steps": 5}, num_envs=4, num_steps=16))
    runner = trainer.init(jax.random.key(0))
    _, (traj, _) = trainer._rollout(runner, trainer.config.hparams())
    none_early = traj._replace(truncated=jnp.zeros_like(traj.truncated).at[-1].set(traj.truncated[-1]))
    assert bool(traj.truncated[:-1].any())
    next_values = jax.jit(trainer._next_values)
    cpu = [next_values(runner.params, t) for t in (traj, none_early)]
    cpu_perm = [minibatch_permutation(jax.random.key(s), 1024) for s in range(2)]
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    gpu = [jax.jit(lambda p, t: trainer._next_values(p, t))(runner.params, t) for t in (traj, none_early)]
    for a, b in zip(cpu, gpu):
        np.testing.assert_array_equal(a, b)
    for s, p in enumerate(cpu_perm):
        np.testing.assert_array_equal(minibatch_permutation(jax.random.key(s), 1024), p)
    conds = lambda: str(jax.make_jaxpr(lambda p, t: trainer._next_values(p, t))(runner.params, traj)).count("cond[")  # noqa: E731
    on_gpu = conds()
    monkeypatch.undo()
    assert conds() == on_gpu + 1  # the CPU path's one lax.cond is gone


def test_an_evaluation_of_several_blocks_is_the_blocks_of_the_progress_program(grid):
    """1000 episodes run as 5 calls of the 200-episode program (one compiled program for progress
    and final evaluations), block i from split(key, 5)[i], joined along the episode axis."""
    from jaxenvs.train import episodes as ep

    trainer, runs = grid
    params = runs[0][0].params
    key = jax.random.key(7)
    before = set(ep._EPISODE_FNS)
    traj, first = ep.episodes(trainer, params, key, num_episodes=5 * ep.BLOCK)
    assert {k[2] for k in set(ep._EPISODE_FNS) - before} <= {ep.BLOCK}
    assert not any(k[0] == id(trainer) and k[2] == 5 * ep.BLOCK for k in ep._EPISODE_FNS)
    blocks = [ep.episodes(trainer, params, k, num_episodes=ep.BLOCK)[0] for k in jax.random.split(key, 5)]
    assert traj.terminated.shape[1] == 5 * ep.BLOCK and first["length"].shape == (5 * ep.BLOCK,)
    np.testing.assert_array_equal(traj.terminated, np.concatenate([b.terminated for b in blocks], axis=1))
    for name in ("agent", "target"):
        np.testing.assert_array_equal(traj.obs[name], np.concatenate([b.obs[name] for b in blocks], axis=1))
        np.testing.assert_array_equal(traj.last_obs[name], np.concatenate([b.last_obs[name] for b in blocks], axis=0))
    # a count that is not a multiple of the block is one call of its own size
    assert ep.episodes(trainer, params, key, num_episodes=30)[0].terminated.shape[1] == 30
