"""The sample tier of `verify_port`: two-sample tests of the port's and the reference's
episodes -- initial observations, episode statistics, and transitions pooled over
(observation, action) strata."""

from __future__ import annotations

import math

import numpy as np

from jaxenvs.testing import stats
from jaxenvs.testing.reference import Side
from jaxenvs.testing.runs import (
    MAX_DRAWS,
    codes,
    fmt_row,
    quantize,
    summary_categorical,
)
from jaxenvs.testing.verdict import Pending, VerifySettings, compare


def _first_visits(side: Side):
    """Per stratum (observation, action), the first visit of every episode: the rows of the alive
    steps as (stratum codes, next-obs+terminated rows, reward rows)."""
    n, t = np.nonzero(side.alive)
    obs, act = side.obs[n, t], side.act[n, t]
    key = np.concatenate([n[:, None].astype(np.float64), obs, act], axis=1)
    _, first = np.unique(codes(key), return_index=True)
    first = np.sort(first)
    strata = codes(np.concatenate([obs, act], axis=1)[first])
    nxt = np.concatenate([side.nobs[n, t], side.term[n, t, None]], axis=1)[first]
    rew = quantize(side.rew[n, t][first])
    return strata, nxt, rew


def transition_statistics(port: Side, ref: Side, settings: VerifySettings) -> list[Pending]:
    """Next observation (with terminated) and reward per (observation, action), first visits,
    pooled over the strata (`stats.pooled_stratified_test`).

    The certified effect is the visitation-weighted total variation `sum_s w_s TV_s`, `w_s` the
    stratum's share of the reference's first visits: what the policy's episodes see of the
    transitions. Strata too rare to pool are listed with their share of visits, which is added to
    the certified effect (a difference there cannot be ruled out); they do not block a pass on their
    own. A large difference in any one stratum still fails it (the pooled test's local half)."""
    power, detect = settings.power, settings.detect
    ps, pn, pr = _first_visits(port)
    rs, rn, rr = _first_visits(ref)
    episodes = len(ref)
    out = []
    for name, px, rx in (
        ("next observation, terminated | (observation, action)", pn, rn),
        ("reward | (observation, action)", pr, rr),
    ):
        cx, cy = codes(px), codes(rx)
        tables = stats.stratified_tables(ps, cx, rs, cy)
        total = max(len(rs), 1)
        weights = {s: float(t[1].sum()) / total for s, t in tables.items()}
        # reference visits in strata the port never reached: outside the pooled strata too
        missing = 1.0 - sum(weights.values())
        res = stats.pooled_stratified_test(tables, weights)
        inv_info, df, rare_share = res["inv_info"], res["df"], res["rare_share"] + max(missing, 0.0)

        def detectable(level, inv_info=inv_info, df=df, rare_share=rare_share):
            if df <= 0:  # one outcome per stratum on both sides: the pooled sum has nothing to vary
                return rare_share if inv_info > 0 else 1.0
            return stats.detectable_weighted_tv(inv_info, df, rare_share, level, power)

        def needed(level, inv_info=inv_info, df=df, rare_share=rare_share):
            if rare_share >= detect or df <= 0:
                return None, f"strata outside the pool hold {rare_share:.3f} of the visits (>= detect)"
            lam = stats.noncentrality(max(df, 1), level / 2, power)
            # inv_info falls as 1 / episodes: the episodes at which sqrt(lam inv_info / 4) + rare = detect
            target = (detect - rare_share) ** 2 * 4 / lam
            n = int(math.ceil(episodes * inv_info / max(target, 1e-300)))
            return n, f"needs about {n:,} episodes"

        worst = _worst_stratum(ps, px, rs, rx) if res["p"] < 1e-3 else ("", "")
        rare = res["rare"]
        rare_txt = ""
        if rare:
            shown = ", ".join(f"{fmt_row(np.frombuffer(bytes(s), np.float64))}: {weights.get(s, 0.0):.4f}" for s in rare[:3])
            rare_txt = f"; {len(rare)} rare strata ({rare_share:.4f} of visits) outside the pool" + (
                f", e.g. {shown}" if shown else "")
        out.append(Pending(
            name, "sample", "pooled chi-square over strata + per-stratum exact", res["p"], "weighted tv", len(ps), len(rs),
            True, f"{len(tables)} strata on both sides, {len(res['pooled'])} pooled (df {df}){worst[0]}",
            f"first visits weighted by the reference's share{rare_txt}{worst[1]}",
            detectable=detectable, needed=needed, kind="transition",
        ))
    return out


def _where(stratum, obs_dims: int) -> str:
    row = np.frombuffer(bytes(stratum), np.float64)
    return f"(observation {fmt_row(row[:obs_dims])}, action {fmt_row(row[obs_dims:])})"


def local_statistic(port: Side, ref: Side, settings: VerifySettings) -> Pending:
    """The local guarantee: the transition (next observation, terminated and reward together) of
    every `(observation, action)` stratum holding at least `coverage` of the reference's first
    visits, tested on its own (`stats.local_strata_test`: Bonferroni over the covered strata).
    The certified effect is the largest total variation any covered stratum could hide with
    probability `1 - power` (`stats.detectable_local`); it must reach `detect_local` (the
    statistic's `goal`), whatever the run's `detect`. A stratum the reference covers and the port
    never visits leaves the run inconclusive there (its visits differ: the pooled statistics say
    where)."""
    power, detect_local, coverage = settings.power, settings.detect_local, settings.coverage
    ps, pn, pr = _first_visits(port)
    rs, rn, rr = _first_visits(ref)
    dims = port.obs.shape[-1]
    px, rx = codes(np.concatenate([pn, pr], axis=1)), codes(np.concatenate([rn, rr], axis=1))
    tables = stats.stratified_tables(ps, px, rs, rx)
    total = max(len(rs), 1)
    ref_counts = {k: len(v) for k, v in stats.group(rs).items()}
    weights = {s: c / total for s, c in ref_counts.items()}
    missing = {s: w for s, w in weights.items() if s not in tables}
    res = stats.local_strata_test(tables, weights, coverage, missing)
    covered, episodes = res["covered"], len(ref)
    for c in covered:
        c["where"] = _where(c["stratum"], dims)
        c["n_reference"] = c["n_reference"] if c["n_reference"] >= 0 else ref_counts[c["stratum"]]
    plain = lambda c: {k: v for k, v in c.items() if k != "stratum"} if c is not None else None  # noqa: E731
    worst = max(covered, key=lambda c: (c["tv"] if c["n_port"] else -1.0, -c["p"]), default=None)

    def detectable(level):
        return stats.detectable_local(covered, level, power)[0] if covered else 0.0

    def bound_at(level):
        bound, weakest = stats.detectable_local(covered, level, power)
        return bound, plain(weakest)

    def needed(level):
        factor = stats.needed_local(covered, detect_local, level, power)
        if factor is None:
            never = next(c for c in covered if c["n_eff"] <= 0)
            return None, (f"the port never visited {never['where']} ({never['share']:.3f} of the reference's visits)")
        n = int(math.ceil(episodes * factor))
        return n, f"needs about {n:,} episodes (every covered stratum at detect_local={detect_local:g})"

    top = sorted(covered, key=lambda c: -c["tv"])[:1]
    port_txt = (f"{len(covered)} strata with >= {coverage:g} of the visits" + "".join(
        f"; most different {c['where']}: total variation {c['tv']:.3f} between the two sides' outcomes "
        f"(port {c['n_port']:,} visits, reference {c['n_reference']:,}; p-value {c['p']:.3g})"
        for c in top))
    ref_txt = (f"{res['uncovered']} rarer strata ({res['uncovered_share']:.4f} of visits) not covered (the pooled "
               "statistics test them)")
    return Pending(
        "transition | (observation, action), each covered stratum", "sample", "per-stratum exact/chi-square, Bonferroni",
        res["p"], "local tv", len(ps), len(rs), True, port_txt, ref_txt, detectable=detectable, needed=needed,
        kind="transition", goal=detect_local,
        local=dict(coverage=coverage, detect_local=detect_local, covered=len(covered), uncovered=res["uncovered"],
                   uncovered_share=res["uncovered_share"], worst=plain(worst), bound_at=bound_at),
    )


def _worst_stratum(ps, px, rs, rx) -> tuple[str, str]:
    """Both sides' outcomes in the stratum whose outcome distributions differ most (total
    variation, among strata with at least 5 samples per side)."""
    best, desc = -1.0, ("", "")
    gp, gr = stats.group(ps), stats.group(rs)
    for s in gp.keys() & gr.keys():
        a, b = px[gp[s]], rx[gr[s]]
        if len(a) < 5 or len(b) < 5:
            continue
        ca, cb = codes(a), codes(b)
        cats = np.unique(np.concatenate([ca, cb]))
        tv = 0.5 * sum(abs(np.mean(ca == c) - np.mean(cb == c)) for c in cats)
        if tv > best:
            best = tv
            row = np.frombuffer(bytes(s), np.float64)
            desc = (
                f"; most different at {fmt_row(row)}: {summary_categorical(ca, a)} ({len(a):,} samples)",
                f"; there {summary_categorical(cb, b)} ({len(b):,} samples)",
            )
    return desc


def episode_statistics(port: Side, ref: Side, settings: VerifySettings) -> list[Pending]:
    out = [
        compare("episode length", port.alive.sum(1), ref.alive.sum(1), settings),
        compare("outcome (0 terminated, 1 truncated, 2 horizon)", port.outcome(), ref.outcome(), settings,
                 categorical=True),
    ]
    p_ret, r_ret = port.returns(), ref.returns()
    joint = compare("return", p_ret, r_ret, settings)
    if joint.effect == "tv" or p_ret.shape[1] == 1:
        out.append(joint)
    else:
        out += [compare(f"return[agent {j}]", p_ret[:, j], r_ret[:, j], settings) for j in range(p_ret.shape[1])]
    return out


def initial_statistics(port0: np.ndarray, ref0: np.ndarray, discrete: bool, settings: VerifySettings,
                       more=None) -> list[Pending]:
    """The initial observation: jointly (categorical when discrete or one-dimensional) and each
    component of a multi-dimensional one; `more(level) -> (port0, ref0)` draws more resets."""
    dims = port0.shape[1]
    out = []
    if discrete or dims == 1:
        out.append(compare("initial observation", port0, ref0, settings, categorical=True if discrete else None,
                            kind="initial"))
    if dims > 1:
        cat = True if discrete else None
        out += [compare(f"initial observation[{j}]", port0[:, j], ref0[:, j], settings, categorical=cat,
                         kind="initial") for j in range(dims)]
    if more is not None:
        for i, s in enumerate(out):
            def top_up(level, i=i, s=s):
                n = s.needed(level)[0] or 0
                if n > MAX_DRAWS:  # beyond the budget: the run is inconclusive without drawing in vain
                    return s
                p0, r0 = more(max(min(int(n * 1.1), MAX_DRAWS), len(port0)))  # a margin: more draws, more categories
                return initial_statistics(p0, r0, discrete, settings)[i]

            s.top_up = top_up
    return out
