"""Connect Four's game core against an earlier revision: the same compiled programs, the same speed.

The env (`jaxenvs.envs.connect_four`) and the players and look-ahead (`jaxenvs.games.connect_four`)
share one pure core. This script loads both modules as they were at ``--before`` (``git show``)
beside the current ones and, in one process:

* compares the optimised XLA programs (HLO with value names, metadata and source locations
  stripped) of the batched step (plain and under ``AutoReset``), the look-ahead at depths 1, 2, 4
  and three players, old against new; two controls (depth 1 against 2, the step against one
  without its win test) show the comparison can tell programs apart;
* times the same pairs in alternating rounds (CPU seconds, the median of the per-round ratios):
  random legal play of ``--num-envs`` envs for ``--steps`` steps, and the look-ahead's moves on
  256 positions of random play.

    python benchmarks/connect_four_core.py --before ad4c4e0
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def old_module(rev: str, path: str, name: str, folder: Path):
    """The module ``path`` as it was at ``rev``, loaded as ``name`` (relative imports made absolute)."""
    text = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    text = re.sub(r"^from \.(\w+) import", r"from jaxenvs.games.\1 import", text, flags=re.M)
    file = folder / f"{name}.py"
    file.write_text(text)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def program_text(fn, *args) -> str:
    """``fn``'s optimised HLO without the names, metadata and source tables that differ between files."""
    text = jax.jit(fn).lower(*args).compile().as_text()
    text = "\n\n".join(p for p in text.split("\n\n") if not p.startswith(TABLES))
    text = re.sub(r", (metadata=\{[^}]*\}|stack_frame_id=\d+)", "", text)
    text = re.sub(r"^HloModule.*$", "", text, flags=re.M)
    return re.sub(r"%[\w.\-]+", "%v", text)


def same(f_old, f_new, *args) -> str:
    a, b = program_text(f_old, *args), program_text(f_new, *args)
    return "the same program" if a == b else f"different programs ({len(a):,} and {len(b):,} characters)"


def play(env, n: int, steps: int):
    def run(key):
        k0, k1 = jax.random.split(key)
        obs, state = jax.vmap(env.reset)(jax.random.split(k0, n))

        def body(carry, k):
            obs, state = carry
            ka, ks = jax.random.split(k)
            action = jax.random.categorical(ka, jnp.where(obs["action_mask"] != 0, 0.0, -jnp.inf)).astype(jnp.int32)
            obs, state, reward, *_ = jax.vmap(env.step)(jax.random.split(ks, n), state, action)
            return (obs, state), jnp.sum(reward[:, 0])

        return jnp.sum(jax.lax.scan(body, (obs, state), jax.random.split(k1, steps))[1])

    return jax.jit(run)


def paired(label: str, f_old, f_new, arg, work: int, rounds: int) -> None:
    for f in (f_old, f_new):
        jax.block_until_ready(f(arg))  # compiled before timing
    times = {f_old: [], f_new: []}
    for r in range(rounds):
        for f in ((f_old, f_new) if r % 2 == 0 else (f_new, f_old)):
            t = time.process_time()
            jax.block_until_ready(f(arg))
            times[f].append(time.process_time() - t)
    ratios = np.array(times[f_old]) / np.array(times[f_new])
    print(f"{label}: before {work / np.median(times[f_old]):,.0f}, after {work / np.median(times[f_new]):,.0f} per CPU s; "
          f"after/before speed {np.median(ratios):.3f} (median of {rounds} rounds, {ratios.min():.2f}-{ratios.max():.2f})")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True, help="the git revision to compare with (e.g. ad4c4e0)")
    p.add_argument("--num-envs", type=int, default=1024)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)

    from jaxenvs.envs.connect_four import ConnectFour
    from jaxenvs.games import connect_four as players
    from jaxenvs.wrappers.base import AutoReset

    with tempfile.TemporaryDirectory() as folder:
        old_players = old_module(args.before, "jaxenvs/games/connect_four.py", "connect_four_players_before", Path(folder))
        old_env = old_module(args.before, "jaxenvs/envs/connect_four.py", "connect_four_env_before", Path(folder))
    n = args.num_envs
    _, state = jax.vmap(ConnectFour().reset)(jax.random.split(jax.random.key(0), n))
    step_args = (jax.random.key(0), state, jnp.zeros((n, 2), jnp.int32))

    def step_of(env):
        return lambda key, state, action: jax.vmap(env.step)(jax.random.split(key, n), state, action)

    print(f"env step, {n} envs:", same(step_of(old_env.ConnectFour()), step_of(ConnectFour()), *step_args))
    print(f"env step under AutoReset, {n} envs:",
          same(step_of(AutoReset(old_env.ConnectFour())), step_of(AutoReset(ConnectFour())), *step_args))
    obs = {"observation": jnp.zeros((256, 6, 7, 2), jnp.int32), "action_mask": jnp.ones((256, 7), jnp.uint8)}
    for depth in (1, 2, 4):
        print(f"look-ahead depth {depth}:", same(jax.vmap(lambda o, d=depth: old_players.lookahead_values(o, d)),
                                              jax.vmap(lambda o, d=depth: players.lookahead_values(o, d)), obs))
    keys = jax.random.split(jax.random.key(0), 256)
    for name in ("heuristic", "win_block", "no_blunder"):
        print(f"player {name}:", same(jax.vmap(getattr(old_players, name)), jax.vmap(getattr(players, name)), keys, obs))
    print("control, look-ahead depth 1 against 2:", same(jax.vmap(lambda o: players.lookahead_values(o, 1)),
                                                       jax.vmap(lambda o: players.lookahead_values(o, 2)), obs))

    class NoWinTest(ConnectFour):
        def step_env(self, key, state, action, params):
            obs, state, reward, terminated, truncated, info = super().step_env(key, state, action, params)
            return obs, state, reward * 0, terminated, truncated, info

    print("control, the step against one without rewards:", same(step_of(ConnectFour()), step_of(NoWinTest()), *step_args))

    key = jax.random.key(1)
    before, after = play(AutoReset(old_env.ConnectFour()), n, args.steps), play(AutoReset(ConnectFour()), n, args.steps)
    assert float(before(key)) == float(after(key))  # the same games
    paired(f"random legal play, {n} envs x {args.steps} steps (env steps)", before, after, key, n * args.steps,
           args.rounds)
    start = AutoReset(ConnectFour())
    obs, state = jax.vmap(start.reset)(jax.random.split(key, 256))
    for _ in range(12):  # positions of random play
        key, ka, ks = jax.random.split(key, 3)
        action = jax.random.categorical(ka, jnp.where(obs["action_mask"] != 0, 0.0, -jnp.inf)).astype(jnp.int32)
        obs, state, *_ = jax.vmap(start.step)(jax.random.split(ks, 256), state, action)
    mover = np.asarray(state.current_player)
    positions = {k: np.asarray(v)[np.arange(256), mover] for k, v in obs.items()}
    for depth in (2, 4):
        f_old = jax.jit(jax.vmap(lambda o, d=depth: old_players.lookahead_values(o, d)))
        f_new = jax.jit(jax.vmap(lambda o, d=depth: players.lookahead_values(o, d)))
        np.testing.assert_array_equal(np.asarray(f_old(positions)), np.asarray(f_new(positions)))
        paired(f"look-ahead depth {depth}, 256 positions (moves)", f_old, f_new, positions, 256, args.rounds)


if __name__ == "__main__":
    main()
