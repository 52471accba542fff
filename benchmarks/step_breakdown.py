"""Where an environment step goes: the plain path taken apart, one cost at a time, against a floor.

For one env and batch size, random actions (legal ones in the games), ``jit`` + ``lax.scan``, the
programs below run in turn round after round in one process (`steps_per_sec.time_in_turn`),
each ratio the median of the per-round ratios against the floor (`steps_per_sec.paired_ratios`).
Each row removes one more cost from the row above it, so the difference between consecutive rows
is what that cost takes:

1. ``vmap(env.step)``: the plain path on ``make(id)`` (TimeLimit + AutoReset) with a per-env
   policy (``jax.vmap(random_policy(env))``): one action key and one step key per env per step
   (two ``jax.random.split(key, num_envs)``), a full reset drawn for every env on every step;
2. ``- action keys``: the actions drawn for the whole batch at once (`batch_random_policy`: one
   draw, no per-env split), as `jaxenvs.rollout.benchmark_program` (``jaxenvs bench``) draws them;
3. ``- step keys``: `jaxenvs.VectorEnv` with ``reset_capacity=num_envs``: one key per batch step
   (no per-env split when the stack's step draws nothing), still a reset per env per step;
4. ``- reset per env``: `jaxenvs.VectorEnv` as it comes: fresh draws for the finished envs only
   (exact in distribution; the module docstring of `jaxenvs.vector`);
5. ``- TimeLimit``: the same without the time limit (episodes end only by termination);
6. ``- info``: the same with the env's own ``info`` entries dropped (``final_obs``, which the
   auto-reset rule adds, stays; XLA drops what nobody reads, so this row mostly measures noise
   unless an entry costs work that feeds the state);
7. ``floor``: GridWorld only, the lean hand-written loop of ``baselines.make_lean_grid_world``
   (no API: plain int32 arrays, one random word per env per step for action and reset alike).
   What remains between rows 6 and 7 is the observation dict, dtype conversions, the API's
   checks (trace time only) and the step itself.

Every row runs under each PRNG implementation given (``--prng-impl``: JAX's ``threefry2x32``,
the default, and ``rbg`` / ``unsafe_rbg``, see docs/guides/performance.md for their caveats), the
floor included, all in the same rounds. Writes STEM.json and STEM.md (default
``benchmarks/results/step_breakdown``):

    python benchmarks/step_breakdown.py                      # GridWorld, HurdleRace, TicTacToe at 4,096 envs
    python benchmarks/step_breakdown.py --envs GridWorld-v0 --num-envs 1024 --prng-impl threefry2x32
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jaxenvs  # noqa: E402
from jaxenvs.rollout import batch_random_policy, benchmark_program, random_policy  # noqa: E402
from jaxenvs.wrappers.base import TimeLimit, Wrapper, strip_autoreset  # noqa: E402
from baselines import make_lean_grid_world  # noqa: E402
from steps_per_sec import device_name, num_steps_for  # noqa: E402

DEFAULT_ENVS = ["GridWorld-v0", "HurdleRace-v0", "TicTacToe-v0"]
IMPLS = ["threefry2x32", "rbg", "unsafe_rbg"]
OUT = os.path.join("benchmarks", "results", "step_breakdown")


class _NoInfo(Wrapper):
    """The wrapped env with ``info`` emptied (a probe of what the info dict costs)."""

    def step_env(self, key, state, action, params):
        return (*self.env.step_env(key, state, action, params)[:5], {})


def _vmap_batch_actions(env, num_envs, num_steps):
    """Row 2: ``vmap(env.step)`` with one step key per env, actions drawn for the batch."""
    act = batch_random_policy(env, num_envs)
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    params = env.default_params

    def run(key):
        k0, k1 = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(k0, num_envs), params)

        def body(c, k):
            obs, state, total = c
            k_act, k_step = jax.random.split(k)
            obs, state, r, *_ = step(jax.random.split(k_step, num_envs), state, act(k_act, obs), params)
            return (obs, state, total + jnp.sum(r)), None

        (_, _, total), _ = jax.lax.scan(body, (obs, state, jnp.zeros((), jnp.float32)), jax.random.split(k1, num_steps))
        return total

    return run


def _vector(env, num_envs, num_steps, **kwargs):
    """Rows 3-6: `jaxenvs.VectorEnv` over ``env``, actions drawn for the batch."""
    venv = jaxenvs.VectorEnv(env, num_envs, **kwargs)
    act = batch_random_policy(env, num_envs)

    def run(key):
        k0, k1 = jax.random.split(key)
        obs, state = venv.reset(k0)

        def body(c, k):
            obs, state, total = c
            k_act, k_step = jax.random.split(k)
            obs, state, r, *_ = venv.step(k_step, state, act(k_act, obs))
            return (obs, state, total + jnp.sum(r)), None

        (_, _, total), _ = jax.lax.scan(body, (obs, state, jnp.zeros((), jnp.float32)), jax.random.split(k1, num_steps))
        return total

    return run


def _without_time_limit(env):
    """``env`` (from ``make``) with its AutoReset and TimeLimit taken off (other wrappers kept)."""
    inner = strip_autoreset(env)
    if isinstance(inner, TimeLimit):
        return inner.env
    return inner


def ladder(env_id: str, num_envs: int, num_steps: int) -> dict:
    """``{row name: run(key)}`` in the order of the module docstring."""
    env = jaxenvs.make(env_id)
    bare = _without_time_limit(env)
    rows = {
        "vmap(env.step)": benchmark_program(env, num_envs, num_steps, policy=random_policy(env)),
        "- action keys": _vmap_batch_actions(env, num_envs, num_steps),
        "- step keys": _vector(env, num_envs, num_steps, reset_capacity=num_envs),
        "- reset per env": _vector(env, num_envs, num_steps),
        "- TimeLimit": _vector(jaxenvs.wrappers.AutoReset(bare), num_envs, num_steps),
        "- info": _vector(jaxenvs.wrappers.AutoReset(_NoInfo(bare)), num_envs, num_steps),
    }
    if env_id == "GridWorld-v0":
        rows["floor (lean loop)"] = make_lean_grid_world(num_envs, num_steps)
    return rows


def time_rounds(programs: dict, rounds: int) -> dict:
    """``{(impl, row): [seconds per round]}``: programs keyed ``(impl, row)`` with ``run(key)``, each
    compiled once for its impl's keys, then run in turn (the order reversed every other round)."""
    import time

    compiled = {}
    for (impl, row), run in programs.items():
        key = jax.random.key(0, impl=impl)
        compiled[impl, row] = jax.jit(run).lower(key).compile()
        jax.block_until_ready(compiled[impl, row](key))
    times = {k: [] for k in programs}
    order = list(programs)
    for r in range(rounds):
        for k in order if r % 2 == 0 else order[::-1]:
            key = jax.random.key(r + 1, impl=k[0])
            t0 = time.perf_counter()
            jax.block_until_ready(compiled[k](key))
            times[k].append(time.perf_counter() - t0)
    return times


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", nargs="+", default=DEFAULT_ENVS, metavar="ID")
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--repeats", type=int, default=7, help="rounds; medians count")
    p.add_argument("--target-steps", type=int, default=1_000_000, help="env steps per timed call")
    p.add_argument("--prng-impl", nargs="+", default=IMPLS, choices=IMPLS)
    p.add_argument("--out", default=OUT, metavar="STEM", help="writes STEM.json and STEM.md")
    args = p.parse_args(argv)
    n, t = args.num_envs, num_steps_for(args.num_envs, args.target_steps)
    dev = device_name()
    print(f"device: {dev}   jax {jax.__version__}   {n} envs x {t} steps per call")
    results = []
    for env_id in args.envs:
        rows = ladder(env_id, n, t)
        programs = {(impl, row): run for impl in args.prng_impl for row, run in rows.items()}
        load = os.getloadavg()[0]
        times = time_rounds(programs, args.repeats)
        floor_row = "floor (lean loop)" if "floor (lean loop)" in rows else "vmap(env.step)"
        base = np.asarray(times[args.prng_impl[0], floor_row])
        load = (load + os.getloadavg()[0]) / 2
        for (impl, row), ts in times.items():
            results.append({
                "env": env_id, "num_envs": n, "prng_impl": impl, "row": row,
                "steps_per_sec": n * t / float(np.median(ts)),
                "vs_floor": float(np.median(base / np.asarray(ts))),
                "floor": f"{floor_row}, {args.prng_impl[0]}", "load": round(load, 2),
            })
        print(table([r for r in results if r["env"] == env_id]))
    md = f"device: {dev}, jax {jax.__version__}, {n} envs, medians of {args.repeats} paired rounds\n\n"
    md += "\n\n".join(table([r for r in results if r["env"] == e]) for e in args.envs) + "\n"
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump({"device": dev, "jax": jax.__version__, "rows": results}, f, indent=1)
    with open(args.out + ".md", "w") as f:
        f.write(md)
    print(f"wrote {args.out}.json and {args.out}.md")
    return results


def table(rows) -> str:
    """A markdown table, one line per ladder row, one column pair per PRNG implementation."""
    impls = list(dict.fromkeys(r["prng_impl"] for r in rows))
    names = list(dict.fromkeys(r["row"] for r in rows))
    cell = {(r["prng_impl"], r["row"]): r for r in rows}
    r0 = rows[0]
    head = f"**{r0['env']}** at {r0['num_envs']:,} envs (ratios: paired, against {r0['floor']}; load {r0['load']})\n\n"
    head += "| row | " + " | ".join(f"{i} steps/s | {i} ratio" for i in impls) + " |\n"
    head += "|---|" + "---:|---:|" * len(impls) + "\n"
    lines = []
    for name in names:
        cells = " | ".join(f"{cell[i, name]['steps_per_sec']:,.0f} | {cell[i, name]['vs_floor']:.2f}" for i in impls)
        lines.append(f"| {name} | {cells} |")
    return head + "\n".join(lines)


if __name__ == "__main__":
    main()
