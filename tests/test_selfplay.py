"""The trainer on turn-based games: decision-level GAE (`train.gae.gae_decisions`) against `gae`
and a hand-built game, and a tiny masked PPO on Tic-Tac-Toe (one compiled rollout, loss gradient
and update shared by the module): the update's first minibatch has ratio 1, rows that made no
decision get exactly zero gradient, sampling is never illegal, the per-update game metrics are
fractions that add up. TRPO refuses masked games. Every check is one jitted call (no eager
op-by-op execution): the file's compiles are the cost."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenvs.train.gae import gae as _gae
from jaxenvs.train.gae import gae_decisions as _gae_decisions
from jaxenvs.train.configs import get_config
from jaxenvs.train.permutation import minibatch_permutation
from jaxenvs.train.trainers import make_trainer

GAMMA, LAM = 0.9, 0.8
gae, gae_decisions = jax.jit(_gae), jax.jit(_gae_decisions)  # one compile per shape, not op by op


# ---- decision-level GAE ----------------------------------------------------------------------------


def test_gae_decisions_equals_gae_when_every_row_acts():
    rng = np.random.default_rng(0)
    T, B = 12, 5
    rewards = rng.normal(size=(T, B)).astype(np.float32)
    values = rng.normal(size=(T, B)).astype(np.float32)
    terminated = rng.random((T, B)) < 0.15
    truncated = (rng.random((T, B)) < 0.1) & ~terminated
    done = terminated | truncated
    # the value of the next observation: the next step's value inside an episode, V(final_obs) at its end
    final_values = rng.normal(size=(T, B)).astype(np.float32)
    next_values = np.where(done, final_values, np.concatenate([values[1:], final_values[-1:]]))
    args = [jnp.asarray(a) for a in (rewards, values, next_values, terminated, truncated)]
    adv, target = gae(*args, GAMMA, LAM)
    adv_d, target_d = gae_decisions(*args, jnp.ones((T, B), bool), GAMMA, LAM)
    np.testing.assert_allclose(adv_d, adv, rtol=0, atol=1e-6)
    np.testing.assert_allclose(target_d, target, rtol=0, atol=1e-6)
    assert np.abs(np.asarray(adv)).max() > 0.1  # not a trivial case


def test_three_ply_game_credits_each_seat_its_own_decisions():
    """X moves (t=0), O moves (t=1), X wins (t=2): rows are (X, O). O's only decision gets the -1
    that arrives on X's ply; X's decisions get +1, the earlier one discounted once per X decision."""
    acting = jnp.array([[True, False], [False, True], [True, False]])
    rewards = jnp.array([[0.0, 0.0], [0.0, 0.0], [1.0, -1.0]])
    values = jnp.array([[0.1, 0.2], [0.3, -0.4], [0.5, 0.6]])
    next_values = jnp.full((3, 2), 7.0)  # V(final_obs): never used (no truncation, and the game ends)
    terminated = jnp.array([[False] * 2, [False] * 2, [True] * 2])
    truncated = jnp.zeros((3, 2), bool)
    adv, target = gae_decisions(rewards, values, next_values, terminated, truncated, acting, GAMMA, LAM)
    adv, target = np.asarray(adv), np.asarray(target)
    a_x2 = 1.0 - 0.5  # X's winning move: reward 1, terminal
    a_x0 = (0.0 + GAMMA * 0.5 - 0.1) + GAMMA * LAM * a_x2  # bootstraps from X's next decision (t=2)
    a_o1 = -1.0 - (-0.4)  # the -1 of X's winning ply reaches O's last decision; terminal
    np.testing.assert_allclose(adv, [[a_x0, 0.0], [0.0, a_o1], [a_x2, 0.0]], atol=1e-6)
    np.testing.assert_allclose(target[:, 0][[0, 2]], [a_x0 + 0.1, 1.0], atol=1e-6)
    assert target[1, 1] == pytest.approx(-1.0)
    # lambda = 1: Monte-Carlo returns per seat, discounted per own decision
    _, mc = gae_decisions(rewards, values, next_values, terminated, truncated, acting, GAMMA, 1.0)
    np.testing.assert_allclose(np.asarray(mc)[[0, 2, 1], [0, 0, 1]], [GAMMA * 1.0, 1.0, -1.0], atol=1e-6)


def test_episode_ends_cut_the_trace_and_truncation_bootstraps():
    """One row, decisions at t=0 and t=2; the episode is truncated at t=1 (after a reward of 2 on a
    step the row did not act), a new episode starts at t=2 and the rollout ends at t=3."""
    acting = jnp.array([[True], [False], [True], [False]])
    rewards = jnp.array([[0.5], [2.0], [0.0], [3.0]])
    values = jnp.array([[1.0], [9.0], [-1.0], [9.0]])
    next_values = jnp.array([[9.0], [4.0], [9.0], [6.0]])  # V(final_obs) at t=1 (truncated), V(obs_T) at t=3
    terminated = jnp.zeros((4, 1), bool)
    truncated = jnp.array([[False], [True], [False], [False]])
    adv, _ = gae_decisions(rewards, values, next_values, terminated, truncated, acting, GAMMA, LAM)
    np.testing.assert_allclose(np.asarray(adv)[:, 0], [0.5 + 2.0 + GAMMA * 4.0 - 1.0, 0.0, 3.0 + GAMMA * 6.0 + 1.0, 0.0],
                               atol=1e-5)


# ---- masked PPO on a tiny Tic-Tac-Toe ------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny():
    """A tiny masked PPO on Tic-Tac-Toe in pure self-play (the tuned entry's opponents off), one rollout
    from init and its flattened batch (one jitted call)."""
    cfg = get_config("TicTacToe-v0", num_envs=4, num_steps=12, total_timesteps=48, hidden_sizes=(16,),
                     update_epochs=1, num_minibatches=2, match_games=8, random_opponents=0.0)
    trainer = make_trainer(cfg)
    hp = cfg.hparams()

    @jax.jit
    def collect(key):
        runner = trainer._init(key, hp)
        new_runner, (traj, stats) = trainer._rollout(runner, hp)
        next_values = trainer._next_values(new_runner.params, traj)
        adv, targets = trainer.advantages(traj, next_values, hp)
        n = traj.reward.size
        flat = jax.tree.map(lambda x: x.reshape((n,) + x.shape[2:]), (traj, adv, targets))
        return runner, traj, stats, flat

    runner, traj, stats, flat = collect(jax.random.key(0))
    return trainer, runner, traj, stats, flat, hp


def test_rollout_stores_masks_and_never_samples_an_illegal_move(tiny):
    trainer, _, traj, stats, _, _ = tiny
    mask, acting, action = np.asarray(traj.mask), np.asarray(traj.acting), np.asarray(traj.action)
    assert mask.shape == (12, 8, 9) and mask.dtype == bool and acting.shape == (12, 8)
    np.testing.assert_array_equal(acting, mask.any(-1))
    # two rows per env, exactly one of them acts at every step (no chance plies in Tic-Tac-Toe)
    np.testing.assert_array_equal(acting.reshape(12, 4, 2).sum(-1), 1)
    assert np.all(np.take_along_axis(mask, action[..., None], -1)[..., 0][acting])
    decisions, illegal = (np.asarray(s) for s in stats[3:])
    assert decisions.sum() == acting.sum() and illegal.sum() == 0  # the update's illegal_rate: exactly 0
    assert np.asarray(stats[0]).any(), "no game ended in the rollout: nothing was checked at episode ends"


def test_ablation_without_masking_samples_illegal_moves(tiny):
    trainer, runner, traj, _, _, _ = tiny
    ablation = make_trainer(trainer.config.replace(mask_actions=False))
    x, mask = traj.obs.reshape(-1, traj.obs.shape[-1]), np.asarray(traj.mask.reshape(-1, 9))
    dist, _ = ablation.policy(runner.params, x, mask)
    probs = np.asarray(dist.probs())
    acting = mask.any(-1)
    illegal_mass = (probs * ~mask).sum(-1)[acting]  # what the ablation's samples put on illegal moves
    assert illegal_mass.mean() > 0.2  # most cells are taken late in a game
    masked, _ = trainer.policy(runner.params, x, mask)
    assert np.all((np.asarray(masked.probs()) * ~mask)[acting] == 0.0)


def test_first_minibatch_of_first_epoch_has_ratio_one(tiny):
    trainer, runner, _, _, flat, hp = tiny

    @jax.jit
    def first_minibatch(params):
        perm = minibatch_permutation(jax.random.key(2), flat[1].shape[0])  # as the update draws it
        mb = jax.tree.map(lambda x: x[perm][: x.shape[0] // 2], flat)
        t = mb[0]
        dist, _ = trainer.policy(params, t.obs, t.mask)  # the stored masks
        return jnp.exp(dist.log_prob(t.action) - t.log_prob), trainer._loss(params, mb, hp)[1]

    ratio, info = first_minibatch(runner.params)  # the params the rollout acted with
    np.testing.assert_allclose(np.asarray(ratio), 1.0, rtol=0, atol=1e-6)
    assert float(info["clip_frac"]) == 0.0 and abs(float(info["approx_kl"])) < 1e-9


def test_rows_that_did_not_act_get_exactly_zero_gradient(tiny):
    trainer, runner, _, _, (t, adv, targets), hp = tiny

    def loss_of_obs(obs):
        return trainer._loss(runner.params, (t._replace(obs=obs), adv, targets), hp)[0]

    @jax.jit
    def check(obs):
        noisy = jnp.where(t.acting[:, None], obs, 1e3)  # garbage in every row that did not act
        return jax.grad(loss_of_obs)(obs), loss_of_obs(obs), loss_of_obs(noisy)

    g, loss, noisy_loss = (np.asarray(v) for v in check(t.obs))
    acting = np.asarray(t.acting)
    assert np.all(g[~acting] == 0.0)
    assert np.abs(g[acting]).sum(-1).min() > 0  # every acting row moves the loss
    assert loss == noisy_loss


def test_update_reports_illegal_rate_and_game_fractions_per_seat(tiny):
    trainer, runner, _, stats, _, hp = tiny
    shapes = jax.eval_shape(trainer._update, runner, hp)[1]  # the update's metrics (traced, not compiled)
    expected = {"illegal_rate"} | {f"{k}_seat{i}" for k in ("win", "draw", "loss") for i in (0, 1)}
    assert expected <= set(shapes) and all(shapes[k].shape == () for k in expected)
    turn_metrics = jax.jit(trainer.turn_metrics)
    m = turn_metrics(runner.params, jax.random.key(3), *stats[3:])
    m = {k: float(v) for k, v in m.items()}
    assert m["illegal_rate"] == 0.0
    for seat in (0, 1):
        total = m[f"win_seat{seat}"] + m[f"draw_seat{seat}"] + m[f"loss_seat{seat}"]
        assert total == pytest.approx(1.0, abs=1e-6)
        assert (m[f"win_seat{seat}"] * trainer.config.match_games) % 1 == 0  # whole games out of 8
    # illegal moves count against decisions: 3 of 12 (same shapes: no new compile)
    decisions, illegal = jnp.zeros(12, jnp.int32).at[:2].set(6), jnp.zeros(12, jnp.int32).at[3].set(3)
    m = turn_metrics(runner.params, jax.random.key(3), decisions, illegal)
    assert float(m["illegal_rate"]) == pytest.approx(0.25)


def test_trpo_refuses_masked_games_naming_ppo():
    with pytest.raises(ValueError, match=r"TRPO does not train turn-based games.*--algo ppo"):
        make_trainer(get_config("KuhnPoker-v0", algo="trpo"))


# ---- random-legal opponents in some envs (config random_opponents) -------------------------------------


def test_random_opponents_play_uniform_legal_moves_that_are_not_trained_on():
    """random_opponents = 0.5 of 64 envs: in env e < 32 seat e % 2 plays uniformly among its legal
    moves. The policy is made (nearly) deterministic on cell 0, so a row following it could not
    spread its moves; the opponent rows never act (no loss term) and never move illegally."""
    cfg = get_config("TicTacToe-v0", num_envs=64, num_steps=12, total_timesteps=64 * 12, hidden_sizes=(8,),
                     update_epochs=1, num_minibatches=2, match_games=0, random_opponents=0.5,
                     training_opponents="random")
    trainer = make_trainer(cfg)
    rows = trainer.opponent_rows
    expected = np.zeros((64, 2), bool)
    expected[np.arange(32), np.arange(32) % 2] = True
    np.testing.assert_array_equal(rows, expected.reshape(-1))
    hp = cfg.hparams()

    @jax.jit
    def rollout(key):
        runner = trainer._init(key, hp)
        head = runner.params["params"]["policy_head"]
        head = dict(head, kernel=jnp.zeros_like(head["kernel"]), bias=jnp.zeros_like(head["bias"]).at[0].set(30.0))
        params = {"params": dict(runner.params["params"], policy_head=head)}
        return trainer._rollout(runner.replace(params=params), hp)[1]

    traj, stats = rollout(jax.random.key(4))
    mask, acting, action = np.asarray(traj.mask), np.asarray(traj.acting), np.asarray(traj.action)
    turn = mask.any(-1)
    assert not acting[:, rows].any()
    np.testing.assert_array_equal(acting[:, ~rows], turn[:, ~rows])
    assert int(np.asarray(stats[4]).sum()) == 0  # no illegal move by anyone
    legal = np.take_along_axis(mask, action[..., None], -1)[..., 0]
    assert legal[turn].all()
    # the policy's rows play cell 0 whenever it is free; the opponents' moves are uniform over the legal
    # cells: the position of the move among the legal cells, (rank + 0.5) / k, has mean 1/2 and variance
    # < 1/12 per move, so its mean over n moves is within 4.5 / sqrt(12 n) of 1/2
    learner_free0 = turn & mask[..., 0] & ~rows
    assert learner_free0.sum() > 50 and (action[learner_free0] == 0).all()
    opp = turn & rows
    k = mask[opp].sum(-1)
    rank = np.array([np.flatnonzero(m).tolist().index(a) for m, a in zip(mask[opp], action[opp])])
    n = int(opp.sum())
    assert n > 150
    assert abs(((rank + 0.5) / k).mean() - 0.5) < 4.5 / np.sqrt(12 * n)
    assert (action[opp & mask[..., 0]] != 0).mean() > 0.5


def test_named_training_opponents_are_dealt_to_blocks_of_envs():
    """training_opponents "random,perfect" (train.league): envs 0-1 random-legal, 2-3 the perfect
    player, 4-5 random, ...: on a board with one winning cell the perfect rows always take it, the
    random rows spread over the legal cells; a name the game does not declare is an error."""
    from jaxenvs.train import league

    cfg = get_config("TicTacToe-v0", num_envs=8, num_steps=4, total_timesteps=32, hidden_sizes=(8,), update_epochs=1,
                     num_minibatches=1, match_games=0, random_opponents=1.0, training_opponents="random,perfect")
    trainer = make_trainer(cfg)
    planes = np.zeros((9, 2), np.int32)
    planes[[0, 1], 0] = 1  # the mover holds cells 0 and 1: cell 2 wins
    planes[[3, 4], 1] = 1
    one = {"observation": planes.reshape(3, 3, 2), "action_mask": (planes.sum(-1) == 0).astype(np.uint8)}
    obs = jax.tree.map(lambda x: np.broadcast_to(x, (8, 2) + x.shape), one)
    mask = jnp.asarray(obs["action_mask"].reshape(16, 9) != 0)
    act = jax.jit(lambda k: league.opponent_actions(trainer, k, obs, mask))
    moves = np.stack([np.asarray(act(k)) for k in jax.random.split(jax.random.key(0), 40)]).reshape(40, 8, 2)
    perfect_envs, random_envs = [2, 3, 6, 7], [0, 1, 4, 5]
    assert (moves[:, perfect_envs] == 2).all()
    assert set(np.unique(moves[:, random_envs])) == {2, 5, 6, 7, 8}  # every legal cell drawn
    with pytest.raises(ValueError, match=r"training_opponents 'heuristic': TicTacToe-v0 has the opponents 'random'"):
        make_trainer(get_config("TicTacToe-v0", random_opponents=0.5, training_opponents="random,heuristic"))


def test_random_opponents_need_a_turn_based_game():
    with pytest.raises(ValueError, match=r"random_opponents = 0.5 needs a turn-based game.*GridWorld-v0"):
        make_trainer(get_config("GridWorld-v0", random_opponents=0.5))
