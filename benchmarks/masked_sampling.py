"""Where the time of a random-legal board-game rollout goes: the random-legal sampling before and
after its two changes, paired in the same rounds with Pgx (see steps_per_sec.py).

* ``before``: the former ``random_policy``, one ``jax.random.randint`` draw per agent row
  (both rows of a two-agent game, the non-mover's from the whole space);
* ``one row``: one draw among the mover's legal actions, put in every row (``random_policy`` now),
  still with ``jax.random.randint``;
* ``after``: ``random_policy`` as it is (one row, one 32-bit word per draw: ``Discrete.sample``'s
  multiply-shift);
* ``no sampling``: the first legal action, no randomness (the ceiling of the env and the loop).

    python benchmarks/masked_sampling.py --num-envs 1024 4096 --repeats 5
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
from baselines import GAMES, make_pgx_rollout  # noqa: E402
from jaxenvs.rollout import benchmark_program  # noqa: E402
from steps_per_sec import num_steps_for, paired_ratios, time_in_turn  # noqa: E402


def randint_uniform(key, shape, mask):
    """The former masked draw: ``jax.random.randint`` for the index of the legal action."""
    n = mask.shape[-1]
    count = jnp.sum(mask, axis=-1, dtype=jnp.int32)
    mask = jnp.where((count > 0)[..., None], mask, True)
    count = jnp.where(count > 0, count, n)
    k = jax.random.randint(key, shape, 0, count, dtype=jnp.int32)
    return jnp.argmax(jnp.cumsum(mask, axis=-1, dtype=jnp.int32) > k[..., None], axis=-1).astype(jnp.int32)


def policies(env):
    n_agents = env.num_agents

    def before(key, obs):
        return randint_uniform(key, (n_agents,), obs["action_mask"] != 0)

    def one_row(key, obs):
        movers = jnp.any(obs["action_mask"] != 0, axis=0)
        return jnp.broadcast_to(randint_uniform(key, (), movers), (n_agents,))

    def no_sampling(key, obs):
        movers = jnp.any(obs["action_mask"] != 0, axis=0)
        return jnp.broadcast_to(jnp.argmax(movers).astype(jnp.int32), (n_agents,))

    return {"before": before, "one row": one_row, "after": None, "no sampling": no_sampling}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--envs", nargs="+", default=list(GAMES), help="turn-based game ids")
    p.add_argument("--num-envs", nargs="+", type=int, default=[1024, 4096], help="batch sizes")
    p.add_argument("--repeats", type=int, default=5, help="paired rounds")
    p.add_argument("--target-steps", type=int, default=1_000_000, help="env steps per timed call")
    args = p.parse_args(argv)
    print(f"{'env':<16} {'num_envs':>8} {'policy':<12} {'steps/s':>12} {'vs Pgx':>8}")
    for env_id in args.envs:
        env = jaxenvs.make(env_id)
        for n in args.num_envs:
            t = num_steps_for(n, args.target_steps)
            programs = {name: benchmark_program(env, n, t, policy=pol) for name, pol in policies(env).items()}
            programs["pgx"] = make_pgx_rollout(env_id, n, t)
            timings = time_in_turn(programs, args.repeats)
            ratios = paired_ratios(timings, "pgx")
            for name, (_, times) in timings.items():
                vs = f"{ratios[name]:.2f}x" if name in ratios else "-"
                print(f"{env_id:<16} {n:>8} {name:<12} {n * t / float(np.median(times)):>12,.0f} {vs:>8}")


if __name__ == "__main__":
    main()
