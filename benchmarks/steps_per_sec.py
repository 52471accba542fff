"""Random-policy environment steps per second, jaxenvs against what users would otherwise pick.

For each environment and batch size, in one run:

* ``jaxenvs vmap``: the plain path, ``jax.vmap(env.step)`` with one key per env per step, on
  ``jaxenvs.make(id)`` (TimeLimit + AutoReset), inside ``jit`` + ``lax.scan``;
* ``jaxenvs VectorEnv``: the batched path (`jaxenvs.VectorEnv`, one key per batch step);
* ``jaxenvs VectorEnv, reset pool``: the same with optimistic resets (``reset_pool``: one fresh
  episode per 16 envs per step, shared by the envs that finish in that step);
* ``lean JAX`` (GridWorld only): a hand-written JAX GridWorld with no API, the ceiling;
* ``python loop``: the tutorial-style numpy object env stepped in a Python loop;
* ``gymnasium SyncVectorEnv``: Gymnasium's vector env over that object env.

The turn-based games (``--envs TicTacToe-v0 ConnectFour-v0``, the ``GAME_ENVS``) are timed with
random LEGAL moves (``jaxenvs.rollout.random_policy`` reads ``obs["action_mask"]``) and auto-reset,
paired in the same rounds with:

* ``pgx``: Pgx's same game as Pgx's own speed benchmark runs it (``vmap(auto_reset(env.step,
  env.init))``, ``jax.random.categorical`` over ``log(legal_action_mask)``);
* ``pgx, same sampler``: the same with jaxenvs' random-legal sampler (one random word per env,
  `jaxenvs.rollout.batch_random_policy`'s), the baseline of the ``vs_pgx`` ratio (steps/s over
  Pgx's with the same sampler on both sides, the median of the per-round ratios) of the JAX rows;
* ``pettingzoo loop`` / ``openspiel loop``: PettingZoo's ``classic`` AEC game and OpenSpiel's
  ``pyspiel`` game played by random legal moves in a Python loop (``--python-steps`` moves, one
  game at a time, recorded at ``num_envs`` 1).

``benchmarks/results/steps_per_sec_games`` holds the committed results of the games (a run with
``--envs TicTacToe-v0 ConnectFour-v0 --num-envs 1024 4096``).

Compile time is excluded from steps/s and reported apart; every timing is the median of
``--repeats`` runs, each ending in ``block_until_ready``. The JAX programs of one env and batch
size run in turn, round after round (`time_in_turn`), and each ratio against the lean loop
is the median of the per-round ratios (`paired_ratios`), so that a slow spell of a shared
machine slows both sides of a ratio rather than one. Prints one table (``--full`` also prints each
row as it is measured) and writes a JSON file and a log-log PNG under runs/benchmarks/ (untracked)
unless ``--out`` says otherwise; the committed ``benchmarks/results/steps_per_sec`` only takes a
``--full`` run.

    python benchmarks/steps_per_sec.py                       # GridWorld and PointEnv at 1 and 4096 envs, < 1 min
    python benchmarks/steps_per_sec.py --full                # all envs, 1..16384 envs (about 6 min) -> runs/benchmarks/
    python benchmarks/steps_per_sec.py --full --out benchmarks/results/steps_per_sec   # update the committed results
    python benchmarks/steps_per_sec.py --envs GridWorld-v0 --num-envs 1 64 4096
    python benchmarks/steps_per_sec.py --envs TicTacToe-v0 ConnectFour-v0 --num-envs 1024 4096 \
        --repeats 5 --target-steps 1000000 --python-steps 5000 --out benchmarks/results/steps_per_sec_games
    python benchmarks/steps_per_sec.py --envs GridWorld-v0 --num-envs 4096 16384 --devices 1 2 4
    srun python benchmarks/steps_per_sec.py --distributed --envs GridWorld-v0 --num-envs 65536

``--distributed`` starts ``jax.distributed`` (as ``python -m jaxenvs.train --distributed`` does) and
measures the plain path over every process's devices (``--devices`` defaults to all of them);
process 0 prints and writes the results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time


def _force_cpu_devices(argv):
    """``--devices N`` on a CPU: XLA must be told before JAX starts to expose N host devices."""
    if "--devices" in argv:
        counts = []
        for a in argv[argv.index("--devices") + 1 :]:
            if not a.isdigit():
                break
            counts.append(int(a))
        flags = os.environ.get("XLA_FLAGS", "")
        if counts and "xla_force_host_platform_device_count" not in flags and os.environ.get("JAX_PLATFORMS", "cpu") == "cpu":
            os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={max(counts)}".strip()


if __name__ == "__main__":
    _force_cpu_devices(sys.argv)

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jaxenvs  # noqa: E402
from jaxenvs.sharding import env_mesh, initialize_distributed  # noqa: E402
from jaxenvs.rollout import batch_random_policy, benchmark, benchmark_program  # noqa: E402
from jaxenvs.cli.args import int_arg  # noqa: E402
from baselines import (  # noqa: E402
    GAMES,
    OBJECT_ENVS,
    make_lean_grid_world,
    make_pgx_rollout,
    openspiel_loop_steps_per_sec,
    pettingzoo_loop_steps_per_sec,
    python_loop_steps_per_sec,
    sync_vector_steps_per_sec,
)

PGX_SAME = "pgx, same sampler"  # Pgx with jaxenvs' random-legal sampler: the vs_pgx baseline
FULL_ENVS = ["GridWorld-v0", "PointEnv-v0", "HurdleRace-v0", "Lottery-v0", "RockPaperScissors-v0"]
QUICK_ENVS = ["GridWorld-v0", "PointEnv-v0"]
GAME_ENVS = list(GAMES)  # timed against Pgx, PettingZoo and OpenSpiel
GAME_NUM_ENVS = [1024, 4096]


def device_name() -> str:
    d = jax.devices()[0]
    kind = getattr(d, "device_kind", d.platform)
    if d.platform == "cpu":
        kind = f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores)"
    return f"{d.platform}: {kind} x{jax.device_count()}"




def reset_pool_for(num_envs):
    """The optimistic-reset pool the benchmark gives VectorEnv: one fresh episode per 16 envs."""
    return max(1, num_envs // 16)


def make_vector_rollout(env, num_envs, num_steps, reset_pool=None):
    """The batched path: one key per batch step (``reset_pool``: optimistic resets)."""
    venv = jaxenvs.VectorEnv(env, num_envs, reset_pool=reset_pool)
    act = batch_random_policy(env, num_envs)  # legal moves in the games

    def run(key):
        obs, state = venv.reset(key)

        def body(carry, k):
            obs, state = carry
            k_act, k_step = jax.random.split(k)
            obs, state, reward, term, trunc, info = venv.step(k_step, state, act(k_act, obs))
            return (obs, state), jnp.sum(reward)

        _, rewards = jax.lax.scan(body, (obs, state), jax.random.split(key, num_steps))
        return rewards.sum()

    return run


def time_in_turn(programs: dict, rounds: int) -> dict:
    """``{method: (compile seconds, run seconds per round)}`` for ``programs`` (``{method:
    run(key)}``), timed as ``jaxenvs.rollout.time_calls`` times one program (compiled ahead of
    time, one untimed warm-up call, each timed call waited for) but in turn: each round runs every
    program once on a fresh key, the order reversed every other round, so that a slow spell of a
    shared machine falls on all of them rather than on one."""
    compiled, compile_s = {}, {}
    for method, run in programs.items():
        t0 = time.perf_counter()
        compiled[method] = jax.jit(run).lower(jax.random.key(0)).compile()
        compile_s[method] = time.perf_counter() - t0
        jax.block_until_ready(compiled[method](jax.random.key(0)))
    times = {m: [] for m in programs}
    order = list(programs)
    for r in range(rounds):
        key = jax.random.key(r + 1)
        for method in order if r % 2 == 0 else order[::-1]:
            t0 = time.perf_counter()
            jax.block_until_ready(compiled[method](key))
            times[method].append(time.perf_counter() - t0)
    return {m: (compile_s[m], times[m]) for m in programs}


def paired_ratios(timings: dict, baseline: str) -> dict:
    """``{method: median over rounds of (baseline's time / method's time)}`` for each method of
    `time_in_turn`'s ``timings`` other than ``baseline``."""
    base = np.asarray(timings[baseline][1])
    return {m: float(np.median(base / np.asarray(t))) for m, (_, t) in timings.items() if m != baseline}


def num_steps_for(num_envs, target_steps):
    return int(max(16, min(2000, target_steps // num_envs)))


FULL_NUM_ENVS = [1, 64, 1024, 4096, 16384]
QUICK_NUM_ENVS = [1, 4096]
# the default run (well under a minute on a 2-core CPU) and the sweep of --full
QUICK = dict(envs=QUICK_ENVS, num_envs=QUICK_NUM_ENVS, repeats=3, target_steps=1_000_000, python_steps=5_000)
FULL = dict(envs=FULL_ENVS, num_envs=FULL_NUM_ENVS, repeats=5, target_steps=4_000_000, python_steps=20_000)
# the results committed with the repository (README's table): only a full run may replace them
COMMITTED = os.path.join("benchmarks", "results", "steps_per_sec")
COMMITTED_GAMES = os.path.join("benchmarks", "results", "steps_per_sec_games")  # the games' paired run
DEFAULT_OUT = os.path.join("runs", "benchmarks", "steps_per_sec")  # runs/ is gitignored
# one colour per method in every panel (the scaling rows, "jaxenvs vmap, N devices", get shades)
METHOD_COLORS = {
    "jaxenvs vmap": "tab:blue",
    "jaxenvs VectorEnv": "tab:orange",
    "lean JAX": "tab:green",
    "python loop": "tab:red",
    "gymnasium SyncVectorEnv": "tab:purple",
    "pgx": "tab:brown",
    PGX_SAME: "tab:gray",
    "pettingzoo loop": "tab:pink",
    "openspiel loop": "tab:olive",
}


_positive_int = int_arg(1)


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Defaults shown, and env ids never split at their hyphens (``GridWorld- v0``) when lines wrap."""

    def _split_lines(self, text, width):
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=_HelpFormatter)
    p.add_argument("--full", action="store_true",
                   help=f"the full sweep (about 6 minutes on a 2-core CPU): --envs {' '.join(FULL_ENVS)} --num-envs "
                   f"{' '.join(map(str, FULL_NUM_ENVS))} --repeats 5 --target-steps 4000000 --python-steps 20000, "
                   "the per-row lines as they are measured, and the only run that may replace the committed results; "
                   f"without it: --envs {' '.join(QUICK_ENVS)} --num-envs {' '.join(map(str, QUICK_NUM_ENVS))} "
                   "--repeats 3 --target-steps 1000000 --python-steps 5000 (under a minute)")
    p.add_argument("--envs", nargs="+", default=None, metavar="ID", help="registered environment ids")
    p.add_argument("--num-envs", nargs="+", type=_positive_int, default=None, metavar="N",
                   help="batch sizes (parallel environments)")
    p.add_argument("--repeats", type=_positive_int, default=None, help="timed calls per measurement; the median counts")
    p.add_argument("--target-steps", type=_positive_int, default=None,
                   help="env steps per timed call (approx.: 16 to 2000 steps per env)")
    p.add_argument("--python-steps", type=_positive_int, default=None, help="env steps per Python-loop timing")
    p.add_argument("--python-max-envs", type=_positive_int, default=1024, help="largest batch for the Python baselines")
    p.add_argument(
        "--out", default=DEFAULT_OUT, metavar="STEM",
        help=f"path stem of the results: STEM.json and STEM.png (a trailing .json is dropped); {COMMITTED} "
        "holds the committed results, which only a run with the default --envs and --num-envs may replace",
    )
    p.add_argument("--no-plot", action="store_true", help="write the JSON only")
    p.add_argument(
        "--devices", type=int, nargs="+", default=None, metavar="N",
        help="measure scaling: the plain path with the env batch split over each N devices "
        "(on a CPU, max(N) host devices are forced)",
    )
    p.add_argument(
        "--distributed", action="store_true",
        help="start jax.distributed (see python -m jaxenvs.train --help) and measure over every process's devices",
    )
    return p


def fill_defaults(args) -> None:
    """The flags not given take the default run's values (`QUICK`), or the full sweep's (`FULL`)
    with ``--full``."""
    for name, value in (FULL if args.full else QUICK).items():
        if getattr(args, name) is None:
            setattr(args, name, list(value) if isinstance(value, list) else value)


def check_out(p: argparse.ArgumentParser, args) -> str:
    """The results' path stem; a partial run may not overwrite the committed results."""
    fill_defaults(args)
    out = args.out[: -len(".json")] if args.out.endswith(".json") else args.out
    partial = not args.full or args.envs != FULL_ENVS or args.num_envs != FULL_NUM_ENVS or args.devices
    if partial and os.path.abspath(out) == os.path.abspath(COMMITTED):
        p.error(
            f"--out {args.out}: only --full (with its own --envs and --num-envs, no --devices) may replace the "
            f"committed full results; write this run elsewhere (default: {DEFAULT_OUT})"
        )
    games_run = args.envs == GAME_ENVS and args.num_envs == GAME_NUM_ENVS and not args.devices
    if not games_run and os.path.abspath(out) == os.path.abspath(COMMITTED_GAMES):
        p.error(
            f"--out {args.out}: only a run with --envs {' '.join(GAME_ENVS)} --num-envs "
            f"{' '.join(map(str, GAME_NUM_ENVS))} may replace the committed games' results"
        )
    if os.path.isdir(out) or os.path.isdir(out + ".json"):
        p.error(f"--out {args.out}: is a folder; give a path stem such as {os.path.join(out, 'steps_per_sec')}")
    return out


def main(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    args.out = check_out(p, args)
    if args.distributed:
        initialize_distributed()
        args.devices = args.devices or [jax.device_count()]
        if jax.process_index() != 0:  # every process times its share; process 0 reports
            sys.stdout = open(os.devnull, "w")
    for d in args.devices or ():
        env_mesh(d)  # a clear error when fewer devices are visible
    for env_id in args.envs:
        jaxenvs.spec(env_id)  # unknown ids fail before any timing

    dev = device_name()
    if jax.process_count() > 1:
        dev += f" in {jax.process_count()} processes"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"device: {dev}   jax {jax.__version__}   load average {load:.1f}"
          + ("" if args.full else "   (the default run; --full: the whole sweep)"), flush=True)
    rows = []
    say = print_rows if args.full else (lambda rows: None)  # the full sweep prints rows as they come
    started = time.perf_counter()

    def record(env_id, method, n, sps, compile_s=None, vs_lean=None, vs_pgx=None):
        row = {"env": env_id, "method": method, "num_envs": n, "steps_per_sec": sps, "compile_s": compile_s}
        row = row if vs_lean is None else {**row, "vs_lean": vs_lean}
        rows.append(row if vs_pgx is None else {**row, "vs_pgx": vs_pgx})

    for env_id in [e for e in args.envs if e in GAMES and not args.devices]:
        # one game at a time in Python: recorded at num_envs 1
        record(env_id, "pettingzoo loop", 1, pettingzoo_loop_steps_per_sec(env_id, args.python_steps))
        record(env_id, "openspiel loop", 1, openspiel_loop_steps_per_sec(env_id, args.python_steps))
        say([r for r in rows if r["env"] == env_id])

    for env_id in args.envs:
        env = jaxenvs.make(env_id)
        for n in args.num_envs:
            t = num_steps_for(n, args.target_steps)
            # the plain path, as users write it: vmap(env.step) with one key per env per step
            if args.devices:
                for d in args.devices:  # the env batch split over d devices
                    if n % d == 0:
                        res = benchmark(env, n, t, repeats=args.repeats, mesh=env_mesh(d))
                        record(env_id, f"jaxenvs vmap, {d} devices", n, res.steps_per_s, res.compile_s)
                say([r for r in rows if r["env"] == env_id and r["num_envs"] == n])
                continue  # --devices measures scaling only
            programs = {
                "jaxenvs vmap": benchmark_program(env, n, t),
                "jaxenvs VectorEnv": make_vector_rollout(env, n, t),
            }
            if reset_pool_for(n) > 1 and env_id not in GAMES:
                programs["jaxenvs VectorEnv, reset pool"] = make_vector_rollout(env, n, t, reset_pool_for(n))
            if env_id == "GridWorld-v0":
                programs["lean JAX"] = make_lean_grid_world(n, t)
            if env_id in GAMES:
                programs["pgx"] = make_pgx_rollout(env_id, n, t)
                programs[PGX_SAME] = make_pgx_rollout(env_id, n, t, sampler="masked_uniform")
            timings = time_in_turn(programs, args.repeats)
            ratios = paired_ratios(timings, "lean JAX") if "lean JAX" in timings else {}
            pgx_ratios = paired_ratios(timings, PGX_SAME) if PGX_SAME in timings else {}
            for method, (compile_s, times) in timings.items():
                record(env_id, method, n, n * t / float(np.median(times)), compile_s, ratios.get(method),
                       pgx_ratios.get(method))
            if env_id in OBJECT_ENVS and n <= args.python_max_envs:
                record(env_id, "python loop", n, python_loop_steps_per_sec(env_id, n, args.python_steps))
                sv = sync_vector_steps_per_sec(env_id, n, args.python_steps)
                if sv is not None:
                    record(env_id, "gymnasium SyncVectorEnv", n, sv)
            say([r for r in rows if r["env"] == env_id and r["num_envs"] == n])

    print(("\n" if args.full else "") + text_table(rows))
    print(f"{time.perf_counter() - started:.0f} s of measuring, compiles included; steps/s exclude compiling")
    if jax.process_index() != 0:
        return rows
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump({"device": dev, "jax": jax.__version__, "rows": rows}, f, indent=1)
    print(f"wrote {args.out}.json")
    if not args.no_plot:
        plot(rows, dev, args.out + ".png")
        print(f"wrote {args.out}.png")
    return rows


def print_rows(rows):
    """A line per measurement, the columns as wide as their longest entry (a method such as
    "jaxenvs VectorEnv, reset pool" no longer pushes its row's figures out of line)."""
    we = max([22, *(len(r["env"]) for r in rows)])
    wm = max([24, *(len(r["method"]) for r in rows)])
    for r in rows:
        c = f"  (compile {r['compile_s']:.2f}s)" if r["compile_s"] is not None else ""
        c += f"  {r['vs_pgx']:.2f}x Pgx (paired)" if "vs_pgx" in r else ""
        print(f"{r['env']:<{we}} {r['method']:<{wm}} {r['num_envs']:>6} envs {r['steps_per_sec']:>16,.0f} steps/s{c}")


def _si(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.0f}k" if x >= 1e3 else f"{x:.0f}"


def text_table(rows) -> str:
    """One table for the terminal: a line per (env, num_envs), a column per method (steps/s), and
    the paired ratio against the lean loop or Pgx in brackets where the row has one."""
    order = ["jaxenvs vmap", "jaxenvs VectorEnv", "jaxenvs VectorEnv, reset pool", "lean JAX", "pgx", PGX_SAME]
    methods = sorted(dict.fromkeys(r["method"] for r in rows), key=lambda m: order.index(m) if m in order else len(order))
    cells: dict = {}
    for r in rows:
        ratio = r.get("vs_lean", r.get("vs_pgx"))
        cells.setdefault((r["env"], r["num_envs"]), {})[r["method"]] = _si(r["steps_per_sec"]) + (
            f" ({ratio:.2f}x)" if ratio is not None else "")
    header = ["env", "envs", *methods]
    body = [[env, str(n), *[c.get(m, "-") for m in methods]] for (env, n), c in cells.items()]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    fmt = lambda line: "  ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(line, widths)))  # noqa: E731
    note = ("steps/s of a random policy" + ("; (Nx): the paired ratio against lean JAX" if any("vs_lean" in r for r in rows) else "")
            + ("; against Pgx with the same sampler" if any("vs_pgx" in r for r in rows) else ""))
    return "\n".join([note, fmt(header), *(fmt(line) for line in body)])


def summary(rows) -> str:
    """A markdown table: steps/s per (env, num_envs) and ratios against the lean ceiling at the
    same batch size (the paired ratio of `paired_ratios` where the row has one) and the
    Python loop."""
    lines = [
        "| env | num_envs | method | steps/s | vs lean JAX | vs python loop |",
        "|---|---:|---|---:|---:|---:|",
    ]
    if any("vs_pgx" in r for r in rows):  # the games: paired ratios against Pgx
        lines[0] += " vs Pgx |"
        lines[1] += "---:|"
    index = {(r["env"], r["method"], r["num_envs"]): r["steps_per_sec"] for r in rows}
    for r in rows:
        lean = index.get(("GridWorld-v0", "lean JAX", r["num_envs"])) if r["env"] == "GridWorld-v0" else None
        # the Python loop's per-step cost does not depend on the batch: beyond the largest batch
        # it ran at, compare with that one
        py_ns = [n for (e, m, n) in index if e == r["env"] and m == "python loop" and n <= r["num_envs"]]
        py = index.get((r["env"], "python loop", max(py_ns))) if py_ns else None
        f = lambda base: f"{r['steps_per_sec'] / base:.2f}x" if base else "-"  # noqa: E731
        vs_lean = f"{r['vs_lean']:.2f}x" if "vs_lean" in r else f(lean)
        line = f"| {r['env']} | {r['num_envs']} | {r['method']} | {r['steps_per_sec']:,.0f} | {vs_lean} | {f(py)} |"
        if lines[1].count("|") == 8:
            line += f" {r['vs_pgx']:.2f}x |" if "vs_pgx" in r else " - |"
        lines.append(line)
    return "\n".join(lines)


def plot(rows, dev, path=None):
    """The log-log figure of steps/s against num_envs, one panel per env, saved at ``path``
    (not saved when None); returns the figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = sorted({r["env"] for r in rows})
    colors = method_colors([r["method"] for r in rows])
    fig, axes = plt.subplots(1, len(envs), figsize=(4.5 * len(envs), 4.4), squeeze=False)
    for ax, env_id in zip(axes[0], envs):
        for method in colors:
            pts = sorted((r["num_envs"], r["steps_per_sec"]) for r in rows if r["env"] == env_id and r["method"] == method)
            if pts:
                ax.plot(*zip(*pts), marker="o", label=method, color=colors[method])
        ax.set(xscale="log", yscale="log", title=env_id, xlabel="num_envs", ylabel="steps/s")
        ax.grid(True, which="both", alpha=0.3)
    # one legend for the figure: a method has the same colour in every panel
    handles = {h.get_label(): h for ax in axes[0] for h in ax.get_lines()}
    fig.legend([handles[m] for m in colors if m in handles], [m for m in colors if m in handles],
               loc="lower center", ncol=min(len(handles), 5), fontsize=8, frameon=False)
    fig.suptitle(f"random-policy steps/s — {dev}")
    if path is not None:
        fig.tight_layout(rect=(0, 0.08, 1, 1))
        fig.savefig(path, dpi=110)
    plt.close(fig)
    return fig


def method_colors(methods) -> dict:
    """``{method: colour}`` for the methods in ``methods`` (first-seen order): the fixed colours of
    `METHOD_COLORS`, and shades of blue for the scaling rows by device count."""
    import matplotlib

    methods = list(dict.fromkeys(methods))
    scaling = sorted((m for m in methods if m not in METHOD_COLORS), key=lambda m: (len(m), m))
    shades = matplotlib.colormaps["Blues"]
    out = {}
    for m in methods:
        if m in METHOD_COLORS:
            out[m] = METHOD_COLORS[m]
        else:
            out[m] = matplotlib.colors.to_hex(shades(0.4 + 0.6 * scaling.index(m) / max(len(scaling) - 1, 1)))
    return out


if __name__ == "__main__":
    main()
