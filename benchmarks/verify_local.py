"""Measured both ways: `verify_port`'s local guarantee and its float-drift allowance.

Faithful ports must pass (A/A), planted bugs must never pass:

* the slippery corridor (tests/reference_envs.py, ported in benchmarks/verify_power.py) at the
  default call, with and without `state_to_jax` (faithful), and a port that slips with 0.35
  instead of 0.2 only when moving right from cell 2 (a stratum of about 9% of the first visits,
  TV 0.15 there, a visitation-weighted TV near 0.014) at `detect=0.1`: the local guarantee
  (`detect_local=0.1` at every stratum with >= 1% of the visits) must catch it;
* a float32 logistic map x' = 4 x (1 - x) against its float64 original (chaotic: errors double
  each step; faithful, its trajectories separate from the reference's), a 1% change of r and a
  jump near x = 1 that the one-step states miss (planted bugs).

    python benchmarks/verify_local.py                 # 10 seeds a row
    python benchmarks/verify_local.py --seeds 3 --only corridor

Writes `benchmarks/results/verify_local.json` and `.md`. The gymnax rows (Pendulum, CartPole
and their 10% mutants against Gymnasium) are benchmarks/certificates.py's. tests/test_verify_local.py
and tests/test_verify_drift.py import the ports from here.
"""

from __future__ import annotations

import argparse
import importlib.util
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


def _verify_power():
    if "verify_power" not in sys.modules:
        spec = importlib.util.spec_from_file_location("verify_power", os.path.join(ROOT, "benchmarks", "verify_power.py"))
        sys.modules["verify_power"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["verify_power"])
    return sys.modules["verify_power"]


VP = _verify_power()

# ---------------------------------------------------------------------------------------------
# the corridor with one local bug
# ---------------------------------------------------------------------------------------------

BUG_CELL, BUG_SLIP = 2, 0.35


class RightSlipCorridor(VP.Corridor):
    """The corridor port with one local bug: moving right (action 1) from cell `BUG_CELL` slips
    with probability `BUG_SLIP` instead of the corridor's 0.2; every other stratum is faithful."""

    def step_env(self, key, state, action, params):
        slip = jnp.where((state.pos == BUG_CELL) & (action == 1), BUG_SLIP, params.slip)
        move = jnp.where(action == 1, 1, -1)
        move = jnp.where(jax.random.uniform(key) < slip, -move, move)
        pos = (state.pos + move).astype(jnp.int32)
        terminated = (pos == 0) | (pos == 6)
        reward = (-params.step_cost + jnp.where(pos == 6, 1.0, 0.0)).astype(jnp.float32)
        return pos, VP.CorridorState(pos), reward, terminated, jnp.zeros((), bool), {}


def right_slip_corridor():
    return TimeLimit(RightSlipCorridor(), 50)


# ---------------------------------------------------------------------------------------------
# the logistic map: float32 port, float64 original
# ---------------------------------------------------------------------------------------------

LOGISTIC_HORIZON = 30


def logistic_reference():
    """The original in float64 (a Gymnasium env in a TimeLimit of 30): x starts uniform in
    [0.1, 0.9]; action 0 maps x to f(x) = 4 x (1 - x), action 1 to 1 - f(x) (both stretch errors by
    |4 - 8x|: ln 2 a step on average under their invariant arcsine density), clipped to [0, 1];
    the observation is x (float32), the reward x; no end but the TimeLimit."""
    import gymnasium

    class LogisticEnv(gymnasium.Env):
        def __init__(self):
            self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32)
            self.action_space = gymnasium.spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.x = float(self.np_random.uniform(0.1, 0.9))
            return np.array([self.x], np.float32), {}

        def step(self, action):
            f = 4.0 * self.x * (1.0 - self.x)
            self.x = min(max(f if int(action) == 0 else 1.0 - f, 0.0), 1.0)
            return np.array([self.x], np.float32), self.x, False, False, {}

    return gymnasium.wrappers.TimeLimit(LogisticEnv(), LOGISTIC_HORIZON)


@struct.dataclass
class LogisticState:
    x: jax.Array  # float32 scalar


@struct.dataclass
class LogisticParams:
    r: float = 4.0
    jump_above: float = 2.0  # a planted bug: above this x the map sends x to 0.5 (never, by default)


class Logistic(Environment):
    """The logistic map's port, in float32."""

    traits = Traits(num_agents=1, chance="deterministic", information="perfect", reward_style="step")

    @property
    def default_params(self):
        return LogisticParams()

    def reset_env(self, key, params):
        x = jax.random.uniform(key, (), jnp.float32, 0.1, 0.9)
        return x[None], LogisticState(x)

    def step_env(self, key, state, action, params):
        f = params.r * state.x * (1.0 - state.x)
        x = jnp.clip(jnp.where(action == 0, f, 1.0 - f), 0.0, 1.0)
        x = jnp.where(state.x > params.jump_above, 0.5, x).astype(jnp.float32)
        return x[None], LogisticState(x), x, jnp.zeros((), bool), jnp.zeros((), bool), {}

    def observation_space(self, params=None):
        return spaces.Box(0.0, 1.0, (1,), jnp.float32)

    def action_space(self, params=None):
        return spaces.Discrete(2)


def logistic(**params):
    env = Logistic() if not params else jaxenvs.wrappers.WithParams(Logistic(), LogisticParams(**params))
    return TimeLimit(env, LOGISTIC_HORIZON)


def logistic_state(ref):
    return LogisticState(np.float32(ref.unwrapped.x))


# ---------------------------------------------------------------------------------------------
# the measurement
# ---------------------------------------------------------------------------------------------

LOGISTIC_KW = dict(state_to_jax=logistic_state, num_episodes=200, detect=0.2)


def rows():
    """(name, faithful?, effect, make port, reference, verify_port kwargs)."""
    return [
        ("corridor (faithful)", True, "none", VP.corridor, VP.corridor_reference, {}),
        ("corridor (faithful), state_to_jax", True, "none", VP.corridor, VP.corridor_reference,
         {"state_to_jax": VP.corridor_state}),
        ("corridor, slip 0.35 moving right from cell 2, detect=0.1", False,
         "TV 0.15 at a stratum of ~9% of visits (weighted TV ~0.014)", right_slip_corridor, VP.corridor_reference,
         {"detect": 0.1}),
        ("corridor, slip 0.35 moving right from cell 2, detect=0.1, state_to_jax", False,
         "TV 0.15 at a stratum of ~9% of visits (weighted TV ~0.014)", right_slip_corridor, VP.corridor_reference,
         {"detect": 0.1, "state_to_jax": VP.corridor_state}),
        ("logistic map float32 vs float64 (faithful)", True, "none (float drift)", logistic, logistic_reference,
         LOGISTIC_KW),
        ("logistic map, r 1% off", False, "r 4 -> 3.96", lambda: logistic(r=3.96), logistic_reference, LOGISTIC_KW),
        ("logistic map, jump above x=0.9999", False, "x -> 0.5 above 0.9999 (the one-step states miss it)",
         lambda: logistic(jump_above=0.9999), logistic_reference, LOGISTIC_KW),
    ]


def run_one(make_port, reference, kwargs, seed):
    from jaxenvs.testing import PortMismatch, verify_port

    t0, t_cpu = time.perf_counter(), time.process_time()
    try:
        r = verify_port(make_port(), reference, seed=seed, raise_inconclusive=False, **kwargs)
        failed = None
    except PortMismatch as e:
        r, failed = e.report, e.statistic
    loc = r.local if r is not None else None
    return {"seed": seed, "verdict": r.verdict if r is not None else "fail", "failed": failed,
            "episodes": r.num_episodes if r is not None else 0,
            "local_bound": loc.get("bound") if loc else None,
            "short": [s.name for s in r.undetermined] if r is not None and r.verdict == "inconclusive" else [],
            "drift": next((n for n in (r.notes if r else ()) if n.startswith("trajectory replay")), None),
            "seconds": round(time.perf_counter() - t0, 1), "cpu_seconds": round(time.process_time() - t_cpu, 1)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10, help="seeds a row")
    ap.add_argument("--only", default=None, help="run only the rows whose name contains this text")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "verify_local"), help="output prefix")
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    results, t0 = [], time.perf_counter()
    for name, faithful, effect, make_port, reference, kwargs in rows():
        if args.only and args.only not in name:
            continue
        runs = [run_one(make_port, reference, kwargs, seed) for seed in range(args.seeds)]
        counts = {v: sum(r["verdict"] == v for r in runs) for v in ("pass", "fail", "inconclusive")}
        results.append({"row": name, "faithful": faithful, "effect": effect, "settings": {
            k: (v if isinstance(v, (int, float, str)) else getattr(v, "__name__", repr(v))) for k, v in kwargs.items()},
            "counts": counts, "runs": runs})
        print(name, counts, flush=True)
    load = os.getloadavg()
    meta = {"seeds": args.seeds, "jax": jax.__version__, "cpus": os.cpu_count(), "load_at_end": [round(x, 1) for x in load],
            "seconds": round(time.perf_counter() - t0, 1),
            "command": "python benchmarks/verify_local.py" + (f" --seeds {args.seeds}" if args.seeds != 10 else "")
            + (f" --only '{args.only}'" if args.only else "")}
    with open(args.out + ".json", "w") as f:
        json.dump({"meta": meta, "rows": results}, f, indent=2)
    lines = ["| row | faithful | effect | pass | fail | inconclusive | episodes | s a run (CPU s) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        eps = sorted(x["episodes"] for x in r["runs"])
        secs = [x["seconds"] for x in r["runs"]]
        cpu = [x["cpu_seconds"] for x in r["runs"]]
        lines.append(f"| {r['row']} | {'yes' if r['faithful'] else 'no (must never pass)'} | {r['effect']} | "
                     f"{r['counts']['pass']} | {r['counts']['fail']} | {r['counts']['inconclusive']} | "
                     f"{eps[0]}..{eps[-1]} | {np.median(secs):.1f} ({np.median(cpu):.1f}) |")
    md = "\n".join(lines) + (f"\n\n`{meta['command']}`: {args.seeds} seeds a row, alpha=0.001, power=0.95, coverage=0.01, "
                             f"detect_local=0.1; {meta['cpus']} CPUs shared with other work (load {load[0]:.1f} at the end), "
                             f"jax {jax.__version__}; {meta['seconds']:.0f} s in all.\n")
    with open(args.out + ".md", "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
