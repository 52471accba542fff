"""The evaluations the entries of `train.tuned` name (``evaluate="grid_world"`` ->
`EVALUATIONS["grid_world"]`): each ``(trainer, params, key, num_episodes) -> {metric: value,
"solved": bool or None}`` for ONE set of params (no seed axis). Turn-based games play the greedy
policy in each seat against the opponents their game declares (`jaxenvs.games`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jaxenvs
from jaxenvs.envs.hurdle_race import HURDLE, JUMP, NOHURDLE, RUN
from jaxenvs.envs.lottery import ACTION_NAMES as LOTTERY_ACTIONS
from jaxenvs.games.opponents import random_legal
from jaxenvs.games.tic_tac_toe import perfect as perfect_player
from jaxenvs.games import connect_four as c4
from jaxenvs.games.kuhn_poker import exploitability as kuhn_exploitability, policy_table
from . import tuned
from .curricula import HELDOUT_EPISODES_PER_LEVEL, heldout_metrics
from .episodes import NUM_EPISODES, episodes, eval_env, initial_probs, payoff_matrix
from .policy import run_lookahead, run_search, versus

__all__ = ["EVALUATIONS", "evaluate_generic", "versus_opponent", "kuhn_policy_table"]

def evaluate_generic(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    _, ep = episodes(trainer, params, key, num_episodes=num_episodes)
    mean_return = float(np.mean(ep["returns"]))
    threshold = jaxenvs.spec(trainer.config.env_id).reward_threshold
    solved = None if threshold is None else bool(mean_return >= threshold)
    return dict(mean_return=mean_return, mean_length=float(ep["length"].mean()), solved=solved)


# ---- GridWorld: 1000 episodes; every one reaches the target, and the mean length is at most 1.1 x
# the mean Manhattan distance of the initial states (the optimal mean length).
def evaluate_grid_world(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    traj, ep = episodes(trainer, params, key, num_episodes=num_episodes)
    start = jax.tree.map(lambda x: np.asarray(x[0]), traj.obs)
    manhattan = np.abs(start["agent"] - start["target"]).sum(axis=-1)
    success = ep["terminated"].mean()
    ratio = ep["length"].mean() / manhattan.mean()
    return dict(
        success_rate=float(success),
        mean_length=float(ep["length"].mean()),
        mean_manhattan_distance=float(manhattan.mean()),
        length_ratio=float(ratio),
        solved=bool(success == 1.0 and ratio <= 1.1),
    )


# ---- PointEnv: 1000 episodes; at least 95% reach the goal region within the time limit.
def evaluate_point_env(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    traj, ep = episodes(trainer, params, key, num_episodes=num_episodes)
    success = float(ep["terminated"].mean())
    distance = np.asarray(traj.info["distance"])  # after each step
    final = distance[ep["length"] - 1, np.arange(distance.shape[1])]
    return dict(
        success_rate=success,
        mean_final_distance=float(final.mean()),
        mean_length=float(ep["length"].mean()),
        solved=success >= 0.95,
    )


# ---- HurdleRace: 1000 self-play episodes, the fraction of decisions (every agent, every step until
# the race ends) that JUMP exactly when a hurdle is ahead must be >= 0.95; and 1000 episodes with the
# policy as agent 0 against a uniformly random agent 1 must be won >= 90% of the time.
def evaluate_hurdle_race(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    k_self, k_random = jax.random.split(key)
    traj, ep = episodes(trainer, params, k_self, num_episodes=num_episodes)
    obs, action = np.asarray(traj.obs), np.asarray(traj.action)  # int32[T, n, 2]
    correct = action == np.where(obs == HURDLE, JUMP, RUN)
    decisions = ep["alive"][..., None] & np.ones_like(correct)
    accuracy = float(correct[decisions].mean())

    _, ep_r = episodes(trainer, params, k_random, versus_random=True, num_episodes=num_episodes)
    win_rate = float((ep_r["returns"][:, 0] > 0).mean())
    # the policy itself (greedy play can be right from the start): runner 0 sees no hurdle, runner 1 one
    see = jnp.array([[NOHURDLE, HURDLE]], jnp.int32)
    out, _ = trainer.network.apply(params, trainer.flat_obs(see))
    probs = np.asarray(trainer.dist_fn(out).probs(), np.float64)  # [2 runners, 2 actions]
    return dict(
        decision_accuracy=accuracy,
        win_rate_vs_random=win_rate,
        mean_length_self_play=float(ep["length"].mean()),
        prob_right_action=float((probs[0, RUN] + probs[1, JUMP]) / 2),
        solved=accuracy >= 0.95 and win_rate >= 0.90,
    )


# ---- Lottery: the greedy choice must be PowerRich (the highest expected value: 0.01 * 1e8 - 0.99 * 10).
def evaluate_lottery(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    del num_episodes  # read off the policy itself

    probs = initial_probs(trainer, params, key)
    best = LOTTERY_ACTIONS.index("PowerRich")
    return dict(
        prob_power_rich=float(probs[best]),
        prob_mega_haul=float(probs[LOTTERY_ACTIONS.index("MegaHaul")]),
        prob_no_ticket=float(probs[LOTTERY_ACTIONS.index("NoTicket")]),
        greedy_action=int(probs.argmax()),
        solved=bool(probs.argmax() == best),
    )


# ---- RockPaperScissors: the exploitability of the learned mixed strategy, i.e. the expected payoff of
# the best response against it (payoffs read off the environment's step), must be <= 0.1.
def evaluate_rock_paper_scissors(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    del num_episodes  # read off the policy itself
    probs = initial_probs(trainer, params, key)  # [agents, 3]; both agents share the policy
    payoff = payoff_matrix(eval_env(trainer), key)
    exploitability = max(float((payoff @ p).max()) for p in probs)
    return dict(
        exploitability=exploitability,
        max_abs_deviation_from_uniform=float(np.abs(probs - 1.0 / probs.shape[-1]).max()),
        probs_agent0=probs[0].round(4).tolist(),
        solved=exploitability <= 0.1,
    )


# ---- Turn-based games: the greedy policy in each seat against fixed opponents (`train.opponents`), as
# vmapped games in one compiled program per (trainer, opponent, games); params are its argument, so
# evaluating after every chunk compiles nothing again.
def versus_opponent(trainer, params, key, opponent, num_games: int, search: int = 0,
                    lookahead: int | None = None) -> dict:
    """The trainer's GREEDY policy (``params``: one seed; with ``search`` simulations of tree search
    per move when > 0, and ``lookahead`` plies of exact look-ahead, None: the run's ``play_lookahead``)
    in each seat against ``opponent`` (a `jaxenvs.games` policy) in the other,
    ``num_games`` games per seat (`train.policy.versus`, one compiled program per configuration and
    opponent): ``{"win": [per seat], "draw": [...], "loss": [...], "illegal": [...]}`` (floats).
    Raises when a game does not end within the game's ply limit."""
    res = versus(trainer, params, opponent, key, num_games, greedy=True, max_plies=trainer.max_plies, search=search,
                 lookahead=lookahead)
    seats = [res[f"seat{i}"] for i in range(trainer.num_agents)]
    return {k: [st[src] for st in seats] for k, src in
            (("win", "win"), ("draw", "draw"), ("loss", "loss"), ("illegal", "illegal_a"))}


def _seat_metrics(res: dict, name: str) -> dict:
    """``{f"{outcome}_vs_{name}_seat{i}": value}`` of `versus_opponent`'s result."""
    out = {f"{k}_vs_{name}_seat{i}": res[k][i] for k in ("win", "draw", "loss") for i in range(len(res["win"]))}
    out[f"illegal_vs_{name}"] = float(np.mean(res["illegal"]))
    return out


# TicTacToe: the greedy policy loses <= 1% of games to the perfect player (uniform among minimax-optimal
# moves) in each seat and <= 1% to random-legal play, and wins >= 0.92 of its games against random-legal
# play as first mover and >= 0.74 as second (minimax itself wins 0.9678 first against random).
def evaluate_tictactoe(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    k_rand, k_perfect = jax.random.split(key)
    rand = versus_opponent(trainer, params, k_rand, random_legal, num_episodes)
    perfect = versus_opponent(trainer, params, k_perfect, perfect_player, num_episodes)
    out = _seat_metrics(rand, "random") | _seat_metrics(perfect, "perfect")
    solved = (max(perfect["loss"]) <= 0.01 and max(rand["loss"]) <= 0.01 and rand["win"][0] >= 0.92
              and rand["win"][1] >= 0.74)
    return dict(out, solved=bool(solved))


# ConnectFour: the policy as it is played (its greedy move among the moves its play_lookahead plies of exact look-ahead
# score best, `train.policy.run_lookahead`; with the run's play_search simulations of tree search per move when the run
# has them, `train.policy.run_search`) wins >= 90% / 75% of its games as first / second mover against the heuristic
# (win, else block, else no blunder, prefer the centre; ties uniform), against its variants with other tie-breaking:
# heuristic-left and heuristic-right (deterministic centre orders 3 2 4 1 5 0 6 and 3 4 2 5 1 6 0) and heuristic-soft
# (the candidates drawn with centre weights 1 2 3 4 3 2 1), and against no-blunder (the candidates uniformly); and it
# wins >= 90% against random-legal play in both seats. Rows against random and the heuristic are always reported;
# the full evaluation (NUM_EPISODES games per seat) adds the other four, then, for a run with play_search, the
# searched rows against the five (`train.tuned.SEARCH_GAMES` games per seat: tree search costs about play_search
# network passes per move; at a true rate of 0.9 the 95% interval of 200 games is about +-0.04), which are then the
# ones judged. The progress evaluations after every chunk (fewer games) play the network alone (greedy, no look-ahead:
# they follow what training learns, and the look-ahead's programs would double their compile time) against random and
# the heuristic only (their verdict is on those two).
_C4_JUDGED = ("heuristic", "heuristic_left", "heuristic_right", "heuristic_soft", "no_blunder")


def evaluate_connect_four(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    keys = iter(jax.random.split(key, 16))
    full = num_episodes >= NUM_EPISODES
    lookahead = None if full else 0  # progress: the network alone
    rand = versus_opponent(trainer, params, next(keys), random_legal, num_episodes, lookahead=lookahead)
    heur = versus_opponent(trainer, params, next(keys), c4.heuristic, num_episodes, lookahead=lookahead)
    out = _seat_metrics(rand, "random") | _seat_metrics(heur, "heuristic")
    out["lookahead"] = run_lookahead(trainer.config) if full else 0
    judged = [heur]
    if full:
        players = {name: getattr(c4, name) for name in _C4_JUDGED}  # the names are the players' functions
        for name in _C4_JUDGED[1:]:
            judged.append(versus_opponent(trainer, params, next(keys), players[name], num_episodes))
            out |= _seat_metrics(judged[-1], name)
        search = run_search(trainer.config)
        if search:
            games = min(tuned.SEARCH_GAMES, num_episodes)
            judged = []
            for name in _C4_JUDGED:
                judged.append(versus_opponent(trainer, params, next(keys), players[name], games, search=search))
                out |= _seat_metrics(judged[-1], f"{name}_search")
            out["search"] = search
    solved = all(r["win"][0] >= 0.9 and r["win"][1] >= 0.75 for r in judged) and min(rand["win"]) >= 0.9
    return dict(out, solved=bool(solved))


def kuhn_policy_table(trainer, params) -> np.ndarray:
    """float64[12, 2]: the trained (stochastic) policy's (Pass, Bet) probabilities in each of Kuhn
    poker's 12 information sets (`jaxenvs.games.kuhn_poker`'s order)."""
    def probs(obs):
        x = trainer.preprocess(obs)[None]
        dist, _ = trainer.policy(params, x, (jnp.asarray(obs["action_mask"]) != 0)[None])
        return dist.probs()[0]

    return np.asarray(policy_table(probs), np.float64)


# KuhnPoker: the exact exploitability (NashConv / 2, all 6 deals and 12 information sets enumerated) of the
# learned stochastic policy must be <= 0.1 (uniform play: 0.4583; a Nash equilibrium: 0).
def evaluate_kuhn_poker(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    del key, num_episodes  # read off the policy itself

    table = kuhn_policy_table(trainer, params)
    expl = float(kuhn_exploitability(table))
    return dict(
        exploitability=expl,
        bet_prob_first=[float(x) for x in table[0:3, 1]],
        solved=expl <= 0.1,
    )


# ---- Maze: the held-out mazes (500 generated + the hand-made hard ones), 4 sampled episodes each
# (train.curricula.heldout_metrics; 1 each for the cheaper progress evaluations between chunks), and
# 8 greedy episodes of the default level (deterministic: they are all the same); no verdict.
def evaluate_maze(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    out = evaluate_generic(trainer, params, key, num_episodes=8)
    per_level = HELDOUT_EPISODES_PER_LEVEL if num_episodes >= NUM_EPISODES else 1
    out.update(heldout_metrics(trainer, params, key, episodes_per_level=per_level), solved=None)
    return out


EVALUATIONS = {
    "maze": evaluate_maze,
    "generic": evaluate_generic, "grid_world": evaluate_grid_world, "point_env": evaluate_point_env,
    "hurdle_race": evaluate_hurdle_race, "lottery": evaluate_lottery, "rock_paper_scissors": evaluate_rock_paper_scissors,
    "tictactoe": evaluate_tictactoe, "connect_four": evaluate_connect_four, "kuhn_poker": evaluate_kuhn_poker,
}
