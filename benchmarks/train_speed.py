"""PPO training speed: jaxenvs' jitted PPO against Stable-Baselines3's PPO, in the same run.

For each environment:

* ``jaxenvs PPO``: the tuned defaults (``train.configs``), one seed. The run is split into
  chunks of updates (one jitted call each); after each chunk the policy is evaluated with the
  env's solve criterion (``train.grading``), so the wall time to the threshold is measured
  (compile time reported apart, evaluation time excluded). Env-steps/s over the whole run.
* ``jaxenvs PPO, N seeds``: the same run vmapped over ``--seeds`` seeds in one program: the total
  env-steps/s against one seed's.
* ``jaxenvs TRPO``: ``train.trpo`` with its tuned defaults (``get_config(env, algo="trpo")``),
  one seed, measured as ``jaxenvs PPO`` is (``--no-trpo`` skips it).
* ``SB3 PPO, same settings`` (single-agent envs, when stable-baselines3 is installed): SB3's PPO
  with the same rollout shape and hyperparameters on the same env through
  `jaxenvs.adapters.sb3.SB3VecEnv`, evaluated with the same criterion every chunk, up to
  ``--sb3-timesteps``: what each trainer costs per env step for the same work.
* ``SB3 PPO, its defaults``: ``PPO("MlpPolicy", env)`` on one env, as SB3 users start (2048
  steps per update, 10 epochs of 64-sample minibatches): what a user would otherwise run.

* ``rejax PPO, same settings`` (when rejax is installed: ``pip install "jaxenvs[rejax]"``):
  rejax 0.1.3's PPO, unmodified, on ``jaxenvs.adapters.gymnax.to_gymnax(make(env_id))`` with
  the same rollout shape, epochs, minibatches, learning rate, gamma, lambda, clip, entropy and
  value coefficients and network (64x64 tanh, separate actor and critic), trained in the same
  chunks and evaluated with the same ``train.grading`` criterion (greedy policy). rejax cannot
  anneal its learning rate and clips gradients elementwise (``optax.clip``) rather than by
  global norm: those two differ. Its compile time is that of one chunk, as for jaxenvs.

* ``arithmetic``: XLA's FLOP count of one update per env step (the rollout's forward passes and
  the gradient steps, which both trainers compute alike) and this machine's float32 matmul peak,
  measured in the same run: how close jaxenvs' env-steps/s is to what the arithmetic allows, and
  what a given ratio over SB3 at the same settings would demand.

Torch runs with its own default thread count unless ``--torch-threads`` sets one.

**Games** (``--games``): two-player turn-based games (``TicTacToe-v0``, ``ConnectFour-v0``; ``--envs``
picks others), paired in the same process:

* ``jaxenvs PPO``: the env's config (``train.configs``: its tuned entry when it has one), one
  seed, one shared policy in both seats (self-play) or, with the config's ``random_opponents = f``,
  against random-legal play in a fraction ``f`` of the envs (Connect Four's entry: ``f = 1``),
  trained in chunks; after each chunk its greedy policy plays ``--eval-games`` games in each seat
  against random-legal play (`train.policy.versus`, one compiled program). Its env steps are plies:
  in self-play every ply is a decision of the trained policy; with random opponents in a fraction
  ``f`` of the envs the policy makes about ``1 - f / 2`` of them (one seat of two there), and
  ``decisions_per_sec`` counts that share only (``plies_per_sec`` all of them).
* ``MaskablePPO (vs random)``: sb3-contrib's MaskablePPO on the single-agent view of the same game
  against a random-legal opponent in a random seat per episode
  (``jaxenvs.wrappers.PlayAgainst`` through `jaxenvs.adapters.sb3.SB3VecEnv`, whose
  ``action_masks()`` it reads), with the same settings where they exist: ``num_envs`` copies,
  ``n_steps = num_steps``, minibatch ``num_envs * num_steps / num_minibatches``, epochs, learning
  rate (SB3's stays constant; jaxenvs anneals it when ``anneal_lr``), gamma, GAE lambda, clip,
  entropy and value coefficients, gradient clip and the network (``hidden_sizes`` for both actor and
  critic, the same activation). Evaluated the same way after each chunk (deterministic policy,
  ``--eval-games`` games per seat). Its env steps are its own decisions (the opponent's replies
  happen inside them): decisions/s is the rate compared. On a machine shared with other work,
  give ``--torch-threads 1``: torch's default intra-op threads spin against the other processes
  (MaskablePPO ran at 24 decisions/s with them and at 349 with one thread at a load average of 12 on 2 cores).

"Solved" for this benchmark: the game's tuned evaluation (``train.tuned``) when it has one, else
the greedy policy's win rate against random-legal play reaches `GAME_BARS` in each seat
(Tic-Tac-Toe 0.92 as first mover and 0.74 as second, issue 27's bar; Connect Four 0.95 in both);
MaskablePPO is judged by the win-rate bar only. Time to solved counts training only (compile and
evaluations apart).

    python benchmarks/train_speed.py                         # GridWorld-v0
    python benchmarks/train_speed.py --envs GridWorld-v0 PointEnv-v0 --seeds 8
    python benchmarks/train_speed.py --num-envs 1024 --seeds 2      # both trainers at 1024 envs
    python benchmarks/train_speed.py --envs gymnax/CartPole-v1 GridWorld-v0 --no-sb3   # vs rejax
    python benchmarks/train_speed.py --games                 # TicTacToe-v0, ConnectFour-v0 vs MaskablePPO
    python benchmarks/train_speed.py --games --quick         # a smoke run with tiny budgets
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jaxenvs.train  # noqa: E402,F401  (sets XLA flags before JAX compiles anything)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxenvs  # noqa: E402
from jaxenvs.rollout import time_calls  # noqa: E402
from jaxenvs.train.configs import get_config  # noqa: E402
from jaxenvs.train.grading import evaluate_params  # noqa: E402
from jaxenvs.train.trainers import make_trainer  # noqa: E402


def chunk_length(num_updates: int, num_chunks: int) -> int:
    """Updates per chunk when all chunks must have one length (one compiled program timed): the
    largest divisor of ``num_updates`` that is at most ``ceil(num_updates / num_chunks)``
    (``jaxenvs-train`` itself splits with `jaxenvs.train.app.chunks.chunk_plan`)."""
    cap = max(1, math.ceil(num_updates / num_chunks))
    return max(d for d in range(1, cap + 1) if num_updates % d == 0)


def _config(env_id: str, num_envs: int | None, **kw):
    """The tuned config, with ``num_envs`` overridden when given (the same for SB3)."""
    return get_config(env_id, **kw) if num_envs is None else get_config(env_id, num_envs=num_envs, **kw)


def jaxenvs_time_to_solve(env_id: str, num_chunks: int, seed: int = 0, num_envs: int | None = None, algo: str = "ppo") -> dict:
    """Train one seed of ``algo`` ("ppo" or "trpo") in ``num_chunks`` jitted calls, evaluating after each."""
    cfg = _config(env_id, num_envs, algo=algo)  # the seed is the key of trainer.init below
    trainer = make_trainer(cfg)
    per_chunk = chunk_length(cfg.num_updates, num_chunks)  # as python -m jaxenvs.train: equal chunks, num_updates in all
    t0 = time.perf_counter()
    runner = jax.block_until_ready(trainer.init(jax.random.key(seed)))
    jax.block_until_ready(trainer.run_updates(runner, num_updates=per_chunk))  # compiles (and runs once)
    compile_s = time.perf_counter() - t0
    runner = trainer.init(jax.random.key(seed))  # start again: the timed run excludes compilation
    train_s, steps, solved_at, metrics = 0.0, 0, None, None
    for _ in range(cfg.num_updates // per_chunk):
        t0 = time.perf_counter()
        runner, _ = jax.block_until_ready(trainer.run_updates(runner, num_updates=per_chunk))
        train_s += time.perf_counter() - t0
        steps += per_chunk * cfg.steps_per_update
        metrics = evaluate_params(trainer, runner.params)
        if metrics.get("solved") and solved_at is None:
            solved_at = (train_s, steps)
            break
    return {
        "compile_s": compile_s,
        "train_s": train_s,
        "env_steps": steps,
        "steps_per_sec": steps / train_s,
        "solved": solved_at is not None,
        "time_to_solve_s": solved_at[0] if solved_at else None,
        "steps_to_solve": solved_at[1] if solved_at else None,
        "final_metrics": {k: v for k, v in metrics.items() if isinstance(v, (int, float, bool))},
    }


def _flops(f, *args) -> float:
    """XLA's FLOP count of the loop-free function ``f`` at ``args``."""
    cost = jax.jit(f).lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float(cost["flops"])


def ppo_flops_per_env_step(trainer) -> dict:
    """FLOPs per env step of one PPO update, counted by XLA on loop-free pieces (its cost analysis
    counts a loop's body once, not once per trip): ``num_steps`` forward passes over the env
    batch, then ``update_epochs * num_minibatches`` gradient steps (loss, gradient, clipping, Adam).
    The env's own step and GAE are left out: they are the same work in every trainer and small."""
    cfg = trainer.config
    runner = trainer.init(jax.random.key(0))
    rows, n = trainer.batch_size, cfg.num_steps * trainer.batch_size
    mb_rows = n // cfg.num_minibatches
    obs_dim = trainer.flat_obs(runner.obs).shape[-1]
    forward = _flops(lambda p, x: trainer.network.apply(p, x), runner.params, jnp.zeros((rows, obs_dim)))
    hp = cfg.hparams()
    traj, _ = jax.eval_shape(lambda r: trainer._rollout(r, hp)[1], runner)  # Transition [T, B, ...]
    mb = jax.tree.map(lambda x: jnp.zeros((mb_rows,) + x.shape[2:], x.dtype), traj)
    zeros = jnp.zeros((mb_rows,))
    tx = trainer.make_optimizer(hp)
    grad_step = lambda p, o, b: trainer._grad_step(tx, p, o, b, hp)  # noqa: E731  (what _update runs)
    grad = _flops(grad_step, runner.params, runner.opt_state, (mb, zeros, zeros))
    per_update = cfg.num_steps * forward + cfg.update_epochs * cfg.num_minibatches * grad
    return {"forward_flops": forward, "grad_step_flops": grad, "flops_per_env_step": per_update / cfg.steps_per_update}


def matmul_gflops(rows: int, width: int, iters: int, repeats: int = 5) -> float:
    """Best float32 GFLOP/s of ``iters`` chained ``[rows, width] @ [width, width]`` products in one
    jitted loop on the default device (an orthogonal matrix keeps the values' scale): the rate the
    device reaches at a network layer's shape, or (large sizes) its peak."""
    w, _ = jnp.linalg.qr(jax.random.normal(jax.random.key(0), (width, width), jnp.float32))
    x = jax.random.normal(jax.random.key(1), (rows, width), jnp.float32)
    _, times = time_calls(lambda x, w: jax.lax.fori_loop(0, iters, lambda _, x: x @ w, x), [(x, w)] * (repeats + 1))
    return 2 * rows * width * width * iters / min(times) / 1e9


def jaxenvs_seeds_speed(env_id: str, num_seeds: int, num_envs: int | None = None) -> dict:
    """Env-steps/s of the full default run for 1 seed and for ``num_seeds`` vmapped seeds."""
    cfg = _config(env_id, num_envs)
    trainer = make_trainer(cfg)
    out = {}
    for n in (1, num_seeds):
        f = jax.jit(jax.vmap(trainer._train))
        keys = jax.random.split(jax.random.key(0), n)
        t0 = time.perf_counter()
        jax.block_until_ready(f(keys))
        compile_and_run = time.perf_counter() - t0
        t0 = time.perf_counter()
        jax.block_until_ready(f(jax.random.split(jax.random.key(1), n)))
        run_s = time.perf_counter() - t0
        out[n] = {"steps_per_sec": n * cfg.num_updates * cfg.num_envs * cfg.num_steps / run_s,
                  "run_s": run_s, "compile_s": compile_and_run - run_s}
    return out


def sb3_time_to_solve(
    env_id: str, budget: int, num_chunks: int, seed: int = 0, num_envs: int | None = None, sb3_defaults: bool = False,
    threads: int | None = None,
) -> dict | None:
    """SB3 PPO on the env through the SB3 adapter: the same rollout shape and hyperparameters as
    jaxenvs' config, or (``sb3_defaults``) ``PPO("MlpPolicy", env)`` as SB3 users start, on one
    env with SB3's own defaults (2048 steps per update, 10 epochs of 64-sample minibatches).
    ``threads``: torch's intra-op threads (None: torch's default)."""
    try:
        import gymnasium
        import torch
        from stable_baselines3 import PPO

        from jaxenvs.adapters.sb3 import SB3VecEnv
    except ImportError:
        return None
    if threads is not None:
        torch.set_num_threads(threads)
    cfg = _config(env_id, num_envs)
    venv = SB3VecEnv(env_id, num_envs=1 if sb3_defaults else cfg.num_envs, seed=seed)
    policy_kind = "MultiInputPolicy" if isinstance(venv.observation_space, gymnasium.spaces.Dict) else "MlpPolicy"
    if sb3_defaults:
        model = PPO(policy_kind, venv, seed=seed, device="cpu", verbose=0)
    else:
        model = PPO(policy_kind, venv, n_steps=cfg.num_steps, batch_size=cfg.num_envs * cfg.num_steps // cfg.num_minibatches,
                    n_epochs=cfg.update_epochs, learning_rate=cfg.lr, gamma=cfg.gamma, gae_lambda=cfg.gae_lambda,
                    ent_coef=cfg.ent_coef, seed=seed, device="cpu", verbose=0)
    chunk = max(model.n_steps * venv.num_envs, budget // num_chunks)
    train_s, steps, solved_at, metrics = 0.0, 0, None, {}
    while steps < budget:
        t0 = time.perf_counter()
        model.learn(chunk, reset_num_timesteps=False)
        train_s += time.perf_counter() - t0
        steps = model.num_timesteps
        metrics = sb3_evaluate(model, env_id)
        if metrics["solved"]:
            solved_at = (train_s, steps)
            break
    return {"train_s": train_s, "env_steps": steps, "steps_per_sec": steps / train_s, "solved": solved_at is not None,
            "time_to_solve_s": solved_at[0] if solved_at else None, "steps_to_solve": solved_at[1] if solved_at else None,
            "final_metrics": metrics}


class _RejaxGreedy:
    """What ``train.grading.evaluate_params`` reads of a trainer (``config.env_id``/``env_kwargs``,
    ``env``/``env_params`` and ``act``), for rejax's actor: the mode of its action distribution on the observation as
    ``to_gymnax`` presents it."""

    def __init__(self, cfg, algo, genv):
        self.config, self.algo, self.genv = cfg, algo, genv
        self.env = jaxenvs.make(cfg.env_id, autoreset=False, **cfg.env_kwargs)
        self.env_params = self.env.default_params

    def act(self, actor_params, obs):
        flat = jax.vmap(self.genv._obs)(obs)
        return self.algo.actor.apply(actor_params, flat, method="_action_dist").mode()


def rejax_time_to_solve(env_id: str, num_chunks: int, seed: int = 0, num_envs: int | None = None) -> dict | None:
    """rejax's PPO at jaxenvs' tuned settings on ``to_gymnax(make(env_id))``, in the same chunks
    as `jaxenvs_time_to_solve`, evaluated with ``train.grading`` after each."""
    try:
        import rejax  # noqa: F401
    except ImportError:
        return None
    from rejax_peer import rejax_ppo

    cfg = _config(env_id, num_envs)
    per_chunk = chunk_length(cfg.num_updates, num_chunks)
    chunk_steps = per_chunk * cfg.steps_per_update
    algo = rejax_ppo(cfg, chunk_steps)  # evaluated below, as jaxenvs is
    train = jax.jit(lambda ts: algo.train(train_state=ts)[0])
    # rejax's init_state builds a new state class per call (a new pytree type: a new compilation),
    # and its initial state has weakly typed leaves that its updated state has not: the timed run
    # starts from the same initial state object the two compiling calls saw
    ts = algo.init_state(jax.random.key(seed))
    t0 = time.perf_counter()
    jax.block_until_ready(train(train(ts)))  # compiles (and runs twice)
    compile_s = time.perf_counter() - t0
    greedy = _RejaxGreedy(cfg, algo, algo.env)
    train_s, steps, solved_at, metrics = 0.0, 0, None, {}
    for _ in range(cfg.num_updates // per_chunk):
        t0 = time.perf_counter()
        ts = jax.block_until_ready(train(ts))
        train_s += time.perf_counter() - t0
        steps += chunk_steps
        metrics = evaluate_params(greedy, ts.actor_ts.params)
        if metrics.get("solved"):
            solved_at = (train_s, steps)
            break
    return {
        "compile_s": compile_s, "train_s": train_s, "env_steps": steps, "steps_per_sec": steps / train_s,
        "solved": solved_at is not None, "time_to_solve_s": solved_at[0] if solved_at else None,
        "steps_to_solve": solved_at[1] if solved_at else None,
        "final_metrics": {k: v for k, v in metrics.items() if isinstance(v, (int, float, bool))},
    }


def sb3_evaluate(model, env_id: str, num_episodes: int = 200) -> dict:
    """Success rate of SB3's deterministic policy over ``num_episodes`` first episodes; solved as
    ``train.grading`` defines it for GridWorld and PointEnv (success rate 1.0 and >= 0.95)."""
    from jaxenvs.adapters.sb3 import SB3VecEnv

    venv = SB3VecEnv(env_id, num_envs=num_episodes, seed=12345)
    obs = venv.reset()
    done_once = np.zeros(num_episodes, bool)
    success = np.zeros(num_episodes, bool)
    while not done_once.all():
        action, _ = model.predict(obs, deterministic=True)
        obs, _, dones, infos = venv.step(action)
        for i in np.flatnonzero(dones & ~done_once):
            success[i] = not infos[i].get("TimeLimit.truncated", False)
        done_once |= dones
    rate = float(success.mean())
    need = 1.0 if env_id.startswith("GridWorld") else 0.95
    return {"success_rate": rate, "solved": rate >= need}


# ---- two-player games: jaxenvs self-play PPO against MaskablePPO on the single-agent view -----------

GAMES = ("TicTacToe-v0", "ConnectFour-v0")
GAME_BARS = {"TicTacToe-v0": (0.92, 0.74), "ConnectFour-v0": (0.95, 0.95)}
"""Win rate against random-legal play needed in (seat 0, seat 1) for "solved" here, when the game
has no tuned evaluation; other games: 0.9 in both seats."""
QUICK = dict(num_envs=8, num_steps=8, update_epochs=1, num_minibatches=1)  # --quick: shapes and budgets


def game_bar(env_id: str) -> tuple[float, float]:
    from jaxenvs.train.tuned import entry_id

    return GAME_BARS.get(entry_id(env_id), (0.9, 0.9))


def meets_bar(env_id: str, wins: tuple[float, float]) -> bool:
    """Whether win rates against random-legal play (seat 0, seat 1) reach the game's `game_bar`."""
    return all(w >= b for w, b in zip(wins, game_bar(env_id)))


def _has_tuned_evaluation(env_id: str) -> bool:
    from jaxenvs.train import tuned

    return tuned.entry(env_id).evaluate != "generic"


def jaxenvs_game_run(env_id: str, num_chunks: int, eval_games: int, seed: int = 0, **overrides) -> dict:
    """One seed of jaxenvs PPO in self-play on a two-player game, evaluated against random-legal
    play after every chunk; stops at the first chunk that is solved."""
    from jaxenvs.games import random_legal
    from jaxenvs.train.policy import versus

    cfg = get_config(env_id, **overrides)
    trainer = make_trainer(cfg)
    per_chunk = chunk_length(cfg.num_updates, num_chunks)
    t0 = time.perf_counter()
    runner = jax.block_until_ready(trainer.init(jax.random.key(seed)))
    jax.block_until_ready(trainer.run_updates(runner, num_updates=per_chunk))  # compiles (and runs once)
    compile_s = time.perf_counter() - t0
    tuned_eval = _has_tuned_evaluation(env_id)
    runner = trainer.init(jax.random.key(seed))
    train_s, steps, solved_at, curve = 0.0, 0, None, []
    for _ in range(cfg.num_updates // per_chunk):
        t0 = time.perf_counter()
        runner, _ = jax.block_until_ready(trainer.run_updates(runner, num_updates=per_chunk))
        train_s += time.perf_counter() - t0
        steps += per_chunk * cfg.steps_per_update
        res = versus(trainer, runner.params, random_legal, jax.random.key(12345), eval_games)
        wins = (res["seat0"]["win"], res["seat1"]["win"])
        solved = bool(evaluate_params(trainer, runner.params)["solved"]) if tuned_eval else meets_bar(env_id, wins)
        curve.append({"train_s": train_s, "env_steps": steps, "win_seat0": wins[0], "win_seat1": wins[1],
                      "loss_seat0": res["seat0"]["loss"], "loss_seat1": res["seat1"]["loss"], "solved": solved})
        if solved:
            solved_at = (train_s, steps)
            break
    share = 1.0 - cfg.random_opponents / 2  # the policy's share of the plies (one seat of two in random-opponent envs)
    return {
        "config": cfg.to_dict(), "compile_s": compile_s, "train_s": train_s, "env_steps": steps,
        "plies_per_sec": steps / train_s, "policy_share_of_plies": share,
        "decisions_per_sec": share * steps / train_s, "solved_by": "tuned evaluation" if tuned_eval else "win-rate bar",
        "solved": solved_at is not None, "time_to_solve_s": solved_at[0] if solved_at else None,
        "steps_to_solve": solved_at[1] if solved_at else None, "curve": curve,
    }


_SB3_EVAL_ENVS: dict = {}


def sb3_game_eval(model, env_id: str, num_games: int) -> dict:
    """Win / draw / loss of MaskablePPO's deterministic policy against random-legal play,
    ``num_games`` first episodes in each seat (the same evaluation envs every call)."""
    from jaxenvs.adapters.sb3 import SB3VecEnv
    from jaxenvs.wrappers import PlayAgainst

    out = {}
    for seat in (0, 1):
        key = (env_id, seat, num_games)
        if key not in _SB3_EVAL_ENVS:
            _SB3_EVAL_ENVS[key] = SB3VecEnv(PlayAgainst(jaxenvs.make(env_id, autoreset=False), seat=seat),
                                            num_envs=num_games, seed=12345 + seat)
        venv = _SB3_EVAL_ENVS[key]
        venv.seed(12345 + seat)
        obs = venv.reset()
        done_once, returns = np.zeros(num_games, bool), np.zeros(num_games)
        while not done_once.all():
            action, _ = model.predict(obs, deterministic=True, action_masks=venv.action_masks())
            obs, reward, dones, _ = venv.step(action)
            returns += np.where(done_once, 0.0, reward)
            done_once |= dones
        out[f"seat{seat}"] = {"win": float(np.mean(returns > 0)), "draw": float(np.mean(returns == 0)),
                              "loss": float(np.mean(returns < 0))}
    return out


def sb3_game_run(env_id: str, cfg, budget: int, num_chunks: int, eval_games: int, seed: int = 0,
                 threads: int | None = None) -> dict | None:
    """sb3-contrib's MaskablePPO at ``cfg``'s settings on ``PlayAgainst(game, seat="random")``,
    ``budget`` of its own decisions in ``num_chunks`` chunks, evaluated after each (None without
    sb3-contrib)."""
    try:
        import torch
        from sb3_contrib import MaskablePPO

        from jaxenvs.adapters.sb3 import SB3VecEnv
        from jaxenvs.wrappers import PlayAgainst
    except ImportError:
        return None
    if threads is not None:
        torch.set_num_threads(threads)
    venv = SB3VecEnv(PlayAgainst(jaxenvs.make(env_id, autoreset=False), seat="random"), num_envs=cfg.num_envs, seed=seed)
    # compile the adapter's jitted reset and step before the clock starts (learn() resets again)
    venv.reset()
    venv.step(np.array([np.flatnonzero(m)[0] for m in venv.action_masks()]))
    activation = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}[cfg.activation]
    hidden = list(cfg.hidden_sizes)
    model = MaskablePPO(
        "MultiInputPolicy", venv, n_steps=cfg.num_steps, batch_size=cfg.num_envs * cfg.num_steps // cfg.num_minibatches,
        n_epochs=cfg.update_epochs, learning_rate=cfg.lr, gamma=cfg.gamma, gae_lambda=cfg.gae_lambda,
        clip_range=cfg.clip_eps, ent_coef=cfg.ent_coef, vf_coef=cfg.vf_coef, max_grad_norm=cfg.max_grad_norm,
        policy_kwargs={"net_arch": {"pi": hidden, "vf": hidden}, "activation_fn": activation},
        seed=seed, device="cpu", verbose=0,
    )
    chunk = max(model.n_steps * venv.num_envs, budget // num_chunks)
    train_s, steps, solved_at, curve = 0.0, 0, None, []
    while steps < budget:
        t0 = time.perf_counter()
        model.learn(chunk, reset_num_timesteps=False)
        train_s += time.perf_counter() - t0
        steps = model.num_timesteps
        res = sb3_game_eval(model, env_id, eval_games)
        wins = (res["seat0"]["win"], res["seat1"]["win"])
        solved = meets_bar(env_id, wins)
        curve.append({"train_s": train_s, "env_steps": steps, "win_seat0": wins[0], "win_seat1": wins[1],
                      "loss_seat0": res["seat0"]["loss"], "loss_seat1": res["seat1"]["loss"], "solved": solved})
        if solved:
            solved_at = (train_s, steps)
            break
    return {"train_s": train_s, "env_steps": steps, "decisions_per_sec": steps / train_s, "solved_by": "win-rate bar",
            "solved": solved_at is not None, "time_to_solve_s": solved_at[0] if solved_at else None,
            "steps_to_solve": solved_at[1] if solved_at else None, "curve": curve}


def print_game(env_id: str, r: dict) -> None:
    bar = game_bar(env_id)
    t = lambda x: "not solved" if x is None else f"{x:.2f} s"  # noqa: E731
    print(f"\n{env_id} (solved: win rate vs random-legal >= {bar[0]:g} as first mover and >= {bar[1]:g} as second"
          f"{', or the tuned evaluation for jaxenvs' if r['jaxenvs']['solved_by'] == 'tuned evaluation' else ''})")
    f = r["jaxenvs"].get("config", {}).get("random_opponents", 0.0)
    mine = "jaxenvs PPO (self-play)" if not f else f"jaxenvs PPO ({f:.0%} vs rnd)"
    for label, x in ((mine, r["jaxenvs"]), ("MaskablePPO (vs random)", r.get("sb3"))):
        if not x:
            continue
        last = x["curve"][-1] if x["curve"] else {}
        compile_note = f"; compile {x['compile_s']:.1f} s apart" if "compile_s" in x else ""
        print(f"  {label:<24}: {x['decisions_per_sec']:>10,.0f} decisions/s   time to solved {t(x['time_to_solve_s'])}"
              f" ({x['steps_to_solve'] or '-'} of {x['env_steps']} steps{compile_note}); last win rate "
              f"{last.get('win_seat0', float('nan')):.3f} / {last.get('win_seat1', float('nan')):.3f} (seat 0 / seat 1)")
    if r.get("sb3"):
        j, s = r["jaxenvs"], r["sb3"]
        line = f"    jaxenvs vs MaskablePPO: {j['decisions_per_sec'] / s['decisions_per_sec']:.1f}x decisions/s"
        if j["time_to_solve_s"] and s["time_to_solve_s"]:
            line += f", {s['time_to_solve_s'] / j['time_to_solve_s']:.1f}x sooner solved"
        print(line)


def games_main(args) -> dict:
    envs = args.envs if args.envs != ["GridWorld-v0"] else list(GAMES)
    overrides = dict(QUICK, total_timesteps=2 * QUICK["num_envs"] * QUICK["num_steps"]) if args.quick else {}
    if args.num_envs is not None:
        overrides["num_envs"] = args.num_envs
    if args.game_timesteps is not None:
        overrides["total_timesteps"] = args.game_timesteps
    chunks = 2 if args.quick else args.chunks
    eval_games = 50 if args.quick else args.eval_games
    results = {}
    for env_id in envs:
        r = {"jaxenvs": jaxenvs_game_run(env_id, chunks, eval_games, **overrides)}
        if not args.no_sb3:
            cfg = get_config(env_id, **overrides)
            budget = args.sb3_timesteps if args.sb3_timesteps is not None else cfg.total_timesteps
            if args.quick:
                budget = 2 * cfg.num_envs * cfg.num_steps
            r["sb3"] = sb3_game_run(env_id, cfg, budget, chunks, eval_games, threads=args.torch_threads)
        results[env_id] = r
        print_game(env_id, r)
    return results


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", nargs="+", default=["GridWorld-v0"])
    p.add_argument("--seeds", type=int, default=8, help="seeds vmapped in one program for the seeds comparison")
    p.add_argument("--chunks", type=int, default=20, help="evaluations along a run, at least (time-to-solve resolution): the updates split into equal "
                   "chunks as python -m jaxenvs.train --chunks splits them")
    p.add_argument("--sb3-timesteps", type=int, default=None, help="SB3's budget per env (default: 200000; "
                   "--games: the jaxenvs config's total_timesteps, in MaskablePPO's own decisions)")
    p.add_argument("--no-sb3", action="store_true")
    p.add_argument("--no-trpo", action="store_true", help="skip jaxenvs TRPO (its tuned defaults, one seed)")
    p.add_argument("--no-rejax", action="store_true", help="skip rejax's PPO (run when rejax is installed)")
    p.add_argument("--torch-threads", type=int, help="torch intra-op threads for SB3 (default: torch's)")
    p.add_argument("--num-envs", type=int, help="override the tuned num_envs, for both trainers (throughput at a batch size)")
    p.add_argument("--out", default=None, help="default: benchmarks/results/train_speed.json "
                   "(--games: benchmarks/results/train_speed_games.json)")
    g = p.add_argument_group("games (--games)")
    g.add_argument("--games", action="store_true", help="two-player games: jaxenvs self-play PPO vs MaskablePPO "
                   f"against a random opponent (default --envs: {' '.join(GAMES)})")
    g.add_argument("--quick", action="store_true", help="with --games: tiny shapes and budgets (a smoke run)")
    g.add_argument("--eval-games", type=int, default=500, help="games per seat in each evaluation (default: 500)")
    g.add_argument("--game-timesteps", type=int, help="jaxenvs' budget (env steps = plies; default: the config's)")
    args = p.parse_args(argv)
    for env_id in args.envs:
        jaxenvs.spec(env_id)
    dev = jax.devices()[0]
    print(f"device: {dev.platform} ({getattr(dev, 'device_kind', '')}), jax {jax.__version__}")
    if args.games:
        out = args.out or "benchmarks/results/train_speed_games.json"
        t0, load_start = time.perf_counter(), os.getloadavg()
        results = games_main(args)
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        with open(out, "w") as f:
            json.dump({"device": f"{dev.platform}", "jax": jax.__version__, "load_avg_start": load_start, "load_avg_end": os.getloadavg(),
                       "quick": args.quick, "torch_threads": args.torch_threads, "wall_s": time.perf_counter() - t0,
                       "results": results}, f, indent=1, default=str)
        print(f"wrote {out}")
        return results
    args.out = args.out or "benchmarks/results/train_speed.json"
    results = {}
    for env_id in args.envs:
        r = {"jaxenvs": jaxenvs_time_to_solve(env_id, args.chunks, num_envs=args.num_envs)}
        if not args.no_trpo:
            r["trpo"] = jaxenvs_time_to_solve(env_id, args.chunks, num_envs=args.num_envs, algo="trpo")
        r["seeds"] = jaxenvs_seeds_speed(env_id, args.seeds, num_envs=args.num_envs)
        cfg = _config(env_id, args.num_envs)
        r["arithmetic"] = ppo_flops_per_env_step(make_trainer(cfg))
        mb_rows, width = cfg.steps_per_update // cfg.num_minibatches, max(cfg.hidden_sizes)
        r["arithmetic"].update(
            matmul_peak_gflops=matmul_gflops(2048, 2048, iters=4),
            layer_shape=[mb_rows, width, width],
            layer_matmul_gflops=matmul_gflops(mb_rows, width, iters=max(4, 2**31 // (2 * mb_rows * width * width))),
        )
        single_agent = not jaxenvs.make(env_id).multi_agent
        if single_agent and not args.no_sb3:
            r["sb3"] = sb3_time_to_solve(
                env_id, args.sb3_timesteps or 200_000, args.chunks, num_envs=args.num_envs, threads=args.torch_threads
            )
            if args.num_envs is None:  # what an SB3 user runs first: PPO("MlpPolicy", env)
                r["sb3_defaults"] = sb3_time_to_solve(
                    env_id, args.sb3_timesteps or 200_000, args.chunks, sb3_defaults=True, threads=args.torch_threads
                )
        if single_agent and not args.no_rejax:
            r["rejax"] = rejax_time_to_solve(env_id, args.chunks, num_envs=args.num_envs)
        results[env_id] = r
        print_env(env_id, r, args.seeds)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"device": f"{dev.platform}", "jax": jax.__version__, "results": results}, f, indent=1, default=str)
    print(f"wrote {args.out}")
    return results


def _versus(j: dict, other: dict, fmt: str) -> str:
    """jaxenvs' env-steps/s over ``other``'s, and how many times sooner it solved (when both did)."""
    ratio = f"{j['steps_per_sec'] / other['steps_per_sec']:{fmt}}x env-steps/s"
    if j["time_to_solve_s"] and other["time_to_solve_s"]:
        ratio += f", {other['time_to_solve_s'] / j['time_to_solve_s']:{fmt}}x sooner solved"
    return ratio


def print_env(env_id, r, num_seeds):
    j, s = r["jaxenvs"], r.get("sb3")
    t = lambda x: "not solved" if x is None else f"{x:.2f} s"  # noqa: E731
    print(f"\n{env_id}")
    print(f"  jaxenvs PPO : {j['steps_per_sec']:>12,.0f} env-steps/s   time to solve {t(j['time_to_solve_s'])}"
          f" ({j['steps_to_solve']} steps; compile {j['compile_s']:.1f} s apart)")
    if r.get("trpo"):
        tr = r["trpo"]
        print(f"  jaxenvs TRPO: {tr['steps_per_sec']:>12,.0f} env-steps/s   time to solve {t(tr['time_to_solve_s'])}"
              f" ({tr['steps_to_solve']} steps; compile {tr['compile_s']:.1f} s apart)")
    one, many = r["seeds"][1], r["seeds"][num_seeds]
    print(f"  {num_seeds} seeds vmapped: {many['steps_per_sec']:>12,.0f} env-steps/s  vs 1 seed "
          f"{one['steps_per_sec']:,.0f}  ({many['steps_per_sec'] / one['steps_per_sec']:.2f}x)")
    for label, s in (("SB3 PPO, same settings", s), ("SB3 PPO, its defaults", r.get("sb3_defaults"))):
        if not s:
            continue
        print(f"  {label:<23}: {s['steps_per_sec']:>10,.0f} env-steps/s   time to solve {t(s['time_to_solve_s'])}"
              f" ({s['steps_to_solve']} steps)")
        print(f"    jaxenvs vs {label}: {_versus(j, s, '.0f')}")
    x = r.get("rejax")
    if x:
        print(f"  rejax PPO, same settings: {x['steps_per_sec']:>10,.0f} env-steps/s   time to solve "
              f"{t(x['time_to_solve_s'])} ({x['steps_to_solve']} steps; compile {x['compile_s']:.1f} s apart)")
        print(f"    jaxenvs vs rejax: {_versus(j, x, '.2f')}; compile time jaxenvs/rejax {j['compile_s'] / x['compile_s']:.2f}x")
    a = r.get("arithmetic")
    if a:
        flops, peak, layer = a["flops_per_env_step"], a["matmul_peak_gflops"], a["layer_matmul_gflops"]
        shape = "[{}, {}] @ [{}, {}]".format(*a["layer_shape"], a["layer_shape"][-1])
        used = j["steps_per_sec"] * flops / 1e9
        print(f"  arithmetic : {flops / 1e3:,.0f} kFLOP per env step (XLA's count); jaxenvs PPO computes "
              f"{used:.1f} GFLOP/s. This device: {peak:.0f} GFLOP/s float32 matmul peak (2048^3), "
              f"{layer:.0f} GFLOP/s on the network's {shape} products alone")
        same = r.get("sb3")
        if same:
            need = 100 * same["steps_per_sec"] * flops / 1e9
            print(f"    100x SB3 at the same settings would need {need:.0f} GFLOP/s: "
                  f"{need / layer:.1f}x the rate of those products alone, {need / peak:.0%} of the peak")


if __name__ == "__main__":
    main()
