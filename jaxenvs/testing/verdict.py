"""A statistic before its level is known (`Pending`): what every tier of `verify_port` returns
and the verdict judges; `compare` (a two-sample comparison) and `exact_statistic` build them."""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import jax
import numpy as np

from jaxenvs.testing import stats
from jaxenvs.testing.report import PortInconclusive, PortMismatch, PortReport, Statistic
from jaxenvs.testing.runs import (
    ALPHA,
    DETECT,
    MAX_CATEGORIES,
    POWER,
    codes,
    quantize,
    summary_categorical,
    summary_real,
)
import jaxenvs

COVERAGE = 0.01  # the local guarantee covers every stratum holding at least this share of the visits ...
DETECT_LOCAL = 0.1  # ... and a pass must be able to detect a total variation this large at each


@dataclasses.dataclass(frozen=True)
class VerifySettings:
    """What a `verify_port` run must certify, checked once here and passed whole to every tier.

    ``alpha``: the probability that a faithful port fails (default `ALPHA`); ``detect``: the
    effect (total variation or KS distance) every required statistic must detect for a pass
    (`DETECT`) with probability ``power`` (`POWER`, more than ``alpha``); ``coverage``: the share of
    the visits from which a stratum is tested on its own (`COVERAGE`), where a pass must detect a
    total variation of ``detect_local`` (`DETECT_LOCAL`). Each is a number in (0, 1); anything else
    is a ValueError naming the field and what is allowed. The fields are stored as floats.
    ``verify_port(env, reference, settings=VerifySettings(detect=0.05))`` is
    ``verify_port(env, reference, detect=0.05)``; ``jaxenvs verify`` builds one from its flags.
    """

    alpha: float = ALPHA
    detect: float = DETECT
    power: float = POWER
    coverage: float = COVERAGE
    detect_local: float = DETECT_LOCAL

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, (float, int, np.floating, np.integer)) or isinstance(v, bool) or not 0 < v < 1:
                raise ValueError(f"verify_port needs {f.name} in (0, 1), got {v!r}")
            object.__setattr__(self, f.name, float(v))
        if self.power <= self.alpha:
            raise ValueError(f"verify_port needs power > alpha, got power={self.power!r}, alpha={self.alpha!r}")


@dataclasses.dataclass
class Pending:
    """A computed comparison whose detectable effect depends on the level it will be judged at:
    `detectable(level) -> effect` and `needed(level) -> (episodes or None, text)`; `top_up(level)`
    (optional) draws more samples and returns the improved comparison."""

    name: str
    tier: str
    test: str
    p_value: float
    effect: str
    n_port: int
    n_reference: int
    required: bool
    port: str
    reference: str
    detectable: Callable[[float], float]
    needed: Callable[[float], tuple[int | None, str]] = lambda level: (None, "")
    top_up: Callable[[float], "Pending"] | None = None
    kind: str = "episode"  # which behaviour it covers: "initial", "transition", "episode"
    goal: float | None = None  # the effect it must detect: None for the run's `detect` (`detect_local`: the local one)
    local: dict | None = None  # the local guarantee's figures (`Statistic.local`)
    rounding: float | None = None  # the one-step tier's largest relative difference (floats), for the replay's drift
    drift: dict | None = None  # the trajectory replay's separated trajectories (exact.replay_trajectories)

    def target(self, detect: float) -> float:
        """The effect this statistic must detect for a pass: its own `goal`, else `detect`."""
        return detect if self.goal is None else self.goal

    def short(self, level: float, detect: float) -> bool:
        """Whether the sample falls short of `target(detect)` at `level`."""
        return self.detectable(level) > self.target(detect)

    def finish(self, level: float, detect: float) -> Statistic:
        d = float(self.detectable(level))
        needed = self.needed(level)[1] if d > self.target(detect) else ""
        local = None
        if self.local is not None:
            local = {k: v for k, v in self.local.items() if not callable(v)}
            local["bound"], local["weakest"] = self.local["bound_at"](level)
        return Statistic(
            self.name, self.tier, self.test, float(self.p_value), d, self.effect, int(self.n_port),
            int(self.n_reference), self.required, self.port, self.reference, needed, self.goal, local,
        )


def exact_statistic(name, ok: bool, n_port, n_ref, port="", reference="", kind="transition") -> Pending:
    return Pending(name, "exact", "replay", 1.0 if ok else 0.0, "exact", n_port, n_ref, True, port, reference,
                    detectable=lambda level: 0.0, kind=kind)


def _episodes_for(per_side: float, have: int, samples_per_episode: float = 1.0) -> int:
    return int(math.ceil(per_side / max(samples_per_episode, 1e-12))) if have else 0


def compare(name: str, x: np.ndarray, y: np.ndarray, settings: VerifySettings, *, categorical: bool | None = None,
             per_episode: float = 1.0, kind: str = "episode") -> Pending:
    """Two-sample comparison of rows `x` [n, D] and `y` [m, D]: categorical when `categorical`
    or (`None`) when at most MAX_CATEGORIES distinct rows occur; else KS (D must be 1).
    `per_episode`: samples each episode contributes (for the episodes needed)."""
    power, detect = settings.power, settings.detect
    x, y = quantize(np.reshape(x, (len(x), -1))), quantize(np.reshape(y, (len(y), -1)))
    cx, cy = codes(x), codes(y)
    n, m = len(x), len(y)
    if categorical is None:
        categorical = len(np.unique(np.concatenate([cx, cy]))) <= MAX_CATEGORIES
    if categorical:
        p = stats.categorical_test(cx, cy)
        df = max(len(np.unique(np.concatenate([cx, cy]))) - 1, 1)

        def needed(level):
            per_side = 2 * stats.needed_tv(detect, df, level, power)
            return _episodes_for(per_side, n, per_episode), f"needs about {int(per_side):,} samples per side"

        return Pending(name, "sample", "chi-square/fisher", p, "tv", n, m, True,
                        summary_categorical(cx, x), summary_categorical(cy, y),
                        detectable=lambda level: stats.detectable_tv(n * m / max(n + m, 1), df, level, power),
                        needed=needed, kind=kind)
    _, p = stats.ks_test(x[:, 0], y[:, 0])

    def needed_ks(level):
        per_side = stats.needed_ks(detect, level, power)
        return _episodes_for(per_side, n, per_episode), f"needs about {per_side:,} samples per side"

    return Pending(name, "sample", "ks", p, "ks", n, m, True, summary_real(x[:, 0]), summary_real(y[:, 0]),
                    detectable=lambda level: stats.detectable_ks(n, m, level, power), needed=needed_ks, kind=kind)


def conclude(ref, port_env, env, seed, settings: VerifySettings, level, space_notes, statistics, t_start, reused,
             mismatch, shortfall, raise_inconclusive, **fields) -> PortReport:
    """The one way a `verify_port` run ends, whatever its tier: its `PortReport` (the port named by
    its repr and spec id, the reference with the versions of both sides, the run's settings, its
    statistics, ``reused`` (what came from a ReferenceCache, ``(what, [ranges])``), the seconds
    since ``t_start``, and ``fields``), raised in a `PortMismatch` when ``mismatch`` names a
    difference (``(statistic, message)``) and in a `PortInconclusive` when ``shortfall`` says what
    is missing and ``raise_inconclusive``; returned otherwise."""
    import time

    name, versions = ref.describe()
    spec = getattr(port_env, "spec", None) or getattr(env, "spec", None)
    what, ranges = reused
    report = PortReport(
        port=repr(port_env), port_id=getattr(spec, "id", None), reference=name,
        versions={"jaxenvs": jaxenvs.__version__, "jax": jax.__version__, **versions},
        seed=seed, alpha=settings.alpha, detect=settings.detect, power=settings.power, threshold=level, spaces=tuple(space_notes),
        statistics=statistics, seconds=time.perf_counter() - t_start,
        cache=f"reference {what} reused from a ReferenceCache ({', '.join(ranges)})" if ranges else None, **fields,
    )
    if mismatch is not None:
        raise PortMismatch(*mismatch, report)
    if shortfall is not None and raise_inconclusive:
        raise PortInconclusive(shortfall, report)
    return report
