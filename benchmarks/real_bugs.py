"""Real bugs from the public history of third-party JAX ports, run through `verify_port`.

    python benchmarks/real_bugs.py                   # every triple, one after another
    python benchmarks/real_bugs.py --only NAME[,NAME] # some of them (the other JSONs are kept)
    python benchmarks/real_bugs.py --list            # the triples and their citations
    python benchmarks/real_bugs.py --tables          # only rewrite the tables from the JSONs

Each triple is a bug a port shipped (or carried on its public main branch) and later fixed: the
*buggy* port, the *fixed* port and the *original* it was ported from. Both ports are checked
against the original with the same `verify_port` call; the bug is caught when the buggy port
FAILs while the fixed one PASSes. A buggy port that passes is a miss, reported with its reason.
Writes ``benchmarks/results/real_bugs/<name>.json`` (one per triple, fields in `SCHEMA`),
``benchmarks/results/real_bugs/README.md`` and the same table into docs/real-bugs.md (between
`MARKERS`), from every JSON present.

How each side is had. The fixed side is the released gymnax 1.0.1 (the ``gymnax`` extra). The
buggy releases of gymnax (0.0.2-0.0.8) do not run here: 0.0.5 fails at import under Python 3.11
(a jax array as a dataclass default), 0.0.8 needs ``jax.tree_map`` (gone in JAX 0.10)
and speaks the 0.0.x step API that `jaxenvs.envs.gymnax_env` refuses; the three FrozenLake bugs never
reached a release (0.0.6 and 0.0.7 were not tried). So every buggy side is a minimal patch of the fixed 1.0.1 class, written here,
that puts back exactly the change the cited commit undid (a subclass overriding one method, or a
module-level constant swapped while that subclass's step is traced) -- no third-party code is
copied. The originals: Gymnasium's classic-control and toy-text envs (the ``gymnasium`` extra) and
bsuite's DeepSea (not an extra: ``pip install bsuite dm-env immutabledict termcolor absl-py``; its
package imports scikit-image for an unrelated wrapper, which is stubbed when absent).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import sys
import time
import types
from typing import Any, Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "benchmarks", "results", "real_bugs")
DOCS = os.path.join(ROOT, "docs", "real-bugs.md")
MARKERS = ("<!-- real-bugs-table -->", "<!-- /real-bugs-table -->")  # docs/real-bugs.md's table, rewritten
GYMNAX = "RobertTLange/gymnax"

# One JSON per triple: field -> allowed types (a side's fields in SIDE_SCHEMA). `outcome` is one of
# OUTCOMES: "caught" (buggy FAIL, fixed PASS), "missed" (buggy not FAIL, fixed PASS), "fixed-failed"
# (the fixed port did not PASS: the triple says nothing about the bug), "not-run" (`why` says why).
SCHEMA = {
    "name": str, "library": str, "env": str, "original": str, "citation": dict, "buggy_source": str,
    "fixed_source": str, "settings": dict, "versions": dict, "buggy": (dict, type(None)), "fixed": (dict, type(None)),
    "outcome": str, "why": str, "load": dict, "command": str, "supplementary": (dict, type(None)),
}
# A second run of a triple at other stated settings (e.g. a policy that reaches the states where the
# bug shows): its settings, both sides and its own outcome; the record's outcome stays the default call's.
SUPPLEMENTARY_SCHEMA = {"settings": dict, "buggy": dict, "fixed": dict, "outcome": str, "why": str}
CITATION_SCHEMA = {"repository": str, "introduced": str, "fixed": str, "links": list, "nature": str}
SIDE_SCHEMA = {
    "verdict": str, "caught_by": (str, type(None)), "tier": (str, type(None)), "p_value": (float, type(None)),
    "message": str, "episodes": int, "wall_s": float, "cpu_s": float, "budget_s": (float, type(None)),
}
OUTCOMES = ("caught", "missed", "fixed-failed", "not-run")
VERDICTS = ("pass", "fail", "inconclusive", "error")


def check_record(record: dict) -> list[str]:
    """What is wrong with a published triple's JSON (empty when it follows `SCHEMA`)."""
    errors = []

    def fields(obj, schema, where):
        if not isinstance(obj, dict):
            errors.append(f"{where} is {type(obj).__name__}, not a dict")
            return
        for k in sorted(set(obj) - set(schema)):
            errors.append(f"{where} has an unknown field {k!r}")
        for k, t in schema.items():
            if k not in obj:
                errors.append(f"{where} lacks {k!r}")
            elif not isinstance(obj[k], t) or (t in (int, float) and isinstance(obj[k], bool)):
                errors.append(f"{where}[{k!r}] is {type(obj[k]).__name__}, expected {t}")

    fields(record, SCHEMA, "record")
    if errors:
        return errors
    fields(record["citation"], CITATION_SCHEMA, "citation")
    if record["outcome"] not in OUTCOMES:
        errors.append(f"outcome {record['outcome']!r} is not one of {OUTCOMES}")
    runs = [("", record)]
    if record["supplementary"] is not None:
        fields(record["supplementary"], SUPPLEMENTARY_SCHEMA, "supplementary")
        runs.append(("supplementary ", record["supplementary"]))
    for where, run in runs:
        for side in ("buggy", "fixed"):
            if run.get(side) is not None:
                fields(run[side], SIDE_SCHEMA, where + side)
                if isinstance(run[side], dict) and run[side].get("verdict") not in VERDICTS:
                    errors.append(f"{where}{side} verdict {run[side].get('verdict')!r} is not one of {VERDICTS}")
        if not errors and run.get("outcome") != "not-run":
            b, f = run.get("buggy"), run.get("fixed")
            if b is None or f is None:
                errors.append(f"{where}outcome {run.get('outcome')!r} needs both sides run")
            elif run.get("outcome") != outcome_of(b, f):
                errors.append(f"{where}outcome {run.get('outcome')!r} but the verdicts say {outcome_of(b, f)!r}")
    if record["outcome"] in ("missed", "fixed-failed", "not-run") and not record["why"]:
        errors.append(f"a {record['outcome']} triple must say why")
    return errors


def outcome_of(buggy: dict, fixed: dict) -> str:
    """"caught", "missed" or "fixed-failed" from the two sides' verdicts."""
    if fixed["verdict"] != "pass":
        return "fixed-failed"
    return "caught" if buggy["verdict"] == "fail" else "missed"


# ---- the buggy sides: minimal patches of gymnax 1.0.1 --------------------------------------------


@contextlib.contextmanager
def _swapped(module, name: str, value):
    """`module.name` set to `value` for the block (a trace of the patched subclass's step only)."""
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def _gymnax_module(path: str):
    import importlib

    return importlib.import_module(f"gymnax.environments.{path}")


def _timeout_off_by_one(cls):
    """`cls` truncating one step late: ``time > max_steps`` where 1.0.1 has ``>=`` (gymnax f960cd4
    changed ``state.time > params.max_steps_in_episode`` to ``>=`` in every env's ``is_terminal``)."""

    class TimeoutOffByOne(cls):
        def is_truncated(self, state, params):
            return state.time > params.max_steps_in_episode

    TimeoutOffByOne.__name__ = f"{cls.__name__}TimeoutOffByOne"
    return TimeoutOffByOne


def _done_folds_time_limit(cls):
    """`cls` with gymnax 0.0.x's single ``done``: the time limit reported as a termination
    (``terminated = natural terminal | time >= max_steps``, never truncated), as 0.0.x's
    ``step_env`` returned it before 1.0's six-value API split it (gymnax e01c3bc)."""

    class DoneFoldsTimeLimit(cls):
        def step_env(self, key, state, action, params):
            obs, new_state, reward, terminated, info = super().step_env(key, state, action, params)
            import jax.numpy as jnp

            return obs, new_state, reward, jnp.logical_or(terminated, new_state.time >= params.max_steps_in_episode), info

        def is_truncated(self, state, params):
            import jax.numpy as jnp

            return jnp.zeros((), bool)

    DoneFoldsTimeLimit.__name__ = f"{cls.__name__}DoneFoldsTimeLimit"
    return DoneFoldsTimeLimit


def _unsqueezed_reward(cls):
    """`cls` returning its reward with the action's axis left on it: shape (1,) where 1.0.1 returns a
    scalar (gymnax b3a4e29 added ``reward = reward.squeeze()`` to Pendulum's step; the reward is
    computed from the clipped action ``u``, which has the action's shape (1,))."""

    class UnsqueezedReward(cls):
        def step_env(self, key, state, action, params):
            obs, new_state, reward, terminated, info = super().step_env(key, state, action, params)
            return obs, new_state, reward.reshape(1), terminated, info

    UnsqueezedReward.__name__ = f"{cls.__name__}UnsqueezedReward"
    return UnsqueezedReward


def _wrap_before_6ff8969(x, m, big_m):
    """Acrobot's angle wrap as gymnax had it before 6ff8969: the number of turns is
    ``ceil((x - bound) / (M - m))`` on both sides, which is 0 for any x in (m - (M - m), m): an angle
    just below -pi is left unwrapped (and one below -3pi is moved the wrong way)."""
    import jax.numpy as jnp

    span = big_m - m
    down, up = x - big_m > 0, x - m < 0
    turns = jnp.ceil((x - big_m) / span) * down + jnp.ceil((x - m) / span) * up
    return x - turns * span * down + turns * span * up


def acrobot_wrap_bug():
    acrobot = _gymnax_module("classic_control.acrobot")

    class AcrobotWrapBug(acrobot.Acrobot):
        def step_env(self, key, state, action, params):
            with _swapped(acrobot, "wrap", _wrap_before_6ff8969):
                return super().step_env(key, state, action, params)

    return AcrobotWrapBug()


def frozen_lake_bug(which: str):
    """FrozenLake-misc as first committed (gymnax f07fd09, on main 2025-07 to 2026-08, rewritten in
    78a0f33), one of its differences from Gymnasium put back into 1.0.1's class: ``"actions"`` (the
    direction table in order left, right, down, up: actions 1 and 2 swapped against Gymnasium's
    left, down, right, up), ``"slip"`` (with probability 1/3 a uniformly random action of all four,
    the reverse included, instead of the intended one or a perpendicular one with 1/3 each),
    ``"obs_space"`` (a ``Box(0, 15, (1,), int32)`` observation space for a scalar position instead
    of ``Discrete(16)``)."""
    import jax
    import jax.numpy as jnp

    fl = _gymnax_module("misc.frozen_lake")
    gspaces = _gymnax_module("spaces")

    if which == "actions":
        class FrozenLakeActionOrder(fl.FrozenLake):
            def step_env(self, key, state, action, params):
                with _swapped(fl, "_DIRECTIONS", jnp.array(((0, -1), (0, 1), (1, 0), (-1, 0)))):
                    return super().step_env(key, state, action, params)

        return FrozenLakeActionOrder()
    if which == "slip":
        class FrozenLakeUniformSlip(fl.FrozenLake):
            def _transition_action(self, key, action):
                action = jnp.asarray(action, dtype=jnp.int32)
                key_slip, key_action = jax.random.split(key)
                slipped = jax.random.uniform(key_slip) < 1 / 3
                chosen = jnp.where(slipped, jax.random.randint(key_action, (), 0, 4), action)
                return chosen, jnp.where(chosen == action, 0.75, 1 / 12).astype(jnp.float32)

        return FrozenLakeUniformSlip()
    if which == "obs_space":
        class FrozenLakeBoxSpace(fl.FrozenLake):
            def observation_space(self, params):
                return gspaces.Box(low=0, high=15, shape=(1,), dtype=jnp.int32)

        return FrozenLakeBoxSpace()
    raise ValueError(f"no FrozenLake bug {which!r}; the bugs are actions, slip, obs_space")


def deep_sea_bug(which: str):
    """DeepSea as gymnax had it before fe60e28 (PR #101, issue #77: "does not actually correspond to
    DeepSea-bsuite"): ``"debug_default"`` (``randomize_actions=False`` by default, so every cell maps
    action 1 to right: bsuite's debug mode) or ``"ones_mapping"`` (the instance's mapping all ones,
    so even ``randomize_actions=True`` is bsuite's debug mode)."""
    import jax.numpy as jnp

    ds = _gymnax_module("bsuite.deep_sea")

    if which == "debug_default":
        class DeepSeaDebugDefault(ds.DeepSea):
            @property
            def default_params(self):
                return ds.EnvParams(max_steps_in_episode=self.size, randomize_actions=False)

        return DeepSeaDebugDefault()
    if which == "ones_mapping":
        class DeepSeaOnesMapping(ds.DeepSea):
            def __init__(self, size: int = 8):
                super().__init__(size)
                self.action_mapping = jnp.ones((size, size), jnp.int32)

        return DeepSeaOnesMapping()
    raise ValueError(f"no DeepSea bug {which!r}; the bugs are debug_default, ones_mapping")


# ---- the originals ---------------------------------------------------------------------------------


def _import_bsuite_deep_sea():
    """bsuite's DeepSea class. bsuite's package imports ``skimage.transform`` for an image wrapper
    DeepSea never uses: a stub stands in when scikit-image is not installed."""
    try:
        import skimage.transform  # noqa: F401
    except ImportError:
        stub = types.ModuleType("skimage")
        stub.transform = types.ModuleType("skimage.transform")
        sys.modules.setdefault("skimage", stub)
        sys.modules.setdefault("skimage.transform", stub.transform)
    from bsuite.environments import deep_sea

    return deep_sea.DeepSea


def bsuite_deep_sea_reference(size: int = 8):
    """A zero-argument factory of bsuite's DeepSea(size) as a `gymnasium.Env` (ours: dm_env's
    ``TimeStep`` read as Gymnasium's 5-tuple, ``terminated`` at a ``LAST`` step with discount 0),
    under a `gymnasium.wrappers.TimeLimit` of ``size`` steps (the port's ``max_steps_in_episode``).

    The action mapping is a random draw per instance in both libraries (bsuite from
    ``mapping_seed``, gymnax 1.0.1 from ``action_mapping_key``, ``jax.random.key(0)`` by default):
    the reference is given the default gymnax instance's draw, so that a faithful port and the
    original agree cell by cell."""
    import gymnasium
    import numpy as np

    bsuite_deep_sea = _import_bsuite_deep_sea()
    mapping = np.asarray(_gymnax_module("bsuite.deep_sea").DeepSea(size).action_mapping)

    class BsuiteDeepSea(gymnasium.Env):
        metadata = {"render_modes": []}

        def __init__(self):
            self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (size, size), np.float32)
            self.action_space = gymnasium.spaces.Discrete(2)
            self.env = None

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            if self.env is None:
                self.env = bsuite_deep_sea(size=size, seed=seed)
                self.env._action_mapping = mapping.copy()
            return np.asarray(self.env.reset().observation, np.float32), {}

        def step(self, action):
            ts = self.env.step(int(action))
            return np.asarray(ts.observation, np.float32), float(ts.reward), bool(ts.last()), False, {}

    def factory():
        return gymnasium.wrappers.TimeLimit(BsuiteDeepSea(), max_episode_steps=size)

    factory.__qualname__ = f"bsuite DeepSea(size={size})"
    return factory


def deep_sea_state(ref):
    """gymnax 1.0.1's DeepSea ``EnvState`` at the bsuite reference's current state."""
    import numpy as np

    from jaxenvs.adapters.gymnax_states import elapsed_steps

    ds = _gymnax_module("bsuite.deep_sea")
    e = ref.unwrapped.env
    return ds.EnvState(
        row=np.int32(e._row), column=np.int32(e._column), bad_episode=np.bool_(e._bad_episode),
        total_bad_episodes=np.int32(e._total_bad_episodes), denoised_return=np.int32(e._denoised_return),
        optimal_return=np.float32(e._optimal_return), action_mapping=np.asarray(e._action_mapping, np.int32),
        time=np.int32(elapsed_steps(ref)),
    )


def gymnasium_reference(env_id: str, **kwargs):
    def factory():
        import gymnasium

        return gymnasium.make(env_id, **kwargs)

    factory.__qualname__ = f"gymnasium.make({env_id!r})"
    return factory


# ---- the triples ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Triple:
    """One historical bug: `buggy()` and `fixed()` build the gymnax env instances, `reference()`
    the original's factory, `settings` the `verify_port` keywords beyond the default call (by
    name; `state_to_jax` named by its mapping); `citation` follows `CITATION_SCHEMA`."""

    name: str
    env: str
    original: str
    citation: dict
    buggy_source: str
    buggy: Callable[[], Any]
    fixed: Callable[[], Any]
    reference: Callable[[], Callable[[], Any]]
    state_to_jax: str | None = None  # a key of _state_maps()
    settings: dict = dataclasses.field(default_factory=dict)
    supplementary: dict | None = None  # settings of a second run (a "policy" named by a key of POLICIES)
    # a jaxenvs TimeLimit around the port, longer than any faithful episode (it never binds there): it
    # sets the horizon verify_port stores episodes at (else HORIZON, 1,000 steps)
    port_time_limit: int | None = None
    library: str = "gymnax"
    fixed_source: str = "gymnax 1.0.1 (PyPI release, the gymnax extra)"


def balance_cartpole(key, obs):
    """A deterministic CartPole controller (push toward the side the pole falls to, damped by the
    cart's drift): every one of 200 Gymnasium CartPole-v1 episodes (seeds 0-199) reaches the
    500-step limit under it, where a uniformly random policy's episodes last 22 steps on average."""
    import jax.numpy as jnp

    del key
    return (jnp.asarray(obs) @ jnp.array([0.05, 0.2, 1.0, 0.5]) > 0).astype(jnp.int32)


POLICIES = {"balance_cartpole": balance_cartpole}


def _state_maps():
    from jaxenvs.adapters.gymnax_states import STATE_TO_JAX

    return {**STATE_TO_JAX, "bsuite DeepSea": deep_sea_state}


def _classic(cls_path: str, cls_name: str):
    return getattr(_gymnax_module(f"classic_control.{cls_path}"), cls_name)


def _link(kind: str, ref: str) -> str:
    return f"https://github.com/{GYMNAX}/{kind}/{ref}"


_TIMEOUT = dict(
    repository=GYMNAX, introduced="gymnax 0.0.2 (first API release, 2022-06-15)",
    fixed="commit f960cd4 (2022-06-18, first released in 0.0.5)", links=[_link("commit", "f960cd4")],
)
_DONE = dict(
    repository=GYMNAX, introduced="gymnax 0.0.1-0.0.9 (one done flag)",
    fixed="commit e01c3bc, six-value step API (gymnax 1.0.0, 2026-08-16)", links=[_link("commit", "e01c3bc")],
)
_FROZEN = dict(
    repository=GYMNAX, introduced="commit f07fd09 (2025-07-11, on main, never released)",
    fixed="commit 78a0f33 (2026-08-15, gymnax 1.0.0)", links=[_link("commit", "f07fd09"), _link("commit", "78a0f33")],
)
_DEEPSEA = dict(
    repository=GYMNAX, introduced="gymnax 0.0.2-0.0.9", fixed="commit fe60e28 (2026-08-15, gymnax 1.0.0)",
    links=[_link("commit", "fe60e28"), _link("pull", "101"), _link("issues", "77")],
)


def triples() -> list[Triple]:
    t = []
    for env_id, path, cls in (("MountainCar-v0", "mountain_car", "MountainCar"), ("Acrobot-v1", "acrobot", "Acrobot"),
                              ("CartPole-v1", "cartpole", "CartPole")):
        short = cls.lower()
        t.append(Triple(
            f"{short}-timeout-off-by-one", f"gymnax {env_id}", f"Gymnasium {env_id}",
            dict(_TIMEOUT, nature="the time limit ends the episode one step late (time > max_steps instead of >=)"),
            "gymnax 1.0.1 patched: is_truncated tests time > max_steps_in_episode",
            lambda p=path, c=cls: _timeout_off_by_one(_classic(p, c))(),
            lambda p=path, c=cls: _classic(p, c)(),
            lambda e=env_id: gymnasium_reference(e), state_to_jax=env_id,
            supplementary={"policy": "balance_cartpole"} if cls == "CartPole" else None,
        ))
        t.append(Triple(
            f"{short}-time-limit-as-termination", f"gymnax {env_id}", f"Gymnasium {env_id}",
            dict(_DONE, nature="the time limit is reported as a termination (one done flag, no truncation)"),
            "gymnax 1.0.1 patched: step_env's terminated includes time >= max_steps, is_truncated never",
            lambda p=path, c=cls: _done_folds_time_limit(_classic(p, c))(),
            lambda p=path, c=cls: _classic(p, c)(),
            lambda e=env_id: gymnasium_reference(e), state_to_jax=env_id,
            supplementary={"policy": "balance_cartpole"} if cls == "CartPole" else None,
        ))
    t.append(Triple(
        "acrobot-angle-wrap", "gymnax Acrobot-v1", "Gymnasium Acrobot-v1",
        dict(repository=GYMNAX, introduced="gymnax 0.0.2-0.0.5", fixed="commit 6ff8969 (2023-03-09, gymnax 0.0.6)",
             links=[_link("commit", "6ff8969")],
             nature="joint angles just below -pi are not wrapped into [-pi, pi)"),
        "gymnax 1.0.1 patched: acrobot.wrap replaced by the pre-6ff8969 arithmetic while the subclass's step traces",
        acrobot_wrap_bug, lambda: _classic("acrobot", "Acrobot")(),
        lambda: gymnasium_reference("Acrobot-v1"), state_to_jax="Acrobot-v1",
    ))
    t.append(Triple(
        "pendulum-reward-shape", "gymnax Pendulum-v1", "Gymnasium Pendulum-v1",
        dict(repository=GYMNAX, introduced="gymnax 0.0.2-0.0.5 (issue #43, 2023-03-11)",
             fixed="commit b3a4e29 (PR #44, 2023-03-11; gymnax 0.0.6)",
             links=[_link("issues", "43"), _link("pull", "44"), _link("commit", "b3a4e29")],
             nature="the reward has shape (1,), not a scalar (under vmap [B, 1], which broadcasts against [B])"),
        "gymnax 1.0.1 patched: step_env returns the reward unsqueezed, shape (1,)",
        lambda: _unsqueezed_reward(_classic("pendulum", "Pendulum"))(), lambda: _classic("pendulum", "Pendulum")(),
        lambda: gymnasium_reference("Pendulum-v1"), state_to_jax="Pendulum-v1",
    ))
    fl_nature = {
        "actions": "actions 1 and 2 (down, right) are swapped",
        "slip": "a slip draws any of the four actions (the reverse included), not one of the two perpendicular ones",
        "obs_space": "the observation space is Box(0, 15, (1,), int32), not Discrete(16)",
    }
    for which, nature in fl_nature.items():
        t.append(Triple(
            f"frozenlake-{which.replace('_', '-')}", "gymnax FrozenLake-misc", "Gymnasium FrozenLake-v1",
            dict(_FROZEN, nature=nature),
            f"gymnax 1.0.1 patched with f07fd09's {which.replace('_', ' ')} (frozen_lake_bug({which!r}))",
            lambda w=which: frozen_lake_bug(w), lambda: _gymnax_module("misc.frozen_lake").FrozenLake(),
            lambda: gymnasium_reference("FrozenLake-v1"),
        ))
    ds_nature = {
        "debug_default": "randomize_actions defaults to False: action 1 moves right in every cell (bsuite's debug mode)",
        "ones_mapping": "the action mapping is all ones even with randomize_actions=True",
    }
    for which, nature in ds_nature.items():
        t.append(Triple(
            f"deepsea-{which.replace('_', '-')}", "gymnax DeepSea-bsuite", "bsuite DeepSea(size=8)",
            dict(_DEEPSEA, nature=nature), f"gymnax 1.0.1 patched (deep_sea_bug({which!r}))",
            lambda w=which: deep_sea_bug(w), lambda: _gymnax_module("bsuite.deep_sea").DeepSea(8),
            bsuite_deep_sea_reference,
            # every episode lasts exactly 8 steps, so only the returns' small differences tell the ports
            # apart: the default call's 60 CPU s stop near 1,000 episodes, about 72,000 are needed. A time
            # limit of 16 steps (twice any episode's 8) stores episodes at 16 steps, not 1,000
            settings={"max_episodes": 100_000, "budget_s": 480.0}, port_time_limit=16,
        ))
    return t


# ---- running -------------------------------------------------------------------------------------


def _versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("jax", "jaxenvs", "gymnax", "gymnasium", "bsuite"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            mod = sys.modules.get(pkg)
            out[pkg] = getattr(mod, "__version__", None) if mod else None
    return out


def run_side(triple: Triple, instance, overrides: dict | None = None) -> dict:
    """`verify_port` of one gymnax instance against the triple's original (the triple's settings,
    then `overrides`: `verify_port` keywords): the side's fields of `SIDE_SCHEMA`. An exception
    other than a verdict is recorded as verdict ``"error"``."""
    from jaxenvs.envs.gymnax_env import GymnaxEnv
    from jaxenvs.testing import verify_port
    from jaxenvs.testing.report import PortMismatch

    kwargs = {**triple.settings, **(overrides or {})}
    if isinstance(kwargs.get("policy"), str):
        kwargs["policy"] = POLICIES[kwargs["policy"]]
    if triple.state_to_jax:
        kwargs["state_to_jax"] = _state_maps()[triple.state_to_jax]
    env = GymnaxEnv(instance)
    if triple.port_time_limit is not None:
        from jaxenvs.wrappers import TimeLimit

        env = TimeLimit(env, triple.port_time_limit)
    t0, c0 = time.perf_counter(), time.process_time()
    report, message = None, ""
    try:
        report = verify_port(env, triple.reference(), raise_inconclusive=False, **kwargs)
        verdict = report.verdict
    except PortMismatch as e:
        report, verdict, message = e.report, "fail", str(e)
    except Exception as e:  # a port that cannot be run is recorded, not hidden
        verdict, message = "error", f"{type(e).__name__}: {e}"
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    failed = list(report.failed) if report is not None else []
    first = failed[0] if failed else None
    if report is not None and verdict == "fail" and first is None and not message:
        message = "fail"
    if report is not None and verdict == "inconclusive":
        short = [f"{s.name} ({s.tier}): detects {s.detectable:.3g} > {report.detect}" for s in report.undetermined]
        message = "; ".join(short) + (f"; about {report.episodes_needed} episodes would do" if report.episodes_needed else "")
    elif report is not None and verdict != "fail":
        message = "; ".join(report.notes[-1:]) if report.notes else ""
    if verdict == "fail" and first is None and message:  # a phase-1 mismatch (spaces, agents)
        caught_by = message.split(":")[0]
    else:
        caught_by = first.name if first else None
    return {
        "verdict": verdict, "caught_by": caught_by, "tier": first.tier if first else None,
        "p_value": float(first.p_value) if first else None, "message": message[:600],
        "episodes": int(report.num_episodes) if report is not None else 0,
        "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
        "budget_s": float(report.budget_s) if report is not None and report.budget_s is not None else None,
    }


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_triple(triple: Triple, overrides: dict | None = None) -> dict:
    """Run the buggy then the fixed side (`verify_port` keywords `overrides` on top of the
    triple's settings); the record of `SCHEMA` (not written)."""
    load0 = _load()
    record = {
        "name": triple.name, "library": triple.library, "env": triple.env, "original": triple.original,
        "citation": dict(triple.citation), "buggy_source": triple.buggy_source, "fixed_source": triple.fixed_source,
        "settings": {**triple.settings, **(overrides or {}),
                     **({"state_to_jax": triple.state_to_jax} if triple.state_to_jax else {}),
                     **({"port_time_limit": triple.port_time_limit} if triple.port_time_limit else {})},
        "versions": {}, "buggy": None, "fixed": None, "outcome": "not-run", "why": "", "load": {},
        "command": f"python benchmarks/real_bugs.py --only {triple.name}", "supplementary": None,
    }
    try:
        triple.reference()()
        buggy, fixed = triple.buggy(), triple.fixed()
    except Exception as e:  # an original or port that cannot be built here
        record["why"] = f"cannot be built here: {type(e).__name__}: {e}"
        record["versions"], record["load"] = _versions(), {"before": load0, "after": _load()}
        return record
    record["buggy"] = run_side(triple, buggy, overrides)
    record["fixed"] = run_side(triple, fixed, overrides)
    record["versions"], record["load"] = _versions(), {"before": load0, "after": _load()}
    record["outcome"], record["why"] = _judge(triple.name, record["buggy"], record["fixed"])
    if triple.supplementary is not None and record["outcome"] == "missed":
        more = {**(overrides or {}), **triple.supplementary}
        sb, sf = run_side(triple, buggy, more), run_side(triple, fixed, more)
        outcome, why = _judge(triple.name + " (supplementary)", sb, sf)
        record["supplementary"] = {"settings": more, "buggy": sb, "fixed": sf, "outcome": outcome, "why": why}
        record["load"]["after"] = _load()
    return record


def _judge(name: str, b: dict, f: dict) -> tuple[str, str]:
    outcome = outcome_of(b, f)
    if outcome == "fixed-failed":
        return outcome, f"the fixed port's verdict is {f['verdict']}: {f['message'][:300]}"
    if outcome == "missed":
        return outcome, MISS_REASONS.get(name, f"the buggy port's verdict is {b['verdict']}")
    return outcome, ""


# Why a miss is a miss, where it is understood (checked against the published record's verdicts by
# tests/test_real_bugs.py: a reason is only given for a triple that missed).
MISS_REASONS = {
    "cartpole-timeout-off-by-one": "verify_port's default policy is uniformly random: its CartPole episodes end after "
    "about 22 steps and none reaches the 500-step limit where the two ports differ",
    "cartpole-time-limit-as-termination": "as for the off-by-one: under the random policy no episode reaches the "
    "500-step limit, so no time-limit end is ever reported",
    "acrobot-angle-wrap": "the state's angles differ by whole turns only, and every observation (cos and sin of the "
    "angles), reward and termination test is periodic in them: the bug has no observable effect",
}


def _table(records: list[dict]) -> str:
    lines = [
        "| triple | port | original | nature of the bug | fix | buggy | fixed | caught by | outcome |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        b, f = r["buggy"] or {}, r["fixed"] or {}
        side = lambda s: f"{s.get('verdict', '-').upper()} ({s.get('wall_s', 0):.0f} s)" if s else "-"
        stated = ", ".join(f"{k}={v}" for k, v in r["settings"].items() if k != "state_to_jax")
        cells = [r["name"], r["env"], r["original"], r["citation"]["nature"], r["citation"]["fixed"], side(b), side(f),
                 b.get("caught_by") or "-", r["outcome"] + (f" ({stated})" if stated else "")]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    caught = sum(r["outcome"] == "caught" for r in records)
    stated = sum(r["outcome"] != "caught" and (r.get("supplementary") or {}).get("outcome") == "caught" for r in records)
    missed = [r for r in records if r["outcome"] != "caught"]
    not_passed = sum(r["outcome"] == "fixed-failed" for r in records)
    lines += ["", f"{caught + stated} of {len(records)} caught: {caught} by the triple's call (the default call, or "
              f"the settings the table's row states), {stated} more by a supplementary run at its stated settings; "
              f"fixed ports that did not pass: {not_passed}; not run: "
              f"{sum(r['outcome'] == 'not-run' for r in records)}.", ""]
    for r in missed:
        lines.append(f"* **{r['name']}** ({r['outcome']}): {r['why']}")
        more = r.get("supplementary")
        if more:
            settings = ", ".join(f"{k}={v}" for k, v in more["settings"].items())
            lines.append(f"  Supplementary run with {settings}: buggy {more['buggy']['verdict'].upper()} "
                         f"({more['buggy']['caught_by'] or '-'}), fixed {more['fixed']['verdict'].upper()}: "
                         f"{more['outcome']}{'; ' + more['why'] if more['why'] else ''}.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default="", help="comma-separated triple names (default: all)")
    p.add_argument("--list", action="store_true", help="list the triples and exit")
    p.add_argument("--tables", action="store_true", help="only rewrite the tables from the JSONs present")
    p.add_argument("--budget-s", type=float, default=None, help="verify_port's budget_s (default: its own)")
    p.add_argument("--out", default=OUT, help="results folder (default: %(default)s)")
    args = p.parse_args(argv)
    all_triples = triples()
    names = [t.name for t in all_triples]
    only = [n for n in args.only.split(",") if n]
    unknown = sorted(set(only) - set(names))
    if unknown:
        p.error(f"unknown triple(s) {', '.join(unknown)}; the triples are: {', '.join(names)}")
    if args.budget_s is not None and not args.budget_s > 0:
        p.error(f"--budget-s must be > 0, got {args.budget_s}")
    if args.list:
        for t in all_triples:
            print(f"{t.name}: {t.env} vs {t.original}; {t.citation['nature']} ({t.citation['fixed']})")
        return 0
    if args.tables:
        write_tables(load_records(args.out), args.out, DOCS if args.out == OUT else None)
        return 0
    os.environ.setdefault("JAXENVS_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "jaxenvs"))
    os.makedirs(args.out, exist_ok=True)
    for t in all_triples:
        if only and t.name not in only:
            continue
        print(f"[{time.strftime('%H:%M:%S')}] {t.name} (load {_load()})", flush=True)
        record = run_triple(t, {"budget_s": args.budget_s} if args.budget_s is not None else None)
        problems = check_record(record)
        if problems:
            raise SystemExit(f"{t.name}: the record does not follow SCHEMA: {problems}")
        with open(os.path.join(args.out, f"{t.name}.json"), "w") as fh:
            json.dump(record, fh, indent=2)
            fh.write("\n")
        b, f = record["buggy"] or {}, record["fixed"] or {}
        print(f"    buggy {b.get('verdict')} ({b.get('caught_by')}), fixed {f.get('verdict')}: {record['outcome']}", flush=True)
    write_tables(load_records(args.out), args.out, DOCS if args.out == OUT else None)
    return 0


def load_records(folder: str = OUT) -> list[dict]:
    """The published records of `folder`, in `triples()` order."""
    records = []
    for t in triples():
        path = os.path.join(folder, f"{t.name}.json")
        if os.path.exists(path):
            with open(path) as fh:
                records.append(json.load(fh))
    return records


def write_tables(records: list[dict], folder: str = OUT, docs: str | None = DOCS) -> None:
    """The results table into ``folder/README.md`` and, with `docs`, between that page's `MARKERS`."""
    table = _table(records)
    with open(os.path.join(folder, "README.md"), "w") as fh:
        fh.write("# Real bugs of third-party JAX ports, through verify_port\n\n"
                 "Regenerated by `python benchmarks/real_bugs.py` (see docs/real-bugs.md). Seconds are wall "
                 "time on a shared 2-core machine; each JSON has CPU seconds and the load.\n\n")
        fh.write(table)
    if docs:
        with open(docs) as fh:
            page = fh.read()
        head, rest = page.split(MARKERS[0], 1)
        _, tail = rest.split(MARKERS[1], 1)
        with open(docs, "w") as fh:
            fh.write(f"{head}{MARKERS[0]}\n{table}{MARKERS[1]}{tail}")


if __name__ == "__main__":
    sys.exit(main())
