"""jaxenvs.rollout: exact episode splitting, GridWorld's dynamics along a recorded rollout, continuing
from where a rollout stopped, the random policy's distribution and the argument errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs.rollout import Episode, Trajectory, episode_stats, random_policy, rollout


def _traj(reward, terminated, truncated):
    n = None
    return Trajectory(n, n, n, np.asarray(reward, np.float32), np.asarray(terminated), np.asarray(truncated), {}, n, n)


def test_episode_stats_exact():
    f, t = False, True
    # one env: episodes end at steps 1 (terminated), 4 (truncated and terminated), then one runs on
    traj = _traj([0, 1, 0.5, 0.5, 2, 3], [f, t, f, f, t, f], [f, f, f, f, t, f])
    assert episode_stats(traj) == [Episode(0, 0, 2, 1.0, "terminated"), Episode(0, 2, 3, 3.0, "terminated")]
    assert episode_stats(traj, include_unfinished=True)[-1] == Episode(0, 5, 1, 3.0, "unfinished")
    # two envs x two agents: reward [T, B, N]
    reward = np.arange(3 * 2 * 2, dtype=np.float32).reshape(3, 2, 2)
    traj = _traj(reward, [[f, f], [t, f], [f, f]], [[f, f], [f, f], [f, t]])
    eps = episode_stats(traj)
    expected = [(0, 0, 2, "terminated"), (1, 0, 3, "truncated")]
    assert [(e.env_index, e.start, e.length, e.outcome) for e in eps] == expected
    np.testing.assert_array_equal(eps[0].returns, reward[:2, 0].sum(0))
    np.testing.assert_array_equal(eps[1].returns, reward[:, 1].sum(0))
    with pytest.raises(ValueError, match=r"expected \[T\] or \[T, num_envs\]"):
        episode_stats(_traj(np.zeros((2, 2, 2)), np.zeros((2, 2, 2), bool), np.zeros((2, 2, 2), bool)))


def test_rollout_grid_world_invariants(grid_rollout):
    env, traj, _ = grid_rollout
    assert traj.reward.shape == (24,) and traj.terminated.dtype == jnp.bool_
    obs, state = traj.obs, env.unwrapped_state(traj.state)
    np.testing.assert_array_equal(obs["agent"], state.agent)  # obs is the state's observation
    # an action moves the agent by its direction, clipped, except where an episode ended
    d = np.array([[1, 0], [0, 1], [-1, 0], [0, -1]])
    moved = np.clip(np.asarray(obs["agent"][:-1]) + d[np.asarray(traj.action[:-1])], 0, 1)
    done = np.asarray(traj.terminated | traj.truncated)
    np.testing.assert_array_equal(moved[~done[:-1]], np.asarray(obs["agent"][1:])[~done[:-1]])
    final = jax.tree.map(np.asarray, traj.info["final_obs"])
    np.testing.assert_array_equal(final["agent"][done], final["target"][done])  # ended on the target
    np.testing.assert_array_equal(traj.reward, traj.terminated.astype(np.float32))
    eps = episode_stats(traj)
    assert len(eps) == int(done.sum()) >= 1 and all(e.returns == 1.0 and e.outcome == "terminated" for e in eps)
    # continuing from where it stopped
    more = rollout(
        env, jax.random.key(4), random_policy(env), 24, initial=(traj.last_obs, traj.last_state), record_states=False
    )
    np.testing.assert_array_equal(more.obs["agent"][0], traj.last_obs["agent"])
    assert more.state is None and more.reward.shape == (24,)


def test_random_policy_is_uniform_and_per_agent():
    env = jaxenvs.make("GridWorld-v0")
    keys = jax.random.split(jax.random.key(0), 2000)
    acts = np.asarray(jax.vmap(random_policy(env), in_axes=(0, None))(keys, None))
    assert acts.shape == (2000,) and acts.dtype == np.int32
    counts = np.bincount(acts, minlength=4)
    assert ((counts - 500) ** 2 / 500).sum() < 16.27, counts  # chi-square, 3 dof, p = 0.001
    ma = jaxenvs.make("RockPaperScissors-v0")
    acts = np.asarray(jax.vmap(random_policy(ma), in_axes=(0, None))(keys[:900], None))
    assert acts.shape == (900, 2)
    joint = np.bincount(acts[:, 0] * 3 + acts[:, 1], minlength=9)  # agents draw independently
    assert ((joint - 100) ** 2 / 100).sum() < 26.12, joint  # chi-square, 8 dof, p = 0.001
    with pytest.raises(ValueError, match="num_steps must be an int >= 1, got 0"):
        rollout(env, jax.random.key(0), random_policy(env), 0)
    with pytest.raises(ValueError, match="num_envs must be None or an int >= 1, got 0"):
        rollout(env, jax.random.key(0), random_policy(env), 3, num_envs=0)


def _by_hand(venv, policy, key, num_steps, num_envs):
    """rollout's key derivation, written out, with the env stepped by ``venv``."""
    key_reset, key_run = jax.random.split(key)
    obs, state = jax.vmap(venv.env.reset)(jax.random.split(key_reset, num_envs))
    rows = []
    for k in jax.random.split(key_run, num_steps):
        key_act, key_step = jax.random.split(k)
        action = jax.vmap(policy)(jax.random.split(key_act, num_envs), obs)
        obs, state, reward, terminated, truncated, info = venv.step(key_step, state, action)
        rows.append((action, reward, terminated, truncated, info["final_obs"]["agent"] if "final_obs" in info else obs["agent"]))
    return obs, [np.stack(x) for x in zip(*rows)]


@pytest.mark.parametrize("autoreset", [True, False])
def test_batched_rollout_steps_through_vector_env(autoreset):
    """A batched rollout is VectorEnv's batched path (one key per batch step, batch-level
    auto-reset from the env's own AutoReset), transition for transition; an env built without
    auto-reset is not given one."""
    env = jaxenvs.make("GridWorld-v0", max_episode_steps=6, autoreset=autoreset)
    policy = random_policy(env)
    key, n, t = jax.random.key(11), 8, 30
    traj = rollout(env, key, policy, t, num_envs=n)
    venv = jaxenvs.VectorEnv(env, n, autoreset=autoreset)
    last_obs, (action, reward, terminated, truncated, ended_at) = _by_hand(venv, policy, key, t, n)
    np.testing.assert_array_equal(traj.action, action)
    np.testing.assert_array_equal(traj.reward, reward)
    np.testing.assert_array_equal(traj.terminated, terminated)
    np.testing.assert_array_equal(traj.truncated, truncated)
    np.testing.assert_array_equal(traj.last_obs["agent"], last_obs["agent"])
    if autoreset:
        np.testing.assert_array_equal(traj.info["final_obs"]["agent"], ended_at)
        assert truncated.any() and (traj.state.time <= 6).all()  # episodes end and restart
    else:
        assert "final_obs" not in traj.info
        assert truncated[6:].all() and (traj.state.time[-1] == t - 1).all()  # the clock runs on


def test_batch_random_policy_draws_legal_moves_uniformly_in_one_draw():
    from jaxenvs.rollout import batch_random_policy

    env = jaxenvs.make("TicTacToe-v0")
    n = 6
    venv = jaxenvs.VectorEnv(env, n)
    obs, state = venv.reset(jax.random.key(0))
    policy = jax.jit(batch_random_policy(env, n))
    # a few plies in: envs with different legal moves
    for t in range(3):
        obs, state, *_ = venv.step(jax.random.key(t), state, policy(jax.random.key(100 + t), obs))
    mask = np.asarray(obs["action_mask"]) != 0  # (n, 2, 9): the mover's row
    movers = mask.any(axis=1)
    draws = np.stack([np.asarray(policy(jax.random.key(1000 + i), obs)) for i in range(400)])  # (400, n, 2)
    assert (draws[..., 0] == draws[..., 1]).all()  # one value, put in both rows
    for e in range(n):
        legal = np.flatnonzero(movers[e])
        counts = np.bincount(draws[:, e, 0], minlength=9)
        assert counts[~movers[e]].sum() == 0  # never an illegal move
        expected = 400 / len(legal)
        chi2 = ((counts[legal] - expected) ** 2 / expected).sum()
        assert chi2 < 26.1  # chi-square, at most 8 degrees of freedom, p = 0.001


def test_batch_random_policy_covers_the_action_space_without_a_mask():
    from jaxenvs.rollout import batch_random_policy

    env = jaxenvs.make("GridWorld-v0")
    a = np.asarray(batch_random_policy(env, 4000)(jax.random.key(0), None))
    assert a.shape == (4000,) and a.dtype == np.int32
    counts = np.bincount(a, minlength=4)
    assert len(counts) == 4 and ((counts - 1000) ** 2 / 1000).sum() < 16.3  # chi-square, 3 dof, p = 0.001
