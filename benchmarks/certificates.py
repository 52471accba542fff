"""A verify_port certificate for every environment jaxenvs ships, against its original.

    python benchmarks/certificates.py                 # every row
    python benchmarks/certificates.py --only gymnax,Pgx   # the rows naming one of these (the table keeps the others)
    python benchmarks/certificates.py --only third-party  # the third-party ports (from_functional) only

Writes benchmarks/results/certificates/<env>.json (the `PortReport`, or the reason a row could not
run) and benchmarks/results/certificates/README.md (the table docs/certificates.md shows: verdict,
tier, certified effect, episodes, seconds). The originals: the tutorials' environments as Python
re-implementations (tests/reference_envs.py), PettingZoo's tictactoe_v3 / connect_four_v3,
Pgx's tic_tac_toe / connect_four, OpenSpiel's kuhn_poker, Gymnasium's classic control for the
gymnax ports (with the state mappings of jaxenvs.adapters.gymnax_states). A real divergence found
is a finding: the row says FAIL with its evidence. The planted mutants of MUTANTS run at their
faithful row's settings (<env>__<reference>__mutant<i>.json, a second table): those whose effect
reaches detect must FAIL.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "benchmarks", "results", "certificates")


# Planted mutants run at the same settings as their faithful row (the same budget, detect, seed):
# the port built with these params, its effect in the statistic that should see it, and whether the
# effect reaches detect=0.02 (then it must FAIL; below detect a PASS is what PASS allows).
MUTANTS = {
    "Lottery-v0": [
        ({"mega_haul_prob": 0.11}, "reward TV 0.06 for MegaHaul (1/3 of visits): weighted TV 0.02", True),
        ({"mega_haul_prob": 0.04}, "reward TV 0.01 for MegaHaul (1/3 of visits): weighted TV 0.0033", False),
    ],
    "Maze-v0": [
        ({"size": 11}, "another level (the open 11 x 11 grid): cells the reference walls are free", True),
    ],
    "HurdleRace-v0": [
        ({"jump_success_rate": 0.85}, "TV 0.05 of each jump over a hurdle", True),
    ],
    # a 10% change of a physical constant: the float drift allowance of the trajectory replay must not hide it
    "gymnax/CartPole-v1": [({"force_mag": 11.0}, "force_mag 10% off (10 -> 11)", True)],
    "gymnax/Pendulum-v1": [({"g": 11.0}, "g 10% off (10 -> 11)", True)],
}


def rows():
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import reference_envs as R

    def pz(name):
        def factory():
            from jaxenvs.adapters.pettingzoo import classic_env

            return classic_env(name)

        return factory

    def pgx_env(name):
        import pgx

        return pgx.make(name)

    def kuhn():
        import pyspiel

        return pyspiel.load_game("kuhn_poker")

    from jaxenvs.adapters.gymnax_states import STATE_TO_JAX as GX
    from jaxenvs.adapters.gymnax_states import reference as gx_ref

    out = []
    for env_id in ("GridWorld-v0", "PointEnv-v0", "HurdleRace-v0", "Lottery-v0", "RockPaperScissors-v0", "Maze-v0"):
        out.append((env_id, "tests/reference_envs.py (the tutorial's original)", lambda e=env_id: R.REFERENCES[e],
                    {"state_to_jax": R.STATE_TO_JAX[env_id]}))
    out.append(("TicTacToe-v0", "PettingZoo tictactoe_v3", lambda: pz("tictactoe_v3"), {}))
    out.append(("TicTacToe-v0", "Pgx tic_tac_toe", lambda: pgx_env("tic_tac_toe"), {}))
    out.append(("ConnectFour-v0", "PettingZoo connect_four_v3", lambda: pz("connect_four_v3"), {}))
    out.append(("ConnectFour-v0", "Pgx connect_four", lambda: pgx_env("connect_four"), {}))
    out.append(("KuhnPoker-v0", "OpenSpiel kuhn_poker", kuhn, {}))
    for gid in GX:
        out.append((f"gymnax/{gid}", f"Gymnasium {gid}", lambda g=gid: gx_ref(g), {"state_to_jax": GX[gid]}))
    return out


# ---- third-party ports, through jaxenvs.adapters.functional.from_functional ----------------------------
# Each row: (label, the port's library, a zero-argument factory of the third-party env, the reference's name,
# its factory's factory, verify_port's keyword arguments). The libraries install beside jaxenvs' pinned JAX
# (pip install "jaxenvs[thirdparty]"; Navix pulls wandb and pylint, so it is not in that extra: pip install navix).
MINIGRID_OBJECTS = {0: 0, 1: 1, 2: 2, 8: 6}  # MiniGrid OBJECT_TO_IDX unseen, empty, wall, goal -> xminigrid Tiles
MINIGRID_COLORS = {0: 7, 1: 2, 5: 6}  # an empty cell's 0, green, grey -> xminigrid Colors (empty floor is BLACK)
XMINIGRID_TO_MINIGRID_ACTION = (2, 1, 0, 3, 4, 5)  # xminigrid forward, right, left, pick up, put down, toggle
# The MiniGrid rows run at detect 0.1: their 7x7x3 view makes 147 initial-observation statistics, and
# verify_port tops each one up with reference resets of its own (at 0.02 that is about 147 x 10^5
# MiniGrid resets, more than 20 minutes on this machine)
GRID_DETECT = 0.1


def _minigrid_to_xminigrid(obs):
    """MiniGrid's (x, y) image as xminigrid's (row, column) view, tiles and colours renumbered
    (the objects of the Empty rooms only: any other raises)."""
    import numpy as np

    img = np.asarray(obs["image"]).transpose(1, 0, 2)
    tiles = np.vectorize(MINIGRID_OBJECTS.__getitem__)(img[..., 0])
    colors = np.where(img[..., 0] == 0, 0, np.vectorize(MINIGRID_COLORS.__getitem__)(img[..., 1]))
    return np.stack([tiles, colors], -1).astype(np.uint8)


def third_party_rows():
    import numpy as np

    def pz(name, raw=False):
        def factory():
            import importlib

            module = importlib.import_module(f"pettingzoo.classic.{name}")
            if not raw:
                return module.env()
            from pettingzoo.utils import OrderEnforcingWrapper

            return OrderEnforcingWrapper(module.raw_env())  # no TerminateIllegalWrapper: legal moves only

        return factory

    def pgx(name):
        def make():
            import pgx as _pgx

            return _pgx.make(name)

        return make

    def navix_empty():
        import navix as nx

        # Navix's MiniGrid view and MiniGrid's reward 1 - 0.9 * steps / max_steps (Navix's default pays 1)
        return nx.make("Navix-Empty-5x5-v0", observation_fn=nx.observations.symbolic_first_person, penality_coeff=0.9)

    def xminigrid_empty():
        import xminigrid

        return xminigrid.make("MiniGrid-Empty-5x5")

    def minigrid(env_id):
        def factory():
            import gymnasium
            import minigrid  # noqa: F401 -- registers MiniGrid-*

            return gymnasium.make(env_id)

        return lambda: factory

    return [
        ("Pgx tic_tac_toe", "pgx", pgx("tic_tac_toe"), "PettingZoo tictactoe_v3", lambda: pz("tictactoe_v3"), {}),
        ("Pgx tic_tac_toe", "pgx", pgx("tic_tac_toe"), "PettingZoo tictactoe_v3 raw_env (legal moves only)",
         lambda: pz("tictactoe_v3", raw=True), {}),
        ("Pgx connect_four", "pgx", pgx("connect_four"), "PettingZoo connect_four_v3 raw_env (legal moves only)",
         lambda: pz("connect_four_v3", raw=True), {}),
        ("Navix Navix-Empty-5x5-v0", "navix", navix_empty, "MiniGrid MiniGrid-Empty-5x5-v0",
         minigrid("MiniGrid-Empty-5x5-v0"),
         {"obs_to_jax": lambda o: np.asarray(o["image"]).transpose(1, 0, 2), "detect": GRID_DETECT}),
        ("XLand-MiniGrid MiniGrid-Empty-5x5", "xminigrid", xminigrid_empty, "MiniGrid MiniGrid-Empty-5x5-v0",
         minigrid("MiniGrid-Empty-5x5-v0"),
         {"obs_to_jax": _minigrid_to_xminigrid,
          "action_to_reference": lambda a: XMINIGRID_TO_MINIGRID_ACTION[int(a)], "detect": GRID_DETECT}),
    ]


def certify_third_party(label, make_port, ref_name, make_ref, kwargs, budget):
    """`certify` for a third-party port: the env `make_port()` returns, adapted by from_functional."""
    from jaxenvs.adapters.functional import from_functional

    def port():
        made = make_port()
        return from_functional(*made) if isinstance(made, tuple) else from_functional(made)

    return certify(label, ref_name, make_ref, kwargs, budget, make_port=port)


def certify(env_id, ref_name, make_ref, kwargs, budget, port_kwargs=None, make_port=None):
    import jaxenvs
    from jaxenvs.testing import PortInconclusive, PortMismatch, verify_port

    t0 = time.perf_counter()
    row = {"env": env_id, "reference": ref_name, "budget_s": budget}
    if port_kwargs:
        row["planted_mutant"] = port_kwargs
    if make_ref is None:
        return {**row, "verdict": "not run", "why": kwargs, "seconds": 0.0}
    try:
        env = jaxenvs.make(env_id, **(port_kwargs or {})) if make_port is None else make_port()
        report = verify_port(env, make_ref(), budget_s=budget, **kwargs)
        evidence = ""
    except (PortMismatch, PortInconclusive) as e:
        report, evidence = e.report, str(e).splitlines()[0][:400]
    except ImportError as e:
        return {**row, "verdict": "not run", "why": str(e), "seconds": time.perf_counter() - t0}
    if report is None:
        return {**row, "verdict": "fail", "evidence": evidence, "seconds": time.perf_counter() - t0}
    req = [s for s in report.statistics if s.required]
    # the weakest: the largest detectable effect against what it must detect (detect, or detect_local)
    worst = max(req, key=lambda s: s.detectable / s.target(report.detect)) if req else None
    if report.verdict == "fail":  # the statistic that failed, with its tier
        worst = min(report.failed, key=lambda s: s.p_value)
        certified = f"failed: {worst.name}"
    else:
        certified = "exact" if worst is None or worst.effect == "exact" else f"{worst.effect} {worst.detectable:.3g}"
    return {**row, "verdict": report.verdict, "tier": worst.tier if worst is not None else "", "certified": certified,
            "detect": report.detect, "episodes": report.num_episodes, "seconds": round(report.seconds, 1),
            "evidence": evidence, "report": json.loads(report.to_json())}


def table(results, mutants=()) -> str:
    head = ("| env | reference | verdict | tier (of the weakest required statistic) | certified effect (detect) | episodes "
            "| s | budget s |\n|---|---|---|---|---|---|---|---|")

    def line(r, env):
        if r["verdict"] == "not run":
            return f"| {env} | {r['reference']} | not run: {r['why']} | | | | | |"
        return (f"| {env} | {r['reference']} | {r['verdict'].upper()} | {r.get('tier', '')} | "
                f"{r.get('certified', '').replace('|', chr(92) + '|')} ({r.get('detect', '')}) | {r.get('episodes', '')} | "
                f"{r['seconds']} | "
                f"{r.get('budget_s', 60.0):g} |")

    lines = [head] + [line(r, r["env"]) for r in results]
    if mutants:
        lines += ["", "Planted mutants, at their faithful row's settings: an effect at `detect` must FAIL; below it "
                  "a PASS is what PASS allows (the effect certified is at most `detect`):", "", head]
        lines += [line(r, r["env"] + " with " + ", ".join(f"{k}={v}" for k, v in r["planted_mutant"].items())
                       + f" ({r['mutant_effect']}{'' if r['must_fail'] else ', below detect'})") for r in mutants]
    notes = [f"* {r['env']} vs {r['reference']}: {r['evidence']}" for r in results if r.get("evidence")]
    return "\n".join(lines + ([""] + notes if notes else []))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None, help="comma-separated texts: run only the rows whose env or reference holds one")
    ap.add_argument("--budget", type=float, default=60.0,
                    help="verify_port's budget_s per row (and per planted mutant)")
    args = ap.parse_args(argv)
    os.makedirs(OUT, exist_ok=True)
    only = [o for o in (args.only or "").split(",") if o]
    results, mutants = [], []
    for env_id, ref_name, make_ref, kwargs in rows():
        stem = env_id.replace("/", "_") + "__" + ref_name.split()[0].lower().replace("/", "_")
        todo = [(results, os.path.join(OUT, stem + ".json"), None)]
        for i, mutant in enumerate(MUTANTS.get(env_id, ())):
            todo.append((mutants, os.path.join(OUT, stem + f"__mutant{i}.json"), mutant))
        budget = args.budget
        for out, path, mutant in todo:
            port_kwargs = mutant[0] if mutant else None
            if only and not any(o in f"{env_id} {ref_name}" for o in only):
                if os.path.exists(path):  # the table keeps the rows of earlier runs
                    with open(path) as f:
                        out.append(json.load(f))
                continue
            r = certify(env_id, ref_name, make_ref, kwargs, budget, port_kwargs)
            if mutant:
                r["mutant_effect"], r["must_fail"] = mutant[1], mutant[2]
            out.append(r)
            with open(path, "w") as f:
                json.dump(r, f, indent=2)
            print(f"{env_id}{' mutant ' + str(port_kwargs) if port_kwargs else ''} vs {ref_name}: {r['verdict']} "
                  f"{r.get('certified', '')} {r['seconds']} s (budget {budget:g} s)", flush=True)
    third = []
    for label, library, make_port, ref_name, make_ref, kwargs in third_party_rows():
        path = os.path.join(OUT, "thirdparty__" + label.split()[0].lower().replace("-", "") + "_"
                            + label.split()[-1].replace("/", "_") + "__" + ref_name.split()[0].lower()
                            + ("_legal" if "legal moves only" in ref_name else "") + ".json")
        if only and not any(o in f"{label} {ref_name} third-party" for o in only):
            if os.path.exists(path):
                with open(path) as f:
                    third.append(json.load(f))
            continue
        r = certify_third_party(label, make_port, ref_name, make_ref, kwargs, args.budget)
        r["library"] = library
        third.append(r)
        with open(path, "w") as f:
            json.dump(r, f, indent=2)
        print(f"{label} vs {ref_name}: {r['verdict']} {r.get('certified', '')} {r['seconds']} s", flush=True)
    text = table(results, mutants)
    if third:
        text += "\n\nThird-party ports (jaxenvs.adapters.functional.from_functional):\n\n" + table(third)
    with open(os.path.join(OUT, "README.md"), "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
