"""Strength of a trained two-player game policy, greedy and with tree search, against named
opponents, with the time each row took (compile included on a row's first call):

    python benchmarks/game_strength.py RUN_DIR [--opponents heuristic,heuristic-soft,no-blunder]
        [--search 0,64] [--games 1000,100] [--seed 1] [--lookahead 0,4]

``--search`` and ``--games`` pair up: ``0,64`` with ``1000,100`` plays 1000 games per seat greedy
and 100 per seat with 64 simulations of tree search per move (`jaxenvs.games.search`), each
against every opponent of ``--opponents`` (`jaxenvs describe ID` lists them). Every seed of the
run is played. ``--lookahead`` (default: the run's own ``play_lookahead``) repeats every row with
each number of plies of exact look-ahead (`jaxenvs.games.search.lookahead_policy`). Prints one
line per (look-ahead, search, opponent, seed) with the load average.
"""

from __future__ import annotations

import argparse
import time

import jax


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir")
    p.add_argument("--opponents", default="heuristic,heuristic-left,heuristic-right,heuristic-soft,no-blunder")
    p.add_argument("--search", default="0,64")
    p.add_argument("--games", default="1000,100")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--lookahead", default=None, help="comma-separated plies of look-ahead (default: the run's own)")
    args = p.parse_args(argv)
    searches = [int(x) for x in args.search.split(",")]
    games = [int(x) for x in args.games.split(",")]
    if len(searches) != len(games):
        p.error("--search and --games need as many comma-separated values")
    from jaxenvs.games import named_opponents
    from jaxenvs.train.checkpoint import load_run
    from jaxenvs.train.policy import versus

    trainer, runner, meta = load_run(args.run_dir)
    known = named_opponents(trainer.env)
    bad = [o for o in args.opponents.split(",") if o not in known]
    if bad:
        p.error(f"unknown opponent(s) {bad}; {trainer.config.env_id} has {sorted(known)}")
    limit = trainer.max_plies
    from jaxenvs.train.policy import run_lookahead

    own = [run_lookahead(trainer.config)]
    lookaheads = own if args.lookahead is None else [int(x) for x in args.lookahead.split(",")]
    for lookahead, search, n in ((d, s, n) for d in lookaheads for s, n in zip(searches, games)):
        for name in args.opponents.split(","):
            for seed in range(meta["run"].num_seeds):
                params = jax.tree.map(lambda x: x[seed], runner.params)
                t = time.perf_counter()
                r = versus(trainer, params, known[name].policy, jax.random.key(args.seed), n, search=search,
                           max_plies=limit, lookahead=lookahead)
                dt = time.perf_counter() - t
                load = open("/proc/loadavg").read().split()[0]
                print(f"look-ahead {lookahead}  search {search:4d}  {n:5d} games/seat  vs {name:16s} seed {seed}: "
                      f"win {r['seat0']['win']:.3f} / "
                      f"{r['seat1']['win']:.3f}  loss {r['seat0']['loss']:.3f} / {r['seat1']['loss']:.3f}  "
                      f"{dt:6.1f} s  load {load}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
