"""What the trainer knows about each built-in environment, in one entry per environment (THE
table to touch for a new environment, beside its own file): the tuned training defaults per
algorithm, how a trained policy is evaluated, when it counts as solved, which metrics measure
progress while training, and what each metric means and how its plot axis is labelled.

    entry("GridWorld-v0").training["ppo"]      # {"total_timesteps": 60000, ...}
    entry("my_module:ns/MyEnv-v0")              # no entry: the generic one (below)

An environment without an entry (a custom one included, nothing to register) gets the generic
entry: the config classes' defaults, the mean undiscounted return over the evaluation episodes,
and "solved" when that reaches the spec's ``reward_threshold`` (no verdict without one).

The evaluations themselves (code) live in `train.evaluations`, named here by ``evaluate``; this
module is data only. Evaluations act greedily (the mode of the policy) unless a metric is about the mixed strategy
itself; each returns a dict of metrics and ``solved`` (bool, or None without a criterion), and the
entry's ``solved_when`` states the same criterion in words: one source of truth.
"""

from __future__ import annotations

import dataclasses

import jaxenvs
from jaxenvs.registration import env_id_of

__all__ = ["Metric", "TunedEnv", "ENTRIES", "entry", "entry_id", "training_defaults", "NUM_EPISODES"]

NUM_EPISODES = 1000  # episodes (games per seat) of an evaluation


@dataclasses.dataclass(frozen=True)
class Metric:
    """What an evaluation metric means; ``label`` is its plot axis (default: its name with spaces),
    ``unit_range`` draws it on [0, 1] (fractions and probabilities)."""

    meaning: str
    label: str | None = None
    unit_range: bool = False


@dataclasses.dataclass(frozen=True)
class TunedEnv:
    """One environment's entry (see the module docstring)."""

    training: dict = dataclasses.field(default_factory=dict)  # algorithm -> config field overrides
    # the name of its evaluation in `train.evaluations.EVALUATIONS`: (trainer, params, key, num_episodes) ->
    # {metric: value, "solved": bool}; None: the generic one
    evaluate: str | None = None
    solved_when: str | None = None  # the criterion evaluate's "solved" applies, in words
    progress: tuple = ("mean_return",)  # metrics followed after every chunk of training
    metrics: dict = dataclasses.field(default_factory=dict)  # metric name -> Metric
    judged: str = "greedy policy"  # what the evaluation plays: "greedy policy" or "stochastic policy"
    # what its num_episodes counts: "episodes", for games "games per seat"; "" for an exact evaluation
    # that plays none (Kuhn poker's exploitability, by enumeration)
    counted: str = "episodes"
    curves: tuple = ()  # per-update metrics of the compiled update drawn on the learning curve (see `metrics`)


GENERIC_METRICS = {
    "mean_return": Metric("mean undiscounted return"),
    "mean_length": Metric("mean episode length (steps)"),
}


def _seat_metric_doc(name: str, who: str, games: int = NUM_EPISODES, player: str = "the greedy policy") -> dict:
    return {
        f"{k}_vs_{name}_seat{i}": Metric(f"fraction of {games} games (per seat) {player} {'loses' if k == 'loss' else k + 's'} as "
                                         f"{'first' if i == 0 else 'second'} mover against {who}",
                                         label=f"{k} vs {name}, {'first' if i == 0 else 'second'} mover", unit_range=True)
        for k in ("win", "draw", "loss") for i in range(2)
    } | {f"illegal_vs_{name}": Metric(f"illegal moves per game of {player} against {who}")}


SEARCH_GAMES = 200  # games per seat of the searched rows of an evaluation (`train.evaluations`)
_SEARCHED = "the greedy policy with the run's play_search simulations of tree search per move"
_PLAYED = "the greedy policy (with the run's play_lookahead)"


TRAINING_GAME_METRICS = {
    "illegal_rate": Metric("illegal moves / decisions in the update's rollout (exactly 0 with masking)",
                           label="illegal-move rate (training)", unit_range=True),
} | {
    f"{k}_seat{i}": Metric(f"fraction of the update's games (match_games per seat) the greedy policy {'loses' if k == 'loss' else k + 's'} as "
                           f"{'first' if i == 0 else 'second'} mover against random-legal play",
                           label=f"{k} vs random, {'first' if i == 0 else 'second'} mover (every update)", unit_range=True)
    for k in ("win", "draw", "loss") for i in range(2)
}


# THE table: registered id -> entry. The training defaults' comments say why they are what they
# are; with a quarter of these PPO budgets, 4 of 4 seeds already met the evaluation's bar on every
# env (the defaults keep a 4x margin).
ENTRIES: dict[str, TunedEnv] = {
    "Maze-v0": TunedEnv(
        evaluate="maze",
        judged="stochastic policy",
        progress=("heldout_success_rate", "heldout_cvar10_solve_rate"),
        metrics={
            "mean_return": Metric("mean undiscounted return of greedy episodes on the default maze"),
            "mean_length": Metric("mean episode length (steps) on the default maze"),
            "heldout_levels": Metric("held-out mazes played (500 generated + the hand-made hard ones)"),
            "heldout_solvable": Metric("held-out mazes whose goal can be reached within the time limit (the solve rates' levels)"),
            "heldout_success_rate": Metric("mean over the solvable held-out mazes of the fraction of sampled episodes (4 each; 1 between chunks) that reach the goal",
                                           label="held-out solve rate", unit_range=True),
            "heldout_mean_return": Metric("mean return of the sampled policy over the held-out mazes"),
            "heldout_cvar10_solve_rate": Metric("mean solve rate of the worst 10% of the solvable held-out mazes",
                                                label="held-out CVaR-10% solve rate", unit_range=True),
            "heldout_mean_regret": Metric("mean exact regret (optimal return - mean return) over the held-out mazes"),
        },
    ),
    "GridWorld-v0": TunedEnv(
        training=dict(
            ppo=dict(total_timesteps=60_000, num_envs=32, num_steps=32, lr=1e-3),
            # A value network and GAE lambda 0.95: with the linear baseline and Monte-Carlo returns over
            # episodes of up to 300 steps, every full-size trust-region step follows mostly noise and the
            # policy collapses onto walls (0 of 4 seeds solved; 4 of 4 with these settings).
            trpo=dict(total_timesteps=100_000, num_envs=32, num_steps=32, max_kl=0.02, baseline="value", gae_lambda=0.95),
        ),
        evaluate="grid_world",
        solved_when="success_rate = 1 and length_ratio <= 1.1",
        progress=("success_rate", "length_ratio"),
        metrics={
            "success_rate": Metric("fraction of episodes that reach the goal within the time limit", unit_range=True),
            "mean_length": Metric("mean episode length (steps)"),
            "mean_manhattan_distance": Metric("mean Manhattan distance of the start to the target (optimal length)"),
            "length_ratio": Metric("mean length / optimal mean length (1 = optimal)", label="length / optimal length"),
        },
    ),
    "PointEnv-v0": TunedEnv(
        training=dict(
            ppo=dict(total_timesteps=200_000, num_envs=32, num_steps=64, lr=1e-3, ent_coef=0.0),
            # garage's recipe (normalize, Gaussian MLP (32, 32), linear feature baseline, GAE lambda 1)
            # with discount 0.9: the greedy policy must stop within 0.01 of the origin, and at 0.99 the
            # Monte-Carlo returns over 100 noisy steps drown that signal; 0.9 keeps the same optimal
            # policy (straight to the goal). Smaller batches (1000 steps) give 4x the trust-region steps.
            trpo=dict(total_timesteps=200_000, num_envs=10, num_steps=100, gamma=0.9, max_kl=0.05),
        ),
        evaluate="point_env",
        solved_when="success_rate >= 0.95",
        progress=("mean_final_distance", "success_rate"),
        metrics={
            "success_rate": Metric("fraction of episodes that reach the goal within the time limit", unit_range=True),
            "mean_final_distance": Metric("mean distance to the origin where the episode ended",
                                          label="final distance to origin"),
            "mean_length": Metric("mean episode length (steps)"),
        },
    ),
    "HurdleRace-v0": TunedEnv(
        training=dict(
            ppo=dict(total_timesteps=60_000, num_envs=16, num_steps=32, lr=1e-3),
            # Self-play; the linear baseline left 2 of 4 seeds in "always RUN"/"always JUMP" (4 of 4
            # solved with a value network and GAE lambda 0.95).
            trpo=dict(total_timesteps=60_000, num_envs=16, num_steps=32, max_kl=0.02, baseline="value", gae_lambda=0.95),
        ),
        evaluate="hurdle_race",
        solved_when="decision_accuracy >= 0.95 and win_rate_vs_random >= 0.9",
        progress=("win_rate_vs_random", "decision_accuracy", "prob_right_action"),
        metrics={
            "decision_accuracy": Metric("fraction of decisions that jump exactly when a hurdle is ahead (self-play)",
                                        unit_range=True),
            "win_rate_vs_random": Metric("fraction of races won as agent 0 against a uniformly random agent 1",
                                         label="win rate vs random", unit_range=True),
            "mean_length_self_play": Metric("mean race length in self-play (steps)"),
            "prob_right_action": Metric("the policy's mean probability of RUN with no hurdle ahead and of JUMP before one",
                                        label="P(right action)", unit_range=True),
        },
    ),
    "Lottery-v0": TunedEnv(
        training=dict(
            # Rewards in units of the jackpot (1e8): PowerRich pays 1 w.p. 0.01, MegaHaul 0.01 w.p. 0.05.
            # Plain policy gradient (one epoch, one minibatch, raw advantages): per-minibatch
            # standardisation and repeated clipped epochs both weigh the frequent small MegaHaul wins
            # like the rare jackpot and settle on MegaHaul.
            ppo=dict(total_timesteps=100_000, num_envs=64, num_steps=16, update_epochs=1, num_minibatches=1, lr=1e-3,
                     ent_coef=0.0, gamma=0.0, reward_scale=1e-8, normalize_advantages=False),
            # One-shot (gamma 0), raw advantages as in PPO's entry; rewards in units of 1e6 (the jackpot is
            # 100): the step is scale-free, but conjugate gradient stops at garage's absolute residual
            # tolerance, which gradients of rewards in units of the jackpot (1e8) fall below.
            trpo=dict(total_timesteps=100_000, num_envs=64, num_steps=16, gamma=0.0, reward_scale=1e-6,
                      normalize_advantages=False),
        ),
        evaluate="lottery",
        solved_when="greedy action is PowerRich",
        progress=("prob_power_rich",),
        metrics={
            "prob_power_rich": Metric("probability of buying PowerRich (the best expected value)",
                                      label="P(buy PowerRich ticket)", unit_range=True),
            "prob_mega_haul": Metric("probability of buying MegaHaul"),
            "prob_no_ticket": Metric("probability of buying no ticket"),
            "greedy_action": Metric("the most probable action (0 PowerRich, 1 MegaHaul, 2 NoTicket)"),
        },
    ),
    "RockPaperScissors-v0": TunedEnv(
        judged="stochastic policy",
        training=dict(
            # Self-play of a one-shot zero-sum game: simultaneous policy gradient cycles around the
            # uniform equilibrium; a strong entropy bonus (whose regularised equilibrium is still uniform)
            # damps the cycles, and raw advantages keep the sampling noise from being scaled up.
            ppo=dict(total_timesteps=50_000, num_envs=64, num_steps=8, lr=3e-4, ent_coef=0.2, gamma=0.0,
                     normalize_advantages=False),
            # an entropy bonus and a small trust region damp the cycles (ent_coef 0.2 with max_kl 0.01
            # left 4 of 4 seeds at exploitability 0.10-0.13).
            trpo=dict(total_timesteps=50_000, num_envs=64, num_steps=8, gamma=0.0, normalize_advantages=False,
                      ent_coef=0.5, max_kl=0.003),
        ),
        evaluate="rock_paper_scissors",
        solved_when="exploitability <= 0.1",
        progress=("exploitability",),
        metrics={
            "exploitability": Metric("best response's expected payoff against the policy (0 at the uniform equilibrium)",
                                     label="exploitability (0 = equilibrium)"),
            "max_abs_deviation_from_uniform": Metric("largest |probability - 1/3| of the mixed strategy"),
            "probs_agent0": Metric("rock, paper, scissors probabilities"),
        },
    ),
    # Turn-based games: self-play PPO with a masked policy (`train.base`: one shared policy in every seat,
    # returns credited to each seat's own decisions). TRPO refuses them.
    "TicTacToe-v0": TunedEnv(
        counted="games per seat",
        # A strong entropy bonus (0.2): at 0.01-0.05 the self-play policy collapsed onto a few lines of play
        # within 100k steps (entropy 0.2-0.3 nats) and its greedy play still lost 50-100% of its games to the
        # perfect player after 400k steps; at 0.2 the sampled policy keeps visiting the positions a perfect
        # opponent leads to, while the greedy policy (what the evaluation judges) plays the best move.
        # Opponents: half the envs self-play, the other half dealt random-legal, perfect, perfect, perfect in
        # turn (random_opponents 0.5, training_opponents "random,perfect,perfect,perfect"; `train.league`);
        # 800k steps. The bar: at most 1% of 1,000 games per seat lost to the perfect player. Measured
        # (benchmarks/results/tictactoe_default.md: every run, alone and under --seeds 10; seed i of --seeds N
        # starts as --seed i alone, the two programs differ in float rounding only):
        # - pure self-play, 400k: 8 of 10 seeds at the old 2% bar (two lost 0.093 and 0.108 as second mover);
        # - "random,perfect" (the former default), 400k: --seeds 10 8 of 10 at 1% (0.024, 0.042);
        # - "random,perfect,perfect", 400k: --seeds 10 10 of 10, alone 8 of 10 (0.012, 0.038 as second mover);
        #   800k: alone 10 of 10, --seeds 10 9 of 10 (seed 5 lost 0.027 as second mover);
        # - "random,perfect,perfect,perfect", 800k (this entry): alone 10 of 10 and --seeds 10 10 of 10, no
        #   game lost to the perfect player in either seat by any seed.
        training=dict(ppo=dict(total_timesteps=800_000, num_envs=64, num_steps=32, lr=1e-3, ent_coef=0.2,
                               hidden_sizes=(128, 128), random_opponents=0.5,
                               training_opponents="random,perfect,perfect,perfect")),
        evaluate="tictactoe",
        solved_when=("loss_vs_perfect_seat0 <= 0.01 and loss_vs_perfect_seat1 <= 0.01 and loss_vs_random_seat0 <= 0.01 "
                     "and loss_vs_random_seat1 <= 0.01 and win_vs_random_seat0 >= 0.92 and win_vs_random_seat1 >= 0.74"),
        progress=("win_vs_random_seat0", "win_vs_random_seat1", "loss_vs_perfect_seat0", "loss_vs_perfect_seat1"),
        metrics=_seat_metric_doc("random", "random-legal play") | _seat_metric_doc("perfect", "the perfect player")
        | TRAINING_GAME_METRICS,
        curves=("illegal_rate", "win_seat0", "win_seat1"),
    ),
    "ConnectFour-v0": TunedEnv(
        counted="games per seat",
        # What was chosen and why (the runs tried, with their figures: benchmarks/results/tuning_connect_four.md):
        # long rollouts (32 envs x 128 steps), as a game lasts up to 42 plies and a rollout's end cuts one (the
        # seat not to move there bootstraps from a value no loss trains, `train.gae.gae_decisions`); the game's
        # named opponents in every env, one per block of two, the stochastic ones weighted up (`train.league`);
        # played and judged with a 4-ply look-ahead (`jaxenvs.games.search.lookahead_policy`).
        training=dict(ppo=dict(total_timesteps=8_000_000, num_envs=32, num_steps=128, lr=1e-3, ent_coef=0.01,
                               hidden_sizes=(128, 128), random_opponents=1.0, play_lookahead=4,
                               training_opponents=("heuristic-soft,no-blunder,heuristic,heuristic-left,heuristic-right,"
                                                   "heuristic-noisy,heuristic-soft,no-blunder,heuristic,heuristic-left,"
                                                   "heuristic-right,random,heuristic-soft,no-blunder,heuristic-noisy,"
                                                   "win-block"))),
        evaluate="connect_four",
        judged=("greedy policy among the moves its play_lookahead plies of exact look-ahead score best; the rows *_search: "
                "with the run's play_search simulations of tree search per move"),
        solved_when=("win_vs_heuristic, win_vs_heuristic_left, win_vs_heuristic_right, win_vs_heuristic_soft and "
                     "win_vs_no_blunder >= 0.9 as first mover (seat0) and >= 0.75 as second (seat1), their *_search rows "
                     "instead for a run with play_search; win_vs_random_seat0 >= 0.9 and win_vs_random_seat1 >= 0.9"),
        progress=("win_vs_random_seat0", "win_vs_random_seat1", "win_vs_heuristic_seat0", "win_vs_heuristic_seat1"),
        metrics=_seat_metric_doc("random", "random-legal play", player=_PLAYED)
        | _seat_metric_doc("heuristic", "the heuristic (win, else block, else no blunder, prefer the centre)", player=_PLAYED)
        | _seat_metric_doc("heuristic_left", "heuristic-left (the heuristic's candidates in the order 3 2 4 1 5 0 6)",
                           player=_PLAYED)
        | _seat_metric_doc("heuristic_right", "heuristic-right (the heuristic's candidates in the order 3 4 2 5 1 6 0)",
                           player=_PLAYED)
        | _seat_metric_doc("heuristic_soft", "heuristic-soft (the heuristic's candidates drawn with centre weights 1 2 3 4 3 2 1)",
                           player=_PLAYED)
        | _seat_metric_doc("no_blunder", "no-blunder (win, else block, else random among moves giving no win)",
                           player=_PLAYED)
        | _seat_metric_doc("heuristic_search", "the heuristic", SEARCH_GAMES, _SEARCHED)
        | _seat_metric_doc("heuristic_left_search", "heuristic-left", SEARCH_GAMES, _SEARCHED)
        | _seat_metric_doc("heuristic_right_search", "heuristic-right", SEARCH_GAMES, _SEARCHED)
        | _seat_metric_doc("heuristic_soft_search", "heuristic-soft", SEARCH_GAMES, _SEARCHED)
        | _seat_metric_doc("no_blunder_search", "no-blunder", SEARCH_GAMES, _SEARCHED)
        | {"lookahead": Metric("plies of exact look-ahead the policy plays with (the run's play_lookahead)")}
        | {"search": Metric("simulations of tree search per move of the searched rows (the run's play_search)")}
        | TRAINING_GAME_METRICS,
        curves=("illegal_rate", "win_seat0", "win_seat1"),
    ),
    "KuhnPoker-v0": TunedEnv(
        judged="stochastic policy",
        counted="",
        # Plain self-play PPO with an entropy bonus, judged on the last policy (no averaging). Without the
        # bonus (or at 0.01-0.03) the policy turned nearly deterministic (entropy < 0.1 nats) and cycled at
        # exploitability 0.25-0.57 after 400k steps; at 0.1 it keeps the mixed strategies Kuhn's equilibria
        # need, and the learning rate annealed to 0 lets it settle (4 of 4 seeds at 0.035-0.060). gamma = 1
        # and Monte-Carlo returns (lambda 1): a hand lasts at most 3 decisions; raw advantages, as in the
        # other zero-sum games near equilibrium (standardising them amplifies the sampling noise).
        training=dict(ppo=dict(total_timesteps=400_000, num_envs=64, num_steps=32, lr=3e-4, ent_coef=0.1,
                               gamma=1.0, gae_lambda=1.0, normalize_advantages=False)),
        evaluate="kuhn_poker",
        solved_when="exploitability <= 0.1",
        progress=("exploitability",),
        metrics={
            "exploitability": Metric("exact exploitability (NashConv / 2) of the stochastic policy; uniform play 0.4583, "
                                     "a Nash equilibrium 0", label="exploitability (0 = equilibrium)"),
            "bet_prob_first": Metric("probability of betting first with a Jack, Queen, King"),
        } | TRAINING_GAME_METRICS,
        curves=("illegal_rate",),
    ),
    # gymnax's classic-control ids (pip install "jaxenvs[gymnax]"): evaluated generically against the
    # specs' reward_threshold (Gymnasium's): CartPole mean return >= 475, Acrobot >= -100.
    # 4 of 4 seeds at 500 (greedy, 1000 episodes) with these; at 500k steps 3 of 4
    "gymnax/CartPole-v1": TunedEnv(training=dict(ppo=dict(total_timesteps=1_000_000, num_envs=16, num_steps=128, lr=2.5e-4))),
    # 4 of 4 seeds between -84.1 and -82.1 (greedy, 1000 episodes); at 500k steps with 16 x 128 and
    # no entropy bonus only 1 of 4 learned
    "gymnax/Acrobot-v1": TunedEnv(
        training=dict(ppo=dict(total_timesteps=1_000_000, num_envs=32, num_steps=64, lr=1e-3, ent_coef=0.01))
    ),
}


def entry_id(env_id: str) -> str:
    """The key of ``env_id``'s entry: its canonical id (`jaxenvs.registration.env_id_of`), or, for an
    id that is not registered, the id without its ``module:`` prefix."""
    if env_id in ENTRIES:
        return env_id
    try:
        return env_id_of(env_id)
    except (KeyError, ValueError, ImportError):
        return env_id.rpartition(":")[2]


def entry(env_id: str) -> TunedEnv:
    """The entry of ``env_id``: its own, filled in with the generic evaluation where it has none,
    or the generic entry (see the module docstring)."""
    own = ENTRIES.get(entry_id(env_id), TunedEnv())
    if own.evaluate is not None:
        return own
    threshold = None
    try:
        threshold = jaxenvs.spec(env_id).reward_threshold
    except (KeyError, ValueError, ImportError):
        pass
    solved_when = None if threshold is None else f"mean_return >= {threshold:g} (the spec's reward_threshold)"
    return dataclasses.replace(own, evaluate="generic", solved_when=solved_when, progress=("mean_return",),
                               metrics=GENERIC_METRICS)


def training_defaults(algo: str) -> dict[str, dict]:
    """``{env id: tuned config overrides}`` of one algorithm (a view of `ENTRIES`)."""
    return {env_id: e.training[algo] for env_id, e in ENTRIES.items() if algo in e.training}
