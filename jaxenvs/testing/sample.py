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
from jaxenvs.testing.verdict import Pending, compare


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


def transition_statistics(port: Side, ref: Side, power, detect) -> list[Pending]:
    """Next observation (with terminated) and reward per (observation, action), first visits,
    pooled over the strata (`stats.pooled_stratified_test`).

    The certified effect is the visitation-weighted total variation `sum_s w_s TV_s`, `w_s` the
    stratum's share of the reference's first visits: what the policy's episodes see of the
    transitions. Strata too rare to pool are listed with their share of visits, which is added to
    the certified effect (a difference there cannot be ruled out); they do not block a pass on their
    own. A large difference in any one stratum still fails it (the pooled test's local half)."""
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
                f"; most different at {fmt_row(row)}: {summary_categorical(ca, a)} (n={len(a)})",
                f"; there {summary_categorical(cb, b)} (n={len(b)})",
            )
    return desc


def episode_statistics(port: Side, ref: Side, power, detect) -> list[Pending]:
    out = [
        compare("episode length", port.alive.sum(1), ref.alive.sum(1), power, detect),
        compare("outcome (0 terminated, 1 truncated, 2 horizon)", port.outcome(), ref.outcome(), power, detect,
                 categorical=True),
    ]
    p_ret, r_ret = port.returns(), ref.returns()
    joint = compare("return", p_ret, r_ret, power, detect)
    if joint.effect == "tv" or p_ret.shape[1] == 1:
        out.append(joint)
    else:
        out += [compare(f"return[agent {j}]", p_ret[:, j], r_ret[:, j], power, detect) for j in range(p_ret.shape[1])]
    return out


def initial_statistics(port0: np.ndarray, ref0: np.ndarray, discrete: bool, power, detect, more=None) -> list[Pending]:
    """The initial observation: jointly (categorical when discrete or one-dimensional) and each
    component of a multi-dimensional one; `more(level) -> (port0, ref0)` draws more resets."""
    dims = port0.shape[1]
    out = []
    if discrete or dims == 1:
        out.append(compare("initial observation", port0, ref0, power, detect, categorical=True if discrete else None,
                            kind="initial"))
    if dims > 1:
        cat = True if discrete else None
        out += [compare(f"initial observation[{j}]", port0[:, j], ref0[:, j], power, detect, categorical=cat,
                         kind="initial") for j in range(dims)]
    if more is not None:
        for i, s in enumerate(out):
            def top_up(level, i=i, s=s):
                n = s.needed(level)[0] or 0
                if n > MAX_DRAWS:  # beyond the budget: the run is inconclusive without drawing in vain
                    return s
                p0, r0 = more(max(min(int(n * 1.1), MAX_DRAWS), len(port0)))  # a margin: more draws, more categories
                return initial_statistics(p0, r0, discrete, power, detect)[i]

            s.top_up = top_up
    return out
