"""The seat loop (`jaxenvs.games.play_games`) with a searching policy: each seat's policy asked on
its own plies only (the loop as it is) against every seat's policy asked on every ply (the loop
before, ``every_ply=True``: the same games), timed in turn in the same process.

A seat is played by `jaxenvs.games.search.search_policy` (mctx Gumbel MuZero, the game's step as
the model) guided by a small network (two dense layers of 64, random weights: the search costs
what it costs with a trained network of that size; ``--run RUN`` uses a trained run's network
instead, through ``load_policy(RUN, search=N)``). The other seat is random-legal play
(``--both`` seats both with the search). Prints seconds per match (median of the rounds), games
per second and the speed-up (median over rounds of before / after, paired in each round).

    python benchmarks/seat_loop.py --env ConnectFour-v0 --games 64 --simulations 16 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jaxenvs  # noqa: E402
from jaxenvs.games import play_games, random_legal  # noqa: E402
from jaxenvs.games.search import search_policy  # noqa: E402
from steps_per_sec import paired_ratios, time_in_turn  # noqa: E402


def small_network(env, key, width: int = 64):
    """``evaluate(obs) -> (logits, value)``: two dense tanh layers of ``width``, random weights."""
    n_in = int(np.prod(env.observation_space().spaces["observation"].shape))
    n_out = int(env.action_space().n)
    k1, k2, k3, k4 = jax.random.split(key, 4)
    w1 = jax.random.normal(k1, (n_in, width)) / np.sqrt(n_in)
    w2 = jax.random.normal(k2, (width, width)) / np.sqrt(width)
    wp = jax.random.normal(k3, (width, n_out)) / np.sqrt(width)
    wv = jax.random.normal(k4, (width,)) / np.sqrt(width)

    def evaluate(obs):
        h = jnp.tanh(jnp.asarray(obs["observation"], jnp.float32).reshape(-1) @ w1)
        h = jnp.tanh(h @ w2)
        return h @ wp, jnp.tanh(h @ wv)

    return evaluate


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--env", default="ConnectFour-v0", help="TicTacToe-v0 or ConnectFour-v0")
    p.add_argument("--games", type=int, default=64, help="games per match (one batch)")
    p.add_argument("--simulations", type=int, default=16, help="search simulations per move")
    p.add_argument("--repeats", type=int, default=5, help="paired rounds")
    p.add_argument("--both", action="store_true", help="both seats search (else seat 1 plays random-legal)")
    p.add_argument("--run", default=None, help="a trained run: its network guides the search (load_policy)")
    args = p.parse_args(argv)
    if args.run:
        from jaxenvs.train import load_policy

        searched = load_policy(args.run, search=args.simulations)
        env = jaxenvs.make(searched.trainer.config.env_id, autoreset=False)
    else:
        env = jaxenvs.make(args.env, autoreset=False)
        searched = search_policy(env, small_network(env, jax.random.key(0)), args.simulations)
    seats = (searched, searched if args.both else random_legal)
    programs = {
        "every seat, every ply (before)": lambda k: play_games(env, seats, args.games, k, every_ply=True),
        "own plies only (now)": lambda k: play_games(env, seats, args.games, k),
    }
    timings = time_in_turn(programs, args.repeats)
    ratio = paired_ratios(timings, "every seat, every ply (before)")["own plies only (now)"]
    who = "both seats search" if args.both else "seat 0 searches, seat 1 random-legal"
    print(f"{env.spec.id}: {args.games} games, {args.simulations} simulations per move, {who}"
          f"{' (network of ' + args.run + ')' if args.run else ''}; load {os.getloadavg()[0]:.1f}")
    for name, (compile_s, times) in timings.items():
        t = float(np.median(times))
        print(f"  {name:<32} {t:8.3f} s per match  {args.games / t:9.1f} games/s  (compile {compile_s:.1f} s)")
    print(f"  speed-up (median of paired rounds): {ratio:.2f}x")


if __name__ == "__main__":
    main()
