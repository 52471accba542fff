"""Measured false-alarm rate and power of `jaxenvs.testing.verify_port`.

Faithful ports of Gymnasium's FrozenLake-v1 (4x4, slippery) and CliffWalking-v1 (with a
TimeLimit of 100 on both sides), and jaxenvs' PointEnv against a plain-numpy PointEnv written as
garage's tutorial does (tests/reference_envs.py), are verified with `--seeds` seeds each at the
documented defaults (alpha=1e-3, detect=0.02, power=0.95): the false-alarm rate must stay within
binomial error of alpha. Then a ladder of mutants -- each a port with one planted bug -- is
verified with `--mutant-seeds` seeds each; for each the table says how often it was caught,
inconclusive or passed, and the episodes used. No mutant whose effect reaches `detect` may pass.

    python benchmarks/verify_power.py                       # 50 seeds, the full ladder
    python benchmarks/verify_power.py --seeds 5 --mutant-seeds 2 --out /tmp/quick
    python benchmarks/verify_power.py --only corridor --busy 2   # with two CPU-bound processes beside it

`--busy N` starts N CPU-bound processes beside the study (ended with it): verify_port's budget
counts this process's CPU seconds, so the verdicts and episode counts should match a quiet run's.
Each row records the CPU seconds and the wall seconds a run took, and the result the machine's
load averages before and after.

Writes `benchmarks/results/verify_power.json` and `.md` (the table the docs show).
The ports are written the way a user would port each environment (never derived from the
reference's table); tests/test_verify_port.py imports them from here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxenvs
from jaxenvs import spaces, struct
from jaxenvs.core import Environment, Traits
from jaxenvs.wrappers import TimeLimit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------------------------------------
# FrozenLake-v1 (4x4), ported
# ---------------------------------------------------------------------------------------------

FROZEN_MAP = ("SFFF", "FHFH", "FFFH", "HFFG")


@struct.dataclass
class FrozenParams:
    slip: float = 1.0 / 3.0  # probability of sliding to each side of the intended direction
    goal_reward: float = 1.0
    start_shift: float = 0.0  # probability of starting on the cell below the start


@struct.dataclass
class FrozenState:
    pos: jax.Array  # int32 scalar: row * 4 + col


class FrozenLake(Environment):
    """Gymnasium's FrozenLake-v1 on the 4x4 map, slippery: the agent moves in the intended
    direction, or slides to either side of it with probability `slip` each; stepping onto a
    hole or the goal ends the episode, the goal pays `goal_reward`. Actions 0 left, 1 down,
    2 right, 3 up; the observation is the cell `row * 4 + col` (int32)."""

    traits = Traits(num_agents=1, chance="stochastic", information="perfect", reward_style="terminal")

    def __init__(self):
        desc = np.array([list(r) for r in FROZEN_MAP])
        self.hole = jnp.asarray((desc == "H").ravel())
        self.goal = jnp.asarray((desc == "G").ravel())

    @property
    def default_params(self):
        return FrozenParams()

    def reset_env(self, key, params):
        pos = jnp.where(jax.random.uniform(key) < params.start_shift, 4, 0).astype(jnp.int32)
        return pos, FrozenState(pos)

    def step_env(self, key, state, action, params):
        u = jax.random.uniform(key)
        direction = jnp.where(u < params.slip, (action - 1) % 4, jnp.where(u < 1 - params.slip, action, (action + 1) % 4))
        row, col = state.pos // 4, state.pos % 4
        row = jnp.clip(row + jnp.array([0, 1, 0, -1])[direction], 0, 3)
        col = jnp.clip(col + jnp.array([-1, 0, 1, 0])[direction], 0, 3)
        pos = (row * 4 + col).astype(jnp.int32)
        terminated = self.hole[pos] | self.goal[pos]
        reward = jnp.where(self.goal[pos], params.goal_reward, 0.0).astype(jnp.float32)
        return pos, FrozenState(pos), reward, terminated, jnp.zeros((), bool), {}

    def observation_space(self, params=None):
        return spaces.Discrete(16)

    def action_space(self, params=None):
        return spaces.Discrete(4)


def frozen_lake(**params):
    """The port in a TimeLimit of 100 (FrozenLake-v1's), with params changed by `params` (mutants)."""
    env = FrozenLake() if not params else jaxenvs.wrappers.WithParams(FrozenLake(), FrozenParams(**params))
    return TimeLimit(env, 100)


def frozen_reference():
    import gymnasium

    return gymnasium.make("FrozenLake-v1", is_slippery=True)


# ---------------------------------------------------------------------------------------------
# CliffWalking-v1, ported
# ---------------------------------------------------------------------------------------------


@struct.dataclass
class CliffParams:
    last_col: int = 11  # the right edge
    start: int = 36


@struct.dataclass
class CliffState:
    pos: jax.Array  # int32 scalar: row * 12 + col


class CliffWalking(Environment):
    """Gymnasium's CliffWalking-v1 (not slippery): a 4 x 12 grid, start at the bottom left (36),
    goal at the bottom right (47), the cells between them a cliff that sends the agent back to
    the start with reward -100 (the episode goes on); every other step costs 1, reaching the goal
    ends the episode. Actions 0 up, 1 right, 2 down, 3 left."""

    traits = Traits(num_agents=1, chance="deterministic", information="perfect", reward_style="step")

    @property
    def default_params(self):
        return CliffParams()

    def reset_env(self, key, params):
        pos = jnp.asarray(params.start, jnp.int32)
        return pos, CliffState(pos)

    def step_env(self, key, state, action, params):
        row = jnp.clip(state.pos // 12 + jnp.array([-1, 0, 1, 0])[action], 0, 3)
        col = jnp.clip(state.pos % 12 + jnp.array([0, 1, 0, -1])[action], 0, params.last_col)
        pos = (row * 12 + col).astype(jnp.int32)
        cliff = (row == 3) & (col >= 1) & (col <= 10)
        pos = jnp.where(cliff, jnp.int32(36), pos)
        reward = jnp.where(cliff, -100.0, -1.0).astype(jnp.float32)
        terminated = pos == 47
        return pos, CliffState(pos), reward, terminated, jnp.zeros((), bool), {}

    def observation_space(self, params=None):
        return spaces.Discrete(48)

    def action_space(self, params=None):
        return spaces.Discrete(4)


def cliff_walking(**params):
    env = CliffWalking() if not params else jaxenvs.wrappers.WithParams(CliffWalking(), CliffParams(**params))
    return TimeLimit(env, 100)


def cliff_reference():
    import gymnasium

    return gymnasium.make("CliffWalking-v1", max_episode_steps=100)


# ---------------------------------------------------------------------------------------------
# PointEnv against garage's tutorial in numpy
# ---------------------------------------------------------------------------------------------


def point_env(mutant=None, amount=None):
    """jaxenvs' PointEnv in a TimeLimit of 100, or a mutant: `"scale"` multiplies each action by
    `amount` before the step, `"shift"` moves the initial x by `amount`."""
    from jaxenvs.envs.point_env import PointEnv

    class ScaledAction(PointEnv):
        def step_env(self, key, state, action, params):
            return super().step_env(key, state, action * amount, params)

    class ShiftedStart(PointEnv):
        def reset_env(self, key, params):
            _, state = super().reset_env(key, params)
            state = state.replace(position=state.position + jnp.array([amount, 0.0], jnp.float32))
            return state.position, state

    env = {None: PointEnv, "scale": ScaledAction, "shift": ShiftedStart}[mutant]()
    return TimeLimit(env, 100)


# ---------------------------------------------------------------------------------------------
# A slippery corridor (no transition table) against tests/reference_envs.py's Gymnasium env
# ---------------------------------------------------------------------------------------------


@struct.dataclass
class CorridorParams:
    slip: float = 0.2  # probability that a move goes the other way
    step_cost: float = 0.1
    start_shift: float = 0.0  # probability of starting in cell 2 instead of 3
    bug_cell: int = -1  # a local bug: in this cell ...
    bug_slip: float = 0.2  # ... the slip probability is this


@struct.dataclass
class CorridorState:
    pos: jax.Array  # int32 scalar


class Corridor(Environment):
    """tests/reference_envs.py's SlipperyCorridorEnv ported: 7 cells, start in 3, actions 0 left
    and 1 right, a move goes the other way with probability `slip`, each step costs `step_cost`,
    cell 6 pays 1, cells 0 and 6 end the episode."""

    traits = Traits(num_agents=1, chance="stochastic", information="perfect", reward_style="step")

    @property
    def default_params(self):
        return CorridorParams()

    def reset_env(self, key, params):
        pos = jnp.where(jax.random.uniform(key) < params.start_shift, 2, 3).astype(jnp.int32)
        return pos, CorridorState(pos)

    def step_env(self, key, state, action, params):
        slip = jnp.where(state.pos == params.bug_cell, params.bug_slip, params.slip)
        move = jnp.where(action == 1, 1, -1)
        move = jnp.where(jax.random.uniform(key) < slip, -move, move)
        pos = (state.pos + move).astype(jnp.int32)
        terminated = (pos == 0) | (pos == 6)
        reward = (-params.step_cost + jnp.where(pos == 6, 1.0, 0.0)).astype(jnp.float32)
        return pos, CorridorState(pos), reward, terminated, jnp.zeros((), bool), {}

    def observation_space(self, params=None):
        return spaces.Discrete(7)

    def action_space(self, params=None):
        return spaces.Discrete(2)


def corridor(**params):
    """The port in a TimeLimit of 50 (the reference's), with params changed by `params` (mutants)."""
    env = Corridor() if not params else jaxenvs.wrappers.WithParams(Corridor(), CorridorParams(**params))
    return TimeLimit(env, 50)


def corridor_reference():
    return _reference_envs().make_corridor()


_AA_PORT = []  # one port object behind every adapter: its compiled programs are shared


def corridor_as_gymnasium():
    """The corridor port as a Gymnasium env (jaxenvs' adapter): the reference of the A/A rows
    (a fresh adapter on each call, around one port object)."""
    from jaxenvs.adapters.gymnasium import GymnasiumEnv

    if not _AA_PORT:
        _AA_PORT.append(corridor())
    return GymnasiumEnv(_AA_PORT[0])


def corridor_state(ref):
    """state_to_jax for the corridor: the reference's cell."""
    return CorridorState(np.int32(ref.unwrapped.pos))


@struct.dataclass
class DriftState:
    x: jax.Array  # float32 scalar


class NoisyDrift(Environment):
    """A small continuous stochastic env for the A/A rows: x starts uniform in [-1, 1]; an action
    a in [-0.2, 0.2] moves it to x + a + N(0, 0.1^2); reward -|x|; the episode ends when |x| < 0.05
    or |x| > 2 (and at the TimeLimit of 20)."""

    traits = Traits(num_agents=1, chance="stochastic", information="perfect", reward_style="step")

    @property
    def default_params(self):
        return None

    def reset_env(self, key, params):
        x = jax.random.uniform(key, (), jnp.float32, -1.0, 1.0)
        return x[None], DriftState(x)

    def step_env(self, key, state, action, params):
        x = (state.x + jnp.clip(action[0], -0.2, 0.2) + 0.1 * jax.random.normal(key, (), jnp.float32)).astype(jnp.float32)
        terminated = (jnp.abs(x) < 0.05) | (jnp.abs(x) > 2.0)
        return x[None], DriftState(x), -jnp.abs(x), terminated, jnp.zeros((), bool), {}

    def observation_space(self, params=None):
        return spaces.Box(-jnp.inf, jnp.inf, (1,), jnp.float32)

    def action_space(self, params=None):
        return spaces.Box(-0.2, 0.2, (1,), jnp.float32)


_AA_DRIFT = []


def noisy_drift():
    return TimeLimit(NoisyDrift(), 20)


def noisy_drift_as_gymnasium():
    """The noisy drift port as a Gymnasium env (one port object behind every adapter)."""
    from jaxenvs.adapters.gymnasium import GymnasiumEnv

    if not _AA_DRIFT:
        _AA_DRIFT.append(noisy_drift())
    return GymnasiumEnv(_AA_DRIFT[0])


def _reference_envs():
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import reference_envs

    return reference_envs


def point_reference():
    return _reference_envs().make_point_env()


def point_state(ref):
    from jaxenvs.envs.point_env import EnvState

    return EnvState(position=np.asarray(ref.unwrapped._state, np.float32))


# ---------------------------------------------------------------------------------------------
# the study
# ---------------------------------------------------------------------------------------------

FAITHFUL = {
    "FrozenLake-v1 (slippery)": (frozen_lake, frozen_reference, {}),
    "CliffWalking-v1": (cliff_walking, cliff_reference, {}),
    "PointEnv (garage's tutorial)": (point_env, point_reference, {"state_to_jax": point_state}),
    # a stochastic env with no transition table: the pooled sample tier, within the default budget
    "corridor (slippery, 7 cells)": (corridor, corridor_reference, {}),
    "corridor, with state_to_jax": (corridor, corridor_reference, {"state_to_jax": corridor_state}),
    # A/A: the port against itself, through jaxenvs' Gymnasium adapter
    "corridor port vs itself": (corridor, lambda: corridor_as_gymnasium(), {}),
    # A/A for a continuous stochastic env (continuous observations, Gaussian noise): episode statistics,
    # at detect=0.05 (detect=0.02 needs about 78,000 episodes, ~100 s a run here)
    "noisy drift (continuous) port vs itself": (noisy_drift, lambda: noisy_drift_as_gymnasium(), {"detect": 0.05}),
}

# name: (env, port factory, its effect as a total-variation / KS distance, where it shows)
MUTANTS = {
    "slip 0.30": ("FrozenLake-v1 (slippery)", lambda: frozen_lake(slip=0.30), 1 / 15, "TV per (state, action)"),
    "slip 0.35": ("FrozenLake-v1 (slippery)", lambda: frozen_lake(slip=0.35), 1 / 30, "TV per (state, action)"),
    "slip 0.40": ("FrozenLake-v1 (slippery)", lambda: frozen_lake(slip=0.40), 2 / 15, "TV per (state, action)"),
    "slip 0.50": ("FrozenLake-v1 (slippery)", lambda: frozen_lake(slip=0.50), 1 / 3, "TV per (state, action)"),
    "goal reward 0.9": ("FrozenLake-v1 (slippery)", lambda: frozen_lake(goal_reward=0.9), 1 / 3, "TV at the goal's neighbours"),
    "start shifted (5%)": ("FrozenLake-v1 (slippery)", lambda: frozen_lake(start_shift=0.05), 0.05, "TV of the initial state"),
    "right edge one column early": ("CliffWalking-v1", lambda: cliff_walking(last_col=10), 1.0, "TV at the edge"),
    "start one cell up": ("CliffWalking-v1", lambda: cliff_walking(start=24), 1.0, "TV of the initial state"),
    "action scaled by 1.05": ("PointEnv (garage's tutorial)", lambda: point_env("scale", 1.05), 1.0, "exact replay"),
    "start x shifted by 0.1": ("PointEnv (garage's tutorial)", lambda: point_env("shift", 0.1), 0.05, "KS of initial x"),
    # subtle corridor mutants, each verified at detect equal to its effect (the 5th entry)
    "corridor slip 0.23 (0.03 off)": ("corridor (slippery, 7 cells)", lambda: corridor(slip=0.23), 0.03,
                                      "visit-weighted TV", {"detect": 0.03}),
    # the default call (detect 0.02) on a plain mutant, with and without state_to_jax
    "corridor slip 0.35 everywhere": ("corridor (slippery, 7 cells)", lambda: corridor(slip=0.35), 0.15,
                                      "TV per (cell, action)", {}),
    "corridor slip 0.35 everywhere, with state_to_jax": ("corridor, with state_to_jax", lambda: corridor(slip=0.35), 0.15,
                                                         "TV per (cell, action)", {}),
    "corridor local bug: slip 0.35 in cell 4": ("corridor (slippery, 7 cells)", lambda: corridor(bug_cell=4, bug_slip=0.35),
                                                0.03, "visit-weighted TV (0.15 in cell 4, 21% of visits)",
                                                {"detect": 0.03}),
    "corridor start shifted (5%)": ("corridor (slippery, 7 cells)", lambda: corridor(start_shift=0.05), 0.05,
                                    "TV of the initial state", {"detect": 0.05}),
    "corridor step cost 0.11 (0.01 off)": ("corridor (slippery, 7 cells)", lambda: corridor(step_cost=0.11), 1.0,
                                           "TV of the reward per stratum", {"detect": 0.02}),
}


def run_one(port, factory, kwargs, seed, cache, episodes):
    from jaxenvs.testing import PortInconclusive, PortMismatch, verify_port

    t0, c0 = time.perf_counter(), time.process_time()
    try:
        report = verify_port(port, factory, seed=seed, num_episodes=episodes, reference_cache=cache, **kwargs)
    except PortMismatch as e:
        report = e.report
    except PortInconclusive as e:
        report = e.report
    verdict = report.verdict if report is not None else "fail"
    episodes = report.num_episodes if report is not None else 0
    CPU_SECONDS.append(time.process_time() - c0)
    return verdict, episodes, time.perf_counter() - t0


CPU_SECONDS: list = []  # each run's CPU seconds (this process), beside run_one's wall seconds


def start_busy(n: int) -> list:
    """`n` CPU-bound processes (a loaded machine), ended by `stop_busy`."""
    import subprocess

    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop_busy(procs: list) -> None:
    for p in procs:
        p.kill()
        p.wait()


def binomial_upper(k: int, n: int, conf: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound of a rate observed k times in n."""
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(conf, k + 1, n - k))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=50, help="seeds per faithful port")
    ap.add_argument("--mutant-seeds", type=int, default=10, help="seeds per mutant")
    ap.add_argument("--episodes", type=int, default=1000, help="num_episodes of each run (verify_port's default: 1000)")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "verify_power"), help="output prefix")
    ap.add_argument("--only", default=None,
                    help="run only the rows whose name or env contains this text (alternatives separated by '|')")
    ap.add_argument("--mutants", default=None, help="of the mutants, run only those whose name contains this text")
    ap.add_argument("--aa-seeds", type=int, default=None, help="seeds of the 'port vs itself' rows (slow references)")
    ap.add_argument("--busy", type=int, default=0, metavar="N", help="CPU-bound processes to run beside the study")
    args = ap.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    args.load_before = os.getloadavg()
    busy = start_busy(args.busy)
    try:
        return study(args)
    finally:
        stop_busy(busy)


def study(args):
    from jaxenvs.testing import ALPHA, DETECT, ReferenceCache

    faithful_ports = {name: make() for name, (make, _, _) in FAITHFUL.items()}
    caches = {name: ReferenceCache(max_runs=4 * args.seeds) for name in FAITHFUL}
    rows, t_all = [], time.perf_counter()
    for name, (make, factory, kwargs) in FAITHFUL.items():
        if args.only and not any(t in name for t in args.only.split("|")):
            continue
        counts = {"pass": 0, "fail": 0, "inconclusive": 0}
        eps, secs = [], []
        seeds = args.aa_seeds if (args.aa_seeds and "vs itself" in name) else args.seeds
        CPU_SECONDS.clear()
        for seed in range(seeds):
            v, e, s = run_one(faithful_ports[name], factory, kwargs, seed, caches[name], args.episodes)
            counts[v] += 1
            eps.append(e)
            secs.append(s)
        rows.append({"kind": "faithful", "name": name, "env": name, "effect": 0.0, "detect": kwargs.get("detect", DETECT),
                     "seeds": seeds, **counts,
                     "episodes": [int(min(eps)), int(max(eps))], "seconds_per_run": float(np.mean(secs)),
                     "cpu_seconds_per_run": float(np.mean(CPU_SECONDS)), "per_seed": [v for v in eps],
                     "false_alarm_upper_95": binomial_upper(counts["fail"], seeds)})
        print(f"{name}: {counts} episodes {min(eps)}..{max(eps)}, {np.mean(secs):.1f} s/run, "
              f"{np.mean(CPU_SECONDS):.1f} CPU s/run, load {os.getloadavg()[0]:.1f}", flush=True)
        save(args, rows, t_all)
    for mname, (env_name, make, effect, where, *extra) in MUTANTS.items():
        if args.only and not any(t in mname or t in env_name for t in args.only.split("|")):
            continue
        if args.mutants is not None and args.mutants not in mname:
            continue
        _, factory, kwargs = FAITHFUL[env_name]
        kwargs = {**kwargs, **(extra[0] if extra else {})}
        port = make()
        counts = {"pass": 0, "fail": 0, "inconclusive": 0}
        eps, secs = [], []
        CPU_SECONDS.clear()
        for seed in range(args.mutant_seeds):
            v, e, s = run_one(port, factory, kwargs, seed, caches[env_name], args.episodes)
            counts[v] += 1
            eps.append(e)
            secs.append(s)
        rows.append({"kind": "mutant", "name": mname, "env": env_name, "effect": effect, "where": where,
                     "detect": kwargs.get("detect", DETECT),
                     "seeds": args.mutant_seeds, **counts, "episodes": [int(min(eps)), int(max(eps))],
                     "seconds_per_run": float(np.mean(secs)), "cpu_seconds_per_run": float(np.mean(CPU_SECONDS))})
        print(f"{mname}: {counts} episodes {min(eps)}..{max(eps)}, {np.mean(secs):.1f} s/run, "
              f"{np.mean(CPU_SECONDS):.1f} CPU s/run, load {os.getloadavg()[0]:.1f}", flush=True)
        save(args, rows, t_all)
    result = save(args, rows, t_all)
    print(table(result))
    bad = [r["name"] for r in rows if r["kind"] == "mutant" and r["effect"] >= r.get("detect", DETECT) and r["pass"]]
    alarms = [r["name"] for r in rows if r["kind"] == "faithful" and r["fail"] > max(1, 3 * ALPHA * r["seeds"])]
    if bad or alarms:
        print(f"VIOLATED: mutants passed {bad}; false alarms {alarms}")
        return 1
    return 0


def save(args, rows, t_all):
    """Write the rows so far (a long run leaves its partial results)."""
    from jaxenvs.testing import ALPHA, DETECT, POWER

    result = {
        "command": "python benchmarks/verify_power.py " + " ".join(args.argv),
        "alpha": ALPHA, "detect": DETECT, "power": POWER, "seconds": time.perf_counter() - t_all,
        "machine": f"{os.cpu_count()} CPUs, jax {jax.__version__} on {jax.default_backend()}",
        "busy_processes": args.busy, "load_before": list(args.load_before), "load_after": list(os.getloadavg()),
        "rows": rows,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(result, f, indent=2)
    with open(args.out + ".md", "w") as f:
        f.write(table(result) + "\n")
    return result


def table(result) -> str:
    head = ("port", "env", "effect", "seeds", "pass", "inconclusive", "fail", "episodes", "s/run", "CPU s/run")
    lines = []
    for r in result["rows"]:
        d = r.get("detect", result["detect"])
        if r["kind"] == "faithful":
            effect = "faithful" if d == result["detect"] else f"faithful (detect {d:g})"
        else:
            effect = f"{r['effect']:.3g} ({r['where']}; detect {d:g})"
        lo, hi = r["episodes"]
        lines.append((r["name"] if r["kind"] == "mutant" else "faithful port", r["env"], effect, str(r["seeds"]),
                      str(r["pass"]), str(r["inconclusive"]), str(r["fail"]), f"{lo}" if lo == hi else f"{lo}..{hi}",
                      f"{r['seconds_per_run']:.1f}", f"{r['cpu_seconds_per_run']:.1f}" if "cpu_seconds_per_run" in r else "-"))
    widths = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(head)]
    fmt = lambda row: "| " + " | ".join(v.ljust(w) for v, w in zip(row, widths)) + " |"  # noqa: E731
    out = [fmt(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [fmt(x) for x in lines]
    faithful = [r for r in result["rows"] if r["kind"] == "faithful"]
    out.append("")
    out.append(
        f"alpha={result['alpha']:g}, detect={result['detect']:g}, power={result['power']:g}. False alarms: "
        + "; ".join(f"{r['env']} {r['fail']}/{r['seeds']} (95% upper bound {r['false_alarm_upper_95']:.3f})" for r in faithful)
        + f". {result['machine']}; {result['seconds']:.0f} s in all"
        + (f"; {result['busy_processes']} CPU-bound processes beside it" if result.get("busy_processes") else "")
        + (f"; load average {result['load_before'][0]:.1f} before, {result['load_after'][0]:.1f} after"
           if "load_before" in result else "") + "."
    )
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
