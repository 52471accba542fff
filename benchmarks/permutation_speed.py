"""The trainers' minibatch shuffle (`jaxenvs.train.permutation.minibatch_permutation`) against
``jax.random.permutation``, which it equals index for index, paired in one process: each jitted as
a scan of ``--calls`` shuffles, timed in turn for ``--rounds`` rounds; the median of the per-round
ratios is printed per size.

    python benchmarks/permutation_speed.py
    python benchmarks/permutation_speed.py --sizes 1024 32768 --rounds 9
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxenvs.train.permutation import minibatch_permutation  # noqa: E402


def shuffles(permutation, n: int, calls: int):
    """A compiled program of ``calls`` shuffles of ``n`` indices (keys folded from one key)."""
    def run(key):
        def body(total, i):
            return total + permutation(jax.random.fold_in(key, i), n)[0], None
        return jax.lax.scan(body, jnp.int32(0), jnp.arange(calls))[0]
    return jax.jit(run).lower(jax.random.key(0)).compile()


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 16384, 32768])
    p.add_argument("--calls", type=int, default=200, help="shuffles per timed call (default: 200)")
    p.add_argument("--rounds", type=int, default=7, help="paired rounds (default: 7)")
    args = p.parse_args(argv)
    print(f"load {os.getloadavg()[0]:.1f}; {jax.devices()[0].platform}, jax {jax.__version__}")
    ratios = {}
    for n in args.sizes:
        progs = {"jax.random.permutation": shuffles(jax.random.permutation, n, args.calls),
                 "minibatch_permutation": shuffles(minibatch_permutation, n, args.calls)}
        times = {k: [] for k in progs}
        for _ in range(args.rounds):
            for k, c in progs.items():
                jax.block_until_ready(c(jax.random.key(1)))
                t0 = time.perf_counter()
                jax.block_until_ready(c(jax.random.key(1)))
                times[k].append(time.perf_counter() - t0)
        ratios[n] = float(np.median([a / b for a, b in zip(*times.values())]))
        us = {k: np.median(v) / args.calls * 1e6 for k, v in times.items()}
        print(f"{n:>7} indices: jax.random.permutation {us['jax.random.permutation']:.0f} us, "
              f"minibatch_permutation {us['minibatch_permutation']:.0f} us, {ratios[n]:.1f}x (paired median)")
    print(f"load {os.getloadavg()[0]:.1f}")
    return ratios


if __name__ == "__main__":
    main()
