"""Golden trajectories: a digest of every registered environment's dynamics, recorded in
``tests/golden_trajectories.json`` and recomputed by ``tests/test_golden.py``, so that no change of
an environment's dynamics (ours, gymnax's, or JAX's rounding) goes unnoticed.

For each id, ``jaxenvs.make(id)`` (its spec's TimeLimit and AutoReset) runs `STEPS` steps of
`jaxenvs.rollout.random_policy` (uniform legal actions) in one jitted `jaxenvs.rollout` scan from
``jax.random.key(SEED)``. Every leaf of the trajectory's ``obs``, ``action``, ``reward``,
``terminated``, ``truncated`` and ``info`` (``info/final_obs/...`` included) is digested: its
dtype, its per-step shape, a SHA-256 of all its bytes (any change of any bit is caught) and a
16-bit hash of each step's bytes (the first step whose hash differs names the first differing
step; entry ``t`` holds the observation action ``t`` was taken in and step ``t``'s outputs).

The file keeps, per id, one or more records, each with the JAX versions (and backend) it was
computed on: a JAX release that rounds a float differently gets a record of its own, written
explicitly, never a tolerance. A version listed in a record is compared against that record only;
an unlisted version must reproduce one of the recorded digests bit for bit.

Regenerate (after a reviewed change of dynamics, a new env, or a new JAX version; the diff of the
JSON file is the review)::

    python tests/golden.py                  # record this JAX version's digests of every id
    python tests/golden.py Maze-v0          # only these ids
    python tests/golden.py --replace ID     # a deliberate change of ID's dynamics: this version's
                                            # digests become ID's only record (others are stale)
    python tests/golden.py --check          # compare only, write nothing (exit 1 on a difference)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

PATH = Path(__file__).with_name("golden_trajectories.json")
STEPS = 256
SEED = 0
LEAF_GROUPS = ("obs", "action", "reward", "terminated", "truncated", "info")
STEP_HEX = 4  # hex digits of each step's hash (16 bits)
REGENERATE = "python tests/golden.py"


def platform() -> str:
    """``"jax <version> <backend>"``: what a record was computed on (the backend's float
    arithmetic is part of the result)."""
    import jax

    return f"jax {jax.__version__} {jax.default_backend()}"


def env_ids() -> list[str]:
    """Every registered id, the lazily registered namespaces whose package is installed included
    (``gymnax/`` ids with gymnax installed)."""
    import jaxenvs
    from jaxenvs.registration import load_lazy_namespaces

    load_lazy_namespaces()
    return sorted(jaxenvs.registry)


def _leaf_name(path) -> str:
    parts = []
    for entry in path:
        for attr in ("key", "name", "idx"):
            if hasattr(entry, attr):
                parts.append(str(getattr(entry, attr)))
                break
        else:
            parts.append(str(entry))
    return "/".join(parts)


def trajectory(env, steps: int = STEPS, seed: int = SEED) -> dict[str, np.ndarray]:
    """The leaves of ``env``'s golden trajectory as host arrays ``[steps, ...]``, keyed by their
    path (``"obs/agent"``, ``"reward"``, ``"info/final_obs/agent"``); PRNG keys as their key data."""
    import jax

    from jaxenvs.rollout import random_policy, rollout

    # JAX's default PRNG layout since 0.5, set for 0.4 too: the same keys draw the same bits on
    # every version, so that the records compare the dynamics rather than the layout of the draws
    with jax.threefry_partitionable(True):
        traj = rollout(env, jax.random.key(seed), random_policy(env), steps, record_states=False)
    tree = {g: getattr(traj, g) for g in LEAF_GROUPS}
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    out = {}
    for path, leaf in flat:
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        out[_leaf_name(path)] = np.asarray(leaf)
    return out


def digest(leaves: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """Per leaf: ``{"dtype", "shape" (per step), "sha256" (of all bytes), "steps" (STEP_HEX hex
    digits per step)}``."""
    out = {}
    for name, x in sorted(leaves.items()):
        x = np.ascontiguousarray(x)
        steps = "".join(hashlib.sha256(x[t].tobytes()).hexdigest()[:STEP_HEX] for t in range(x.shape[0]))
        out[name] = {
            "dtype": str(x.dtype),
            "shape": list(x.shape[1:]),
            "sha256": hashlib.sha256(x.tobytes()).hexdigest(),
            "steps": steps,
        }
    return out


def first_difference(expected: dict, actual: dict) -> tuple[int | None, list[str], str] | None:
    """``None`` when the two digests are equal; else ``(step, leaves, detail)``: the first step at
    which any leaf differs (``None`` when a leaf's dtype, shape or presence changed), the leaves
    that differ there, and a sentence saying how."""
    changed = {}
    for name in sorted(set(expected) | set(actual)):
        e, a = expected.get(name), actual.get(name)
        if e is None or a is None:
            changed[name] = (None, "leaf added" if e is None else "leaf removed")
        elif (e["dtype"], e["shape"]) != (a["dtype"], a["shape"]):
            changed[name] = (None, f"{e['dtype']}{e['shape']} -> {a['dtype']}{a['shape']}")
        elif e["sha256"] != a["sha256"]:
            n = len(e["steps"]) // STEP_HEX
            steps = [t for t in range(n) if e["steps"][t * STEP_HEX:(t + 1) * STEP_HEX] != a["steps"][t * STEP_HEX:(t + 1) * STEP_HEX]]
            # every differing step's 16-bit hash colliding: the bytes differ, the step is unknown
            changed[name] = (steps[0] if steps else n, "values differ" if steps else "values differ (step not located)")
    if not changed:
        return None
    structural = [k for k, (t, _) in changed.items() if t is None]
    if structural:
        return None, structural, "; ".join(f"{k}: {changed[k][1]}" for k in structural)
    step = min(t for t, _ in changed.values())
    at = [k for k, (t, _) in changed.items() if t == step]
    later = sorted(k for k in changed if k not in at)
    detail = f"values differ at step {step} in {', '.join(at)}" + (f" (later in {', '.join(later)})" if later else "")
    return step, at, detail


def load(path: Path = PATH) -> dict:
    if not path.exists():
        return {"steps": STEPS, "seed": SEED, "envs": {}}
    return json.loads(path.read_text())


def compare(env_id: str, actual: dict, golden: dict, where: str | None = None) -> tuple[bool, str]:
    """``(equal, message)``: ``actual`` (`digest`) against ``golden``'s records of ``env_id`` for
    the platform ``where`` (default: this process's). A platform listed in a record is compared
    with that record only; an unlisted one passes when it equals any record bit for bit. The
    message names the record compared against and, on a difference, the env, the first differing
    step and leaf, and the command that records new digests."""
    where = where or platform()
    records = golden["envs"].get(env_id)
    if not records:
        return False, f"{env_id}: no golden digest recorded; record it with `{REGENERATE} {env_id}` and commit the JSON"
    own = [r for r in records if where in r["platforms"]]
    candidates = own or records
    results = [(r, first_difference(r["leaves"], actual)) for r in candidates]
    for r, diff in results:
        if diff is None:
            note = "" if own else f" ({where} has no record of its own: bit-identical)"
            return True, f"{env_id}: equal to the digest recorded for {', '.join(r['platforms'])}{note}"
    # the closest record: the one that agrees longest
    r, (step, leaves, detail) = max(results, key=lambda rd: -1 if rd[1][0] is None else rd[1][0])
    against = ", ".join(r["platforms"])
    return False, (
        f"{env_id}: trajectory differs from the golden digest recorded for {against} "
        f"(compared on {where}{'' if own else ', which has no record of its own'}): first differing step "
        f"{step if step is not None else '(structure)'}, leaf {', '.join(leaves)}: {detail}. A change of "
        f"dynamics needs a new env version or a reviewed update of tests/golden_trajectories.json: "
        f"`{REGENERATE} {env_id}` (a rounding change of a new JAX version) or "
        f"`{REGENERATE} --replace {env_id}` (a deliberate change of dynamics)"
    )


def _version_order(where: str) -> tuple:
    """Sort key of a platform string ``"jax 0.10.2 cpu"``: by version number, then backend."""
    _, version, backend = where.split(" ")
    return tuple(int(p) if p.isdigit() else p for p in version.split(".")), backend


def record(golden: dict, env_id: str, leaves: dict, replace: bool = False, where: str | None = None) -> str:
    """Record ``leaves`` (`digest`) as ``env_id``'s digest on platform ``where`` in ``golden`` (in
    place); returns what changed. The platform joins an equal record or gets a new one and leaves
    any other; ``replace`` drops every other record of the id (its dynamics changed on purpose)."""
    where = where or platform()
    records = golden["envs"].setdefault(env_id, [])
    had = bool(records)
    before = next((r["leaves"] for r in records if where in r["platforms"]), None)
    base = before or (records[0]["leaves"] if records else None)  # what a new record differs from
    if replace:
        others = [p for r in records for p in r["platforms"] if p != where and r["leaves"] != leaves]
        records[:] = [r for r in records if r["leaves"] == leaves]
    for r in records:
        r["platforms"] = [p for p in r["platforms"] if p != where]
    same = next((r for r in records if r["leaves"] == leaves), None)
    if same is None:
        same = {"platforms": [], "leaves": leaves}
        records.append(same)
    same["platforms"] = sorted(same["platforms"] + [where], key=_version_order)
    records[:] = [r for r in records if r["platforms"]]
    shared = [p for p in same["platforms"] if p != where]
    if before == leaves:
        note = "unchanged"
    elif not had:
        note = "new"
    elif shared:
        note = f"bit-identical to the record of {', '.join(shared)}: {where} added to it"
    else:
        note = f"a record of its own for {where} ({first_difference(base, leaves)[2]})"
    if replace and others:
        note += f"; dropped the stale records of {', '.join(sorted(set(others)))}"
    return note


def dumps(golden: dict) -> str:
    """The JSON file's text: one line per leaf, so a reviewed diff shows which leaves changed."""
    lines = ["{", f' "about": {json.dumps(__doc__.split(chr(10) + chr(10))[0].replace(chr(10), " "))},',
             f' "regenerate": {json.dumps(REGENERATE)},', f' "steps": {golden["steps"]},', f' "seed": {golden["seed"]},',
             ' "envs": {']
    ids = sorted(golden["envs"])
    for i, env_id in enumerate(ids):
        lines.append(f"  {json.dumps(env_id)}: [")
        records = golden["envs"][env_id]
        for j, r in enumerate(records):
            lines.append(f'   {{"platforms": {json.dumps(r["platforms"])}, "leaves": {{')
            names = sorted(r["leaves"])
            for k, name in enumerate(names):
                lines.append(f"    {json.dumps(name)}: {json.dumps(r['leaves'][name])}" + ("," if k < len(names) - 1 else ""))
            lines.append("   }}" + ("," if j < len(records) - 1 else ""))
        lines.append("  ]" + ("," if i < len(ids) - 1 else ""))
    lines += [" }", "}", ""]
    return "\n".join(lines)


def build(env_id: str):
    """``jaxenvs.make(env_id)``, or ``None`` with the reason when the env cannot be built here (an
    ImportError, e.g. gymnax's MNISTBandit downloads MNIST in its constructor)."""
    import jaxenvs

    try:
        return jaxenvs.make(env_id), None
    except ImportError as e:
        return None, f"{type(e).__name__}: {e}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=REGENERATE, description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="*", help="env ids to record (default: every registered id)")
    parser.add_argument("--replace", action="store_true",
                        help="a deliberate change of dynamics: this version's digests become the ids' only records")
    parser.add_argument("--check", action="store_true", help="compare with the recorded digests, write nothing")
    args = parser.parse_args(argv)
    known = env_ids()
    unknown = [i for i in args.ids if i not in known]
    if unknown:
        parser.error(f"unknown env id(s) {', '.join(unknown)}; registered here: {', '.join(known)}")
    if args.replace and not args.ids:
        parser.error("--replace drops other JAX versions' records: name the ids whose dynamics changed")
    golden = load()
    golden.setdefault("envs", {})
    if (golden.get("steps"), golden.get("seed")) != (STEPS, SEED):
        parser.error(f"{PATH} was recorded with steps={golden.get('steps')}, seed={golden.get('seed')}; "
                     f"this script runs steps={STEPS}, seed={SEED}: record every id again in a fresh file")
    failed = False
    for env_id in args.ids or known:
        env, why = build(env_id)
        if env is None:
            print(f"{env_id}: not built here, left as recorded ({why})")
            continue
        leaves = digest(trajectory(env))
        if args.check:
            ok, message = compare(env_id, leaves, golden)
            failed |= not ok
            print(message)
        else:
            print(f"{env_id}: {record(golden, env_id, leaves, args.replace)}")
    if not args.check:
        PATH.write_text(dumps(golden))
        print(f"wrote {PATH} ({platform()}); review `git diff {PATH.name}` and commit it")
    return int(failed)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
