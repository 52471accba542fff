"""GAE with truncation bootstrapping (train.gae.gae) against an independent numpy reference, and
the rollout's use of info["final_obs"]."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenvs.train.configs import get_config
from jaxenvs.train.gae import gae
from jaxenvs.train.trainers import make_trainer

GAMMA, LAM = 0.9, 0.8


def reference_gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """Episode by episode: inside an episode the next state's value is values[t + 1]; at its last
    step the bootstrap is 0 if terminated, else the value of the final observation; a segment cut
    by the rollout's end also bootstraps from the final observation."""
    T, B = rewards.shape
    adv = np.zeros((T, B))
    for b in range(B):
        ends = [t for t in range(T) if terminated[t, b] or truncated[t, b]]
        start = 0
        for end in ends + ([T - 1] if not ends or ends[-1] != T - 1 else []):
            for t in range(start, end + 1):
                total, discount = 0.0, 1.0
                for k in range(t, end + 1):
                    if k < end:
                        nxt = values[k + 1, b]
                    else:
                        nxt = 0.0 if terminated[k, b] else next_values[k, b]
                    total += discount * (rewards[k, b] + gamma * nxt - values[k, b])
                    discount *= gamma * lam
                adv[t, b] = total
            start = end + 1
    return adv


def random_rollout(seed, T=12, B=5):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(T, B))
    values = rng.normal(size=(T, B))
    terminated = rng.random((T, B)) < 0.15
    truncated = rng.random((T, B)) < 0.15  # some steps are both (time limit on the terminal step)
    truncated[3, 0], terminated[3, 0] = True, False  # a truncation mid-rollout, for sure
    # inside an episode the next observation's value is values[t + 1]; at an episode's end (or the
    # rollout's end) it is the value of the final observation, unrelated to the reset state's
    next_values = np.concatenate([values[1:], rng.normal(size=(1, B))])
    done = terminated | truncated
    next_values[done] = rng.normal(size=done.sum())
    return rewards, values, next_values, terminated, truncated


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gae_matches_numpy_reference_with_mid_rollout_truncations(seed):
    r, v, nv, term, trunc = random_rollout(seed)
    assert (trunc & ~term).any() and term.any()
    adv, targets = gae(*map(jnp.asarray, (r, v, nv, term, trunc)), GAMMA, LAM)
    ref = reference_gae(r, v, nv, term, trunc, GAMMA, LAM)
    np.testing.assert_allclose(adv, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(targets, ref + v, rtol=1e-5, atol=1e-5)


def test_lambda_one_gives_discounted_return_with_bootstrap():
    # one env; episode 1 truncated at t=2 (bootstrap 5.0), episode 2 terminated at t=4 (no bootstrap)
    r = np.array([[1.0], [2.0], [3.0], [4.0], [5.0]])
    v = np.array([[0.5], [0.1], [0.2], [0.3], [0.4]])
    nv = np.array([[0.1], [0.2], [5.0], [0.4], [9.0]])
    term = np.array([[0], [0], [0], [0], [1]], bool)
    trunc = np.array([[0], [0], [1], [0], [0]], bool)
    _, targets = gae(*map(jnp.asarray, (r, v, nv, term, trunc)), GAMMA, 1.0)
    g = GAMMA
    expected = [1 + g * 2 + g**2 * 3 + g**3 * 5.0, 2 + g * 3 + g**2 * 5.0, 3 + g * 5.0, 4 + g * 5, 5.0]
    np.testing.assert_allclose(targets[:, 0], expected, rtol=1e-6)


def test_truncated_and_terminated_on_same_step_does_not_bootstrap():
    r, v, nv = (np.array([[1.0]]), np.array([[0.25]]), np.array([[100.0]]))
    adv, _ = gae(*map(jnp.asarray, (r, v, nv, np.array([[True]]), np.array([[True]]))), GAMMA, LAM)
    assert float(adv[0, 0]) == pytest.approx(1.0 - 0.25)
    adv, _ = gae(*map(jnp.asarray, (r, v, nv, np.array([[False]]), np.array([[True]]))), GAMMA, LAM)
    assert float(adv[0, 0]) == pytest.approx(1.0 + GAMMA * 100.0 - 0.25)


def test_rollout_records_pre_reset_final_observation_on_truncation():
    # PointEnv episodes never end by chance in 3 steps; max_episode_steps=3 truncates every third step
    cfg = get_config("PointEnv-v0", env_kwargs={"max_episode_steps": 3}, num_envs=4, num_steps=7)
    trainer = make_trainer(cfg)
    runner = trainer.init(jax.random.key(0))
    _, (traj, _) = jax.jit(trainer._rollout)(runner, cfg.hparams())
    trunc = np.asarray(traj.truncated)
    assert trunc[[2, 5]].all() and not trunc[[0, 1, 3, 4, 6]].any()
    assert not np.asarray(traj.terminated).any()
    obs, final = np.asarray(traj.obs), np.asarray(traj.final_obs)
    cont = ~trunc[:-1]
    # within episodes the final observation is the next step's observation ...
    np.testing.assert_array_equal(final[:-1][cont], obs[1:][cont])
    # ... on truncation it is where the episode was cut: the previous position plus the clipped action
    for t in (2, 5):
        action = np.clip(np.asarray(traj.action[t]), -1, 1) * 0.1
        np.testing.assert_allclose(final[t], obs[t] + action, atol=1e-6)
        assert np.abs(final[t] - obs[t + 1]).max() > 1e-3  # the next obs is a fresh reset
