"""What `verify_port` returns and raises: each `Statistic` it compared, the `PortReport` (a
certificate: `to_json`, `save`, a table as `str`), and the two failures `PortMismatch` and
`PortInconclusive` (both `AssertionError`s, so a test that calls `verify_port` fails with the
evidence in its message)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any

__all__ = ["Statistic", "PortReport", "PortMismatch", "PortInconclusive", "TIERS", "VERDICTS", "WIDTH"]

# the tiers, strongest first: what each statistic's comparison rests on
TIERS = {
    "exact": "the port replays the reference's states and trajectories; any difference fails",
    "model": "the port's outcome distribution per (state, action) against the reference's exact probabilities",
    "from-state": "the reference's outcome at each visited reference state ranked among the port's draws there",
    "sample": "two-sample test of the port's and the reference's episodes",
}
VERDICTS = ("pass", "fail", "inconclusive")


@dataclasses.dataclass(frozen=True)
class Statistic:
    """One comparison of the port with the reference.

    `tier` is `"exact"`, `"model"` or `"sample"` (see `TIERS`); `test` names the test (e.g.
    `"chi-square"`, `"ks"`, `"fisher/chi-square per stratum"`, `"goodness of fit"`, `"replay"`);
    `p_value` is the probability of a difference at least as large if the port were faithful (an
    exact comparison gives 0 or 1). `detectable` is the smallest effect this sample detects with
    the run's `power` at the per-statistic level: a total-variation distance (`effect="tv"`), a
    Kolmogorov-Smirnov distance (`"ks"`) or 0 for an exact comparison (`"exact"`). `required`
    statistics decide the verdict; the others (implied by a stronger tier that covers the same
    behaviour) can still fail the run. `needed` says, where `detectable > detect`, how many
    episodes or draws would bring it down; `port` and `reference` summarise the two sides.
    """

    name: str
    tier: str
    test: str
    p_value: float
    detectable: float
    effect: str
    n_port: int
    n_reference: int
    required: bool = True
    port: str = ""
    reference: str = ""
    needed: str = ""
    goal: float | None = None  # the effect it must detect, when not the run's detect (the local guarantee's)
    local: dict | None = None  # the local guarantee: coverage, detect_local, bound, weakest, worst (see PortReport)

    def target(self, detect: float) -> float:
        """The effect this statistic must detect for a pass: `goal`, else the run's `detect`."""
        return detect if self.goal is None else self.goal

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class PortReport:
    """What `verify_port` compared and concluded: a certificate a user can commit next to the env.

    `verdict` is `"pass"` (no statistic rejected at `threshold` and every required statistic's
    `detectable <= detect`), `"fail"` (some statistic rejected, or an exact comparison differed)
    or `"inconclusive"` (nothing rejected, but some required statistic could not detect `detect`
    within the budget; `episodes_needed` says how many episodes would). `threshold` is the level
    each statistic is judged at: `alpha` divided by the number of statistics and by the number of
    sampling rounds the budget allows (Bonferroni), so a faithful port fails with probability at
    most `alpha`. `cache` says whether the reference's rollouts came from a `ReferenceCache`.

    Two guarantees: `detect` bounds the visitation-weighted effect (e.g. `sum_s w_s TV_s` over
    the `(observation, action)` strata); `detect_local` bounds the total variation at every
    stratum holding at least `coverage` of the visits. `local` (the property) says how the second
    was certified: exactly (an exact tier), per stratum (the bound, the weakest covered stratum,
    the most different one, the strata below `coverage` and their share), or not at all (no
    strata: real-valued observations without an exact tier).
    """

    port: str
    port_id: str | None
    reference: str
    versions: dict
    verdict: str
    tiers: tuple[str, ...]
    num_episodes: int
    horizon: int
    seed: int
    alpha: float
    detect: float
    power: float
    threshold: float
    spaces: tuple[str, ...]
    statistics: tuple[Statistic, ...]
    states_checked: int  # reference states the port stepped from (state_to_jax), 0 without
    episodes_needed: int | None
    cache: str | None
    seconds: float
    notes: tuple[str, ...] = ()
    budget_s: float | None = None  # the time budget the run drew episodes within
    budget_needed_s: float | None = None  # about the budget that would have certified detect (inconclusive runs)
    coverage: float | None = None  # the share of visits from which a stratum is covered by the local guarantee
    detect_local: float | None = None  # the total variation every covered stratum must be certified below

    @property
    def failed(self) -> tuple[Statistic, ...]:
        """The statistics that rejected the port."""
        return tuple(s for s in self.statistics if s.p_value < self.threshold)

    @property
    def undetermined(self) -> tuple[Statistic, ...]:
        """Required statistics whose sample could not detect `detect`."""
        return tuple(s for s in self.statistics if s.required and s.detectable > s.target(self.detect))

    @property
    def local(self) -> dict | None:
        """The local guarantee: `{"how": "exact" | "per stratum" | "none", ...}` with, per
        stratum, `bound` (the total variation certified at every covered stratum with
        probability `power`), `weakest` (the covered stratum where that bound is reached, with
        its share and samples), `worst` (the covered stratum whose observed total variation is
        largest), `covered`, `uncovered` and `uncovered_share`. None for a report without the
        settings (an old certificate)."""
        if self.detect_local is None:
            return None
        if "exact" in self.tiers:  # every replayed step agrees: no stratum differs at all
            return {"how": "exact", "bound": 0.0}
        if "model" in self.tiers:  # every pair reached is tested against exact probabilities on its own
            return {"how": "model", "bound": max(s.detectable for s in self.statistics if s.tier == "model")}
        local = [s for s in self.statistics if s.local is not None]
        if local:
            return {"how": "per stratum", "statistic": local[0].name, **local[0].local}
        return {"how": "none"}

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["statistics"] = [s.as_dict() for s in self.statistics]
        d["tier_meanings"] = {t: TIERS[t] for t in self.tiers}
        if self.detect_local is not None:
            d["local"] = self.local
        return d

    def to_json(self, indent: int | None = 2) -> str:
        """The certificate as JSON (p-values below 1e-300 written as 0)."""

        def clean(x):
            if isinstance(x, float) and not math.isfinite(x):
                return None
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            if isinstance(x, (list, tuple)):
                return [clean(v) for v in x]
            return x

        return json.dumps(clean(self.as_dict()), indent=indent)

    def save(self, path: str | os.PathLike) -> str:
        """Write `to_json()` to `path` (a `.json` file); returns the path."""
        path = os.fspath(path)
        with open(path, "w") as f:
            f.write(self.to_json() + "\n")
        return path

    def __str__(self) -> str:
        """The report as text, every line within `WIDTH` columns: the run's settings, then each
        statistic with its result, what it compared and its figures in words, and under the ones
        that failed or fell short both sides' values and what more it needs."""
        head = [
            f"verdict: {self.verdict.upper()}",
            f"port: {self.port}",
            f"reference: {self.reference}",
            f"{self.num_episodes} episodes (horizon {self.horizon}), seed {self.seed}; {self.seconds:.1f} s"
            + (f"; {self.cache}" if self.cache else ""),
            f"alpha={self.alpha:g} (a statistic fails at a p-value below {self.threshold:.3g}), detect={self.detect:g}, "
            f"power={self.power:g}",
            *self.spaces,
        ]
        lines = [w for line in head for w in _wrap(line, "")]
        lines += ["", f"{len(self.statistics)} statistics (p-value: the chance of a difference at least this large from a "
                      f"faithful port; detectable: the smallest difference the sample sees with probability {self.power:g}):"]
        lines = [w for line in lines for w in _wrap(line, "")]
        for s in self.statistics:
            rejected = s.p_value < self.threshold
            short = s.required and s.detectable > s.target(self.detect)
            result = "FAIL" if rejected else ("too few samples" if short else "ok")
            role = "required" if s.required else "supporting"
            lines += _wrap(f"{result}: {s.name} ({role}; {s.tier} tier, {s.test})", "  ")
            lines += _wrap(f"p-value {s.p_value:.3g}; {_detectable_words(s, s.target(self.detect))}; {_samples_words(s)}",
                           "    ")
            if rejected or short:
                lines += _wrap(f"port: {s.port}", "    ") + _wrap(f"reference: {s.reference}", "    ")
                if s.needed:
                    lines += _wrap(s.needed, "    ")
        line = self.local_line()
        if line:
            lines += _wrap(f"local: {line}", "  ")
        if self.verdict == "inconclusive" and self.episodes_needed:
            lines.append(f"  episodes needed: about {self.episodes_needed:,}")
        for n in self.notes:
            lines += _wrap(f"note: {n}", "  ")
        return "\n".join(lines)

    def local_line(self) -> str:
        """The local guarantee in one line (empty for a report without its settings)."""
        loc = self.local
        if loc is None:
            return ""
        cov, dl = self.coverage, self.detect_local
        if loc["how"] == "exact":
            return f"every stratum exact (the exact tier: detect_local={dl:g} holds at every state visited)"
        if loc["how"] == "model":
            return (f"every (observation, action) pair reached, against the exact probabilities: total variation <= "
                    f"{loc['bound']:.3g} at each (detect_local={dl:g})")
        if loc["how"] == "none":
            return (f"no strata (real-valued observations or actions, no exact tier): detect_local={dl:g} is not "
                    "certified; only the weighted effect is")
        w, worst = loc.get("weakest"), loc.get("worst")
        if w is None:
            return f"no stratum holds {cov:g} of the visits"
        held = "certified" if loc["bound"] <= dl else "NOT certified"
        out = (f"every stratum with >= {cov:g} of the visits ({loc['covered']} strata) differs by total variation <= "
               f"{loc['bound']:.3g} "
               f"with power {self.power:g}: detect_local={dl:g} {held}; the weakest bound at {w['where']} "
               f"({w['share']:.3f} of visits, samples: port {w['n_port']}, reference {w['n_reference']})")
        if worst is not None:
            out += f"; most different: {worst['where']} (observed total variation {worst['tv']:.3f}, {worst['share']:.3f} of visits)"
        if loc["uncovered"]:
            out += f"; {loc['uncovered']} rarer strata ({loc['uncovered_share']:.4f} of visits) not covered"
        return out


WIDTH = 100  # the columns every line of a report's text fits in

# what each statistic's `effect` measures, in words
_EFFECT_WORDS = {
    "tv": "total variation",
    "ks": "Kolmogorov-Smirnov distance",
    "weighted tv": "weighted total variation",
    "local tv": "total variation at each covered stratum",
    "rank ks": "Kolmogorov-Smirnov distance of the ranks from uniform",
    "games differing": "share of games differing",
}
_EFFECT_NOTES = {"weighted tv": "visitation-weighted, "}


def _detectable_words(s: Statistic, bound: float) -> str:
    """``weighted total variation 3.33e-16 (visitation-weighted, bound 0.02)``: the effect the
    statistic's sample detects, named in words, with the bound a pass needs."""
    if s.effect == "exact":
        return "exact comparison (any difference fails)"
    words = _EFFECT_WORDS.get(s.effect, s.effect)
    return f"detectable {words} {s.detectable:.3g} ({_EFFECT_NOTES.get(s.effect, '')}bound {bound:g})"


def _samples_words(s: Statistic) -> str:
    """The sample sizes in words: the model tier draws the port against exact probabilities (no
    reference samples), the from-state tier draws the port at reference states."""
    if s.tier == "model" and not s.n_reference:
        return f"samples: port {s.n_port:,} draws, reference: its exact probabilities"
    if s.tier == "from-state":
        return f"samples: port {s.n_port:,} draws at {s.n_reference:,} reference states"
    return f"samples: port {s.n_port:,}, reference {s.n_reference:,}"


def _wrap(text: str, indent: str, width: int = WIDTH) -> list[str]:
    """``text`` as lines of at most ``width`` columns starting with ``indent``: broken at its
    clauses ("; ") first, a clause still too long at its spaces, continuation lines indented two
    more columns."""
    import textwrap

    if len(indent) + len(text) <= width:
        return [indent + text]
    more = indent + "  "
    lines: list[str] = []
    current = ""
    for clause in text.split("; "):
        piece = clause if not current else f"{current}; {clause}"
        room = width - len(indent if not lines else more)
        if len(piece) <= room:
            current = piece
            continue
        if current:
            lines.append(current + ";")
        current = clause
        while len(current) > width - len(more):
            first = textwrap.wrap(current, width - len(indent if not lines else more), break_long_words=True,
                                  break_on_hyphens=False)
            lines.append(first[0])
            current = current[len(first[0]):].lstrip()
    if current:
        lines.append(current)
    return [(indent if i == 0 else more) + line for i, line in enumerate(lines)]


class PortMismatch(AssertionError):
    """The port and the reference differ (verdict `"fail"`). `statistic` names what differs (a
    `Statistic`'s name, `"observation space"`, `"action space"`, ...); the message gives both
    sides' values and sample sizes; `report` is the `PortReport` (None when the run stopped
    before any rollout, e.g. at the spaces)."""

    def __init__(self, statistic: str, message: str, report: PortReport | None = None):
        self.statistic = statistic
        self.report = report
        super().__init__(f"{statistic}: {message}")


class PortInconclusive(AssertionError):
    """Nothing rejected the port, but the samples within the budget could not detect an effect
    of size `detect` (verdict `"inconclusive"`); the message names the statistics short of it and
    the episodes they need; `report` is the `PortReport`."""

    def __init__(self, message: str, report: PortReport):
        self.report = report
        super().__init__(message)
