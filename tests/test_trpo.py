"""TRPO (train/trpo.py), its linear feature baseline (train/baselines.py), ``normalize``, and the
``nonfinite`` flag of every update's metrics (PPO and TRPO)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import jaxenvs
from jaxenvs.train.baselines import fit_linear_baseline, linear_features
from jaxenvs.train.configs import TRPOConfig, get_config
from jaxenvs.train.networks import ActorCritic, Categorical, Gaussian
from jaxenvs.train.trainers import make_trainer
from jaxenvs.train.trpo import conjugate_gradient, fisher_vector_product, line_search, natural_gradient_step


def test_conjugate_gradient_solves_a_random_spd_system():
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.normal(size=(8, 8)))
    a = (q * rng.uniform(1.0, 10.0, 8)) @ q.T  # SPD, condition number <= 10
    b = rng.normal(size=8)
    x = conjugate_gradient(lambda v: jnp.asarray(a, jnp.float32) @ v, jnp.asarray(b, jnp.float32), iters=10)
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(a, b), rtol=1e-4, atol=1e-5)
    # fewer iterations than the dimension: not yet converged, but the residual has fallen
    x2 = conjugate_gradient(lambda v: jnp.asarray(a, jnp.float32) @ v, jnp.asarray(b, jnp.float32), iters=2)
    assert np.linalg.norm(a @ np.asarray(x2) - b) < np.linalg.norm(b)


def _tiny_policy(continuous: bool, key=0):
    net = ActorCritic(action_dim=3, continuous=continuous, hidden_sizes=(4,), critic=False, log_std_init=-0.3)
    obs = jax.random.normal(jax.random.key(key), (5, 2))
    params = net.init(jax.random.key(key + 1), obs)
    theta, unravel = ravel_pytree(params)
    dist_fn = (lambda out: Gaussian(*out)) if continuous else Categorical
    return (lambda t: net.apply(unravel(t), obs)[0]), dist_fn, theta


@pytest.mark.parametrize("continuous", [True, False])
def test_fisher_vector_product_equals_the_explicit_fisher_matrix(continuous):
    apply_fn, dist_fn, theta = _tiny_policy(continuous)
    out = apply_fn(theta)
    jac = jax.jit(jax.jacobian(apply_fn))(theta)
    if continuous:  # F = mean_b J_mean^T diag(1/sigma^2) J_mean + 2 J_logstd^T J_logstd
        j_mean, j_log_std = np.asarray(jac[0], np.float64), np.asarray(jac[1], np.float64)  # [B, d, P], [d, P]
        inv_var = np.exp(-2.0 * np.asarray(out[1], np.float64))
        fisher = np.einsum("bdp,d,bdq->pq", j_mean, inv_var, j_mean) / j_mean.shape[0] + 2.0 * j_log_std.T @ j_log_std
    else:  # F = mean_b J^T (diag(p) - p p^T) J
        j = np.asarray(jac, np.float64)  # [B, n, P]
        p = np.asarray(jax.nn.softmax(out), np.float64)
        m = np.stack([np.diag(pb) - np.outer(pb, pb) for pb in p])
        fisher = np.einsum("bip,bij,bjq->pq", j, m, j) / j.shape[0]
    damping = 1e-3
    fvp = jax.jit(fisher_vector_product(apply_fn, dist_fn, theta, damping))
    for k in range(3):
        v = jax.random.normal(jax.random.key(10 + k), theta.shape)
        want = fisher @ np.asarray(v, np.float64) + damping * np.asarray(v, np.float64)
        np.testing.assert_allclose(np.asarray(fvp(v)), want, rtol=2e-4, atol=2e-6)


def test_every_accepted_step_keeps_the_mean_kl_within_max_kl():
    hp = TRPOConfig().hparams()

    @jax.jit
    def step(key, max_kl, poison=jnp.float32(1.0)):
        apply_fn, dist_fn, theta = _tiny_policy(True)
        theta = theta * poison
        k_a, k_adv = jax.random.split(key)
        old = dist_fn(apply_fn(theta))
        actions = old.sample(k_a)
        adv = jax.random.normal(k_adv, (5,))
        new_theta, info = natural_gradient_step(
            apply_fn, dist_fn, theta, actions, old.log_prob(actions), adv, hp.replace(max_kl=max_kl), 10, 15
        )
        # recomputed outside the line search: KL(old || new) of the Gaussians, and the surrogate
        new = dist_fn(apply_fn(new_theta))
        var_o, var_n = jnp.exp(2 * old.log_std), jnp.exp(2 * new.log_std)
        kl = jnp.sum(0.5 * (jnp.log(var_n / var_o) + (var_o + (old.mean - new.mean) ** 2) / var_n - 1), -1).mean()
        surrogate = -jnp.mean(jnp.exp(new.log_prob(actions) - old.log_prob(actions)) * adv)
        return info, kl, surrogate

    accepted = 0
    for i, max_kl in enumerate([1e-4, 1e-3, 1e-2, 1e-1]):
        for k in range(3):
            info, kl, surrogate = step(jax.random.key(100 * i + k), jnp.float32(max_kl))
            if info["accepted"]:
                accepted += 1
                assert float(kl) <= max_kl * (1 + 1e-4)
                np.testing.assert_allclose(float(kl), float(info["kl"]), rtol=1e-3, atol=1e-7)
                assert float(surrogate) < float(info["loss_before"])
            else:
                assert float(info["kl"]) == 0.0 and float(info["step_fraction"]) == 0.0
    assert accepted >= 10  # the quadratic model of the KL holds for a tiny network: most steps pass
    info, _, _ = step(jax.random.key(0), jnp.float32(0.01))
    assert bool(info["finite"])
    info, _, _ = step(jax.random.key(0), jnp.float32(0.01), jnp.float32(jnp.nan))  # poisoned params
    assert not bool(info["finite"]) and not bool(info["accepted"])


def test_line_search_rejects_a_step_that_improves_the_surrogate_but_breaks_the_kl_bound():
    theta = jnp.zeros(2)
    loss_fn = lambda t: -jnp.sum(t)  # noqa: E731  (every step along +1 improves the surrogate)
    kl_fn = lambda t: jnp.sum(t**2)  # noqa: E731
    full_step = -jnp.ones(2)  # candidates theta - r^k * full_step = r^k * (1, 1): KL 2 r^(2k)

    new, info = line_search(loss_fn, kl_fn, theta, full_step, loss_fn(theta), 0.01, 0.8, 3)
    assert loss_fn(theta + 0.8**2) < loss_fn(theta)  # the last candidate improves the surrogate ...
    assert 2 * 0.8**4 > 0.01  # ... but breaks the bound: rejected, theta kept
    assert not bool(info["accepted"]) and int(info["backtracks"]) == 3
    np.testing.assert_array_equal(np.asarray(new), np.zeros(2))
    assert float(info["loss"]) == 0.0 and float(info["kl"]) == 0.0

    # with enough backtracks, the first fraction r^k with 2 r^(2k) <= 0.01 is taken: k = 12
    new, info = line_search(loss_fn, kl_fn, theta, full_step, loss_fn(theta), 0.01, 0.8, 15)
    k = next(k for k in range(15) if 2 * 0.8 ** (2 * k) <= 0.01)
    assert bool(info["accepted"]) and int(info["backtracks"]) == k
    np.testing.assert_allclose(np.asarray(new), np.full(2, 0.8**k), rtol=1e-5)
    np.testing.assert_allclose(float(info["kl"]), 2 * 0.8 ** (2 * k), rtol=1e-4)


def test_linear_baseline_features_and_fit_equal_garage_with_numpy_lstsq():
    rng = np.random.default_rng(1)
    obs = rng.normal(scale=4.0, size=(300, 3)).astype(np.float32)
    t = np.tile(np.arange(100), 3)
    returns = (obs @ [1.0, -2.0, 0.5] + 0.3 * obs[:, 0] ** 2 - t / 50 + rng.normal(size=300)).astype(np.float32)
    # garage's LinearFeatureBaseline._features, per path of 100 steps
    o = np.clip(obs, -10, 10)
    al = (t / 100.0)[:, None]
    want_features = np.concatenate([o, o**2, al, al**2, al**3, np.ones((300, 1))], axis=1)
    features = np.asarray(jax.jit(linear_features)(jnp.asarray(obs), jnp.asarray(t)))
    np.testing.assert_allclose(features, want_features, rtol=1e-6)
    reg = 1e-5
    coeffs = np.asarray(jax.jit(fit_linear_baseline)(jnp.asarray(features), jnp.asarray(returns), jnp.float32(reg)))
    x = want_features
    want = np.linalg.lstsq(x.T @ x + reg * np.eye(x.shape[1]), x.T @ returns.astype(np.float64), rcond=-1)[0]
    np.testing.assert_allclose(coeffs, want, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(x @ coeffs, x @ want, atol=1e-2)  # the predictions agree closely


def test_normalize_rescales_actions_and_composes_the_optional_normalisers():
    env = jaxenvs.wrappers.normalize(jaxenvs.make("PointEnv-v0"))
    space = env.action_space(env.default_params)
    np.testing.assert_array_equal(space.low, [-1, -1])
    np.testing.assert_array_equal(space.high, [1, 1])
    raw = jaxenvs.make("PointEnv-v0")

    @jax.jit
    def first_steps():
        _, state = env.reset(jax.random.key(0))
        _, raw_state = raw.reset(jax.random.key(0))
        return env.step(jax.random.key(1), state, jnp.array([1.0, -0.5])), raw.step(jax.random.key(1), raw_state, jnp.array([0.1, -0.05]))

    (obs, _, reward, *_), (raw_obs, _, raw_reward, *_) = first_steps()
    np.testing.assert_allclose(np.asarray(obs), np.asarray(raw_obs), rtol=1e-6)
    np.testing.assert_allclose(float(reward), float(raw_reward), rtol=1e-6)
    scaled = jaxenvs.wrappers.normalize(jaxenvs.make("GridWorld-v0"), normalize_obs=True, normalize_reward=True, scale_reward=2.0)
    obs, _ = jax.jit(scaled.reset)(jax.random.key(0))
    assert obs.shape == (4,) and obs.dtype == jnp.float32  # flattened, then normalised
    with pytest.raises(ValueError, match="expected_action_scale"):
        jaxenvs.wrappers.normalize(jaxenvs.make("PointEnv-v0"), expected_action_scale=0.0)


def test_bad_trpo_configs_are_rejected_with_the_allowed_values():
    with pytest.raises(ValueError, match="baseline must be one of 'linear', 'value'; got 'quadratic'"):
        get_config("PointEnv-v0", algo="trpo", baseline="quadratic")
    with pytest.raises(ValueError, match="max_kl must be a finite number > 0"):
        get_config("PointEnv-v0", algo="trpo", max_kl=float("nan"))
    with pytest.raises(ValueError, match=r"backtrack_ratio must be a finite number > 0 and < 1; got 1.0"):
        get_config("PointEnv-v0", algo="trpo", backtrack_ratio=1.0)
    with pytest.raises(TypeError, match="unknown TRPOConfig field"):
        get_config("PointEnv-v0", algo="trpo", clip_eps=0.2)


TINY_TRPO = dict(total_timesteps=128, num_envs=4, num_steps=8, hidden_sizes=(8,))


def test_ppo_flags_a_nan_learning_rate_as_nonfinite():
    cfg = get_config("GridWorld-v0", total_timesteps=32, num_envs=2, num_steps=4, update_epochs=1, num_minibatches=1, hidden_sizes=(8,))
    trainer = make_trainer(cfg)
    runner = trainer.init(jax.random.key(0))
    _, metrics = trainer.run_updates(runner, cfg.hparams(), num_updates=1)
    assert not bool(np.asarray(metrics["nonfinite"]).any())
    _, metrics = trainer.run_updates(runner, cfg.hparams().replace(lr=jnp.float32(jnp.nan)), num_updates=1)
    assert bool(np.asarray(metrics["nonfinite"]).all())


def test_python_m_train_algo_trpo_writes_a_run_that_evaluates(tmp_path, capsys):
    from jaxenvs.train.app.__main__ import main
    from jaxenvs.train.checkpoint import load_run
    from jaxenvs.cli import main as jaxenvs_main

    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(TINY_TRPO))
    assert main(["--algo", "trpo", "--env", "PointEnv-v0", "--config", str(config), "--seeds", "2",
                 "--chunks", "2", "--out", str(tmp_path / "runs"), "--no-gif"]) == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    for name in ("config.json", "metrics.csv", "metrics.json", "checkpoint.msgpack", "evaluation.json", "learning_curve.png"):
        assert (run_dir / name).is_file(), name
    stored = json.loads((run_dir / "config.json").read_text())
    assert stored["algo"] == "trpo" and stored["baseline"] == "linear" and stored["run"]["num_seeds"] == 2
    rows = (run_dir / "metrics.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + 128 // 32  # header + one row per update
    per_seed = json.loads((run_dir / "metrics.json").read_text())["per_seed"]
    kl = np.array(per_seed["approx_kl"], np.float64)  # [updates, seeds]: 0 where a step was rejected
    assert kl.shape == (4, 2) and np.all(kl <= stored["max_kl"] * (1 + 1e-4)) and np.any(kl > 0)
    evaluation = json.loads((run_dir / "evaluation.json").read_text())
    assert len(evaluation["seeds"]) == 2 and "success_rate" in evaluation["seeds"][0]
    capsys.readouterr()
    jaxenvs_main(["evaluate", str(run_dir), "--json"])  # reloads the TRPO checkpoint (exit status: whether it is solved)
    assert json.loads(capsys.readouterr().out)["seeds"] == evaluation["seeds"]
    # greedy actions are the registered env's: normalize maps [-1, 1] onto PointEnv's +-0.1
    trainer, runner, meta = load_run(run_dir)
    assert meta["update"] == 4 and trainer.config.ALGO == "trpo"
    params = jax.tree.map(lambda x: x[0], runner.params)
    obs = jax.random.uniform(jax.random.key(3), (64, 2), minval=-1.0, maxval=1.0)
    a = np.asarray(trainer.act(params, obs))
    assert a.shape == (64, 2) and np.all(np.abs(a) <= 0.1 + 1e-7) and np.abs(a).max() > 0
