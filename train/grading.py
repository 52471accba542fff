"""Grading trained policies: what an environment's entry measures, its bar and the verdict
(``jaxenvs evaluate RUN_DIR`` prints them, `jaxenvs.cli.evaluate`).

What each environment measures, its bar ("solved when") and the metrics followed while training
come from its entry in `train.tuned` (environments without one, custom ones included, get the
generic entry: the mean undiscounted return over 1000 episodes, solved when it reaches the spec's
``reward_threshold``, no verdict without one). With several seeds in a run every seed is
evaluated; the run is solved when all are.

`format_table` is the verdict's table (one column per seed, what each metric means, the criterion
and the verdict); `head_to_head_runs` and `format_head_to_head` the win / draw / loss of the
greedy policy in each seat against opponents (`jaxenvs.games.make_opponent`). A
two-player game without an entry of its own in `train.tuned` is evaluated against random-legal play, per seat (`evaluate_game_vs_random`),
not by its mean return (0 in self-play of a zero-sum game). `progress_metrics` gives the metrics
``jaxenvs-train`` follows after every chunk of training (on `PROGRESS_EPISODES` episodes per seed)
in its progress line and learning curve.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from jaxenvs.prng import key_on_host
import jaxenvs
from jaxenvs.games import is_two_player_game, random_legal
from . import evaluations, tuned
from .episodes import BLOCK, NUM_EPISODES, first_episodes
from .policy import versus

__all__ = [
    "evaluate", "evaluate_params", "first_episodes", "progress_metrics", "format_table", "format_progress",
    "solved_hint", "progress_note", "NUM_EPISODES", "PROGRESS_EPISODES", "evaluate_game_vs_random", "head_to_head_runs",
    "format_head_to_head", "what_is_counted",
]

PROGRESS_EPISODES = BLOCK  # per seed, after every chunk of training: one block of the evaluation program
PROGRESS_GAMES = 64  # per seat and seed for two-player games: evaluation stays under a quarter of the run


GAME_METRICS = {
    **{f"{o}_seat{s}": tuned.Metric(f"fraction of games {w} in seat {s} ({'first' if s == 0 else 'second'} to move) "
                                    f"against random-legal play", unit_range=True)
       for s in (0, 1) for o, w in (("win", "won"), ("draw", "drawn"), ("loss", "lost"))},
    "mean_return": tuned.Metric("mean return against random-legal play, over both seats"),
    "illegal_per_game": tuned.Metric("illegal moves of the policy per game (both seats)"),
}


@functools.lru_cache(maxsize=64)
def game_without_entry(env_id: str) -> bool:
    """True for a two-player zero-sum game that has no evaluation of its own in `train.tuned`:
    its generic mean return would be 0 in self-play, so it is evaluated against random play."""
    if tuned.entry(env_id).evaluate != "generic":
        return False

    try:
        return is_two_player_game(jaxenvs.make(env_id, autoreset=False))
    except Exception:  # an id that cannot be made here is evaluated as before
        return False


def _entry(env_id: str):
    """The environment's `train.tuned` entry, with the evaluation against random play for a
    two-player game that has none of its own."""
    e = tuned.entry(env_id)
    if game_without_entry(env_id):
        return tuned.TunedEnv(training=e.training, evaluate="game_vs_random", solved_when=None,
                              progress=("mean_return",), metrics=GAME_METRICS, counted="games per seat")
    return e


def evaluate_game_vs_random(trainer, params, key, num_episodes=NUM_EPISODES) -> dict:
    """The greedy policy against random-legal play, ``num_episodes`` games in each seat: win /
    draw / loss per seat, the mean return over both seats and illegal moves per game; no
    criterion (``solved`` None)."""
    res = versus(trainer, params, random_legal, key, num_games=num_episodes)
    out = {f"{o}_seat{s}": res[f"seat{s}"][o] for s in (0, 1) for o in ("win", "draw", "loss")}
    out["mean_return"] = (res["seat0"]["mean_return"] + res["seat1"]["mean_return"]) / 2
    out["illegal_per_game"] = (res["seat0"]["illegal_a"] + res["seat1"]["illegal_a"]) / 2
    out["solved"] = None
    return out


def evaluate_params(trainer, params, key=None, num_episodes: int = NUM_EPISODES) -> dict:
    """Metrics of ONE set of network params (no seed axis) on the trainer's environment, with
    ``solved`` (bool, or None without a criterion)."""
    key = key_on_host(12345) if key is None else key
    name = _entry(trainer.config.env_id).evaluate
    fn = evaluate_game_vs_random if name == "game_vs_random" else evaluations.EVALUATIONS[name]
    return fn(trainer, params, key, num_episodes=num_episodes)


def evaluate(trainer, params, key=None, num_episodes: int = NUM_EPISODES) -> dict:
    """Evaluate params with a leading seed axis: ``{"env_id", "num_episodes", "solved_when",
    "seeds": [metrics per seed], "solved": all seeds solved (None: no criterion)}``."""
    num_seeds = jax.tree.leaves(params)[0].shape[0]
    per_seed = [
        evaluate_params(trainer, jax.tree.map(lambda x: x[i], params), key, num_episodes) for i in range(num_seeds)
    ]
    flags = [m["solved"] for m in per_seed]
    solved = None if any(f is None for f in flags) else all(flags)
    return {
        "env_id": trainer.config.env_id,
        "num_episodes": num_episodes,
        "solved_when": _entry(trainer.config.env_id).solved_when,
        "seeds": per_seed,
        "solved": solved,
    }


def progress_metrics(trainer, params, key=None, num_episodes: int | None = None) -> dict:
    """The metrics that measure progress in the trainer's environment (its entry's ``progress``)
    for params with a leading seed axis: ``{name: [value per seed]}``; on `PROGRESS_EPISODES`
    episodes, or `PROGRESS_GAMES` games per seat for a two-player game, by default."""
    key = key_on_host(54321) if key is None else key
    if num_episodes is None:
        num_episodes = PROGRESS_GAMES if _entry(trainer.config.env_id).counted == "games per seat" else PROGRESS_EPISODES
    per_seed = evaluate(trainer, params, key, num_episodes=num_episodes)["seeds"]
    return {n: [float(m[n]) for m in per_seed] for n in _entry(trainer.config.env_id).progress}


def format_progress(progress: dict) -> str:
    """``success_rate 0.93 | length_ratio 1.21`` (mean over seeds)."""
    return " | ".join(f"{k} {np.mean(v):.3g}" for k, v in progress.items() if k != "env_steps")


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return "/".join(f"{x:.3f}" for x in v)
    return str(v)


def progress_note(env_id: str) -> str:
    """The line printed before training that says what the progress rows judge, beside what the
    final verdict judges (the rows play far fewer episodes, to keep evaluation a small share)."""
    if not _entry(env_id).counted:
        return f"progress rows and the verdict at the end: {what_is_counted(env_id)}"
    games = _entry(env_id).counted == "games per seat"
    rows = what_is_counted(env_id, PROGRESS_GAMES if games else PROGRESS_EPISODES)
    return f"progress rows: measured on {rows}; the verdict at the end on {what_is_counted(env_id)}"


def what_is_counted(env_id: str, num_episodes: int = NUM_EPISODES) -> str:
    """What the evaluation of ``env_id`` plays, for its header and progress line: ``"1000 episodes
    per seed"``, ``"1000 games per seat per seed"``, or that it is exact and plays none."""
    counted = _entry(env_id).counted
    return f"{num_episodes} {counted} per seed" if counted else "exact (enumerated, no episodes played)"


def _short_meanings(meanings: list[str]) -> list[str]:
    """Each meaning in full where it is new; where it repeats the row above's but for a few words
    (``wins as first mover`` / ``wins as second mover``), only those words between ``...``: the
    shared words at both ends (at least half of the sentence) are not printed again."""
    out = []
    for i, text in enumerate(meanings):
        words = text.split()
        prev = meanings[i - 1].split() if i else []
        head = 0
        while head < min(len(words), len(prev)) and words[head] == prev[head]:
            head += 1
        tail = 0
        while tail < min(len(words), len(prev)) - head and words[-1 - tail] == prev[-1 - tail]:
            tail += 1
        middle = words[head:len(words) - tail]
        if middle and 2 * (head + tail) >= len(words) and head and tail:
            out.append(f"... {' '.join(middle)} ...")
        else:
            out.append(text)
    return out


def format_table(result: dict) -> str:
    """A readable report of `evaluate`'s result: one column per seed, each metric's meaning, the
    solved criterion and the verdict (both from the environment's entry in `train.tuned`)."""
    seeds = result["seeds"]
    metrics = _entry(result["env_id"]).metrics
    names = [k for k in seeds[0] if k != "solved"]
    head = ["metric"] + [f"seed {i}" for i in range(len(seeds))] + ["meaning"]
    meanings = _short_meanings([metrics[k].meaning if k in metrics else "" for k in names])
    rows = [[k] + [_cell(m[k]) for m in seeds] + [meaning] for k, meaning in zip(names, meanings)]
    rows.append(["solved"] + [_cell(m["solved"]) for m in seeds] + [""])
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head) - 1)]
    game = game_without_entry(result["env_id"])
    no_criterion = ("no criterion for this game (it has no entry in jaxenvs.train.tuned): win / draw / loss against "
                    "random-legal play per seat" if game else "no criterion for this environment (its spec has no reward_threshold)")
    entry = _entry(result["env_id"])
    played = what_is_counted(result["env_id"], result.get("num_episodes", NUM_EPISODES))
    lines = [
        f"evaluation: {result['env_id']}, {played}, {entry.judged} ({len(seeds)} seed{'s' if len(seeds) != 1 else ''})",
        f"solved when: {result.get('solved_when') or no_criterion}",
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in [head] + rows]
    if result["solved"] is None:
        verdict = "no verdict (no criterion for this environment)"
    elif result["solved"]:
        verdict = "SOLVED" + (" (every seed)" if len(seeds) > 1 else "")
    else:
        failed = [str(i) for i, m in enumerate(seeds) if not m["solved"]]
        verdict = f"NOT SOLVED (seed{'s' if len(failed) > 1 else ''} {', '.join(failed)} below the bar)"
    lines.append(f"verdict: {verdict}")
    return "\n".join(line.rstrip() for line in lines)


def solved_hint(result: dict, config) -> str | None:
    """What to try when a run ends unsolved or without a verdict: with the env's tuned training
    values (a seed below the bar) or with the generic defaults; None when there is nothing to
    suggest."""
    if result["solved"] is True:
        return None
    if tuned.entry(config.env_id).training.get(config.ALGO):
        if result["solved"] is None:
            return None
        more = f"--total-timesteps {config.total_timesteps * 2}"
        return (f"{config.env_id} has tuned training values ({config.total_timesteps:,} env steps), and this run "
                f"stayed below its bar; tuned values solve most seeds, not every one on every machine: try another "
                f"--seed, --seeds 4 to see the spread (each seed judged alone), or {more}")

    if game_without_entry(config.env_id):
        return (f"{config.env_id} is a two-player game without an entry in jaxenvs.train.tuned, so there is no verdict: "
                f"the table shows win / draw / loss against random-legal play per seat; compare runs with "
                f"{PROG} RUN_DIR --opponent OTHER_RUN_DIR")
    more = f"--total-timesteps {config.total_timesteps * 10:,}".replace(",", "")
    if result["solved"] is None:
        return (f"{config.env_id} has no tuned training values and its spec no reward_threshold, so there is no verdict; "
                f"register it with reward_threshold=... to get one, and compare mean_return against what an optimal "
                f"policy earns (sparse-reward envs often need {more} or more)")
    return (f"{config.env_id} has no tuned training values and the generic defaults "
            f"({config.total_timesteps:,} env steps) did not reach its bar; try {more} (sparse rewards need many more "
            f"steps), more seeds (--seeds 4), or another --lr / --ent-coef")


def head_to_head_runs(trainer, params, opponents: list[tuple[str, object]], key, num_games: int,
                      search: int = 0, lookahead: int | None = None) -> dict:
    """``{label: [{"seat0": stats, "seat1": stats} per seed]}``: the greedy policy of every seed of
    ``params`` (leading seed axis; with ``search`` simulations of tree search per move when > 0 and
    ``lookahead`` plies of exact look-ahead, None: the run's ``play_lookahead``) against each
    ``(label, policy)`` of ``opponents`` (`train.policy.versus`; one compile per opponent)."""
    num_seeds = jax.tree.leaves(params)[0].shape[0]
    out = {}
    for (label, opponent), k in zip(opponents, jax.random.split(key, max(len(opponents), 1))):
        out[label] = [
            versus(trainer, jax.tree.map(lambda x: x[i], params), opponent, k, num_games, search=search,
                   lookahead=lookahead)
            for i in range(num_seeds)
        ]
    return out


def format_head_to_head(env_id: str, results: dict, num_games: int, search: int = 0, lookahead: int = 0) -> str:
    """A table per opponent: win / draw / loss, mean return and illegal moves per game of the greedy
    policy in each seat (seat 0 moves first) and seed."""
    lines = []
    for label, per_seed in results.items():
        who = f"greedy policy with {search} simulations of tree search per move" if search else "greedy policy"
        if lookahead:
            who += f" among the moves {lookahead} plies of exact look-ahead score best"
        lines.append(f"head-to-head on {env_id}: {who} vs {label}, {num_games} games per seat and seed")
        head = ["seed", "seat", "win", "draw", "loss", "mean return", "illegal/game"]
        rows = []
        for i, r in enumerate(per_seed):
            for s in (0, 1):
                st = r[f"seat{s}"]
                rows.append([str(i), f"{s} ({'first' if s == 0 else 'second'})", f"{st['win']:.3f}", f"{st['draw']:.3f}",
                             f"{st['loss']:.3f}", f"{st['mean_return']:+.3f}", f"{st['illegal_a']:.3g}"])
        widths = [max(len(r[c]) for r in [head] + rows) for c in range(len(head))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head] + rows]
    return "\n".join(lines)
