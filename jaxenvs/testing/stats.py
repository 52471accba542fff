"""The tests and power calculations of `verify_port`, on `scipy.stats`.

Tests (each returns a p-value: the probability, if both sides follow one distribution, of a
difference at least as large):

* `categorical_test` -- two samples of categories: Fisher's exact test for two categories,
  Pearson's chi-square test of homogeneity (`chi2_contingency`) when every expected count is at
  least 5, else each category against the rest by Fisher's exact test, Bonferroni over the
  categories (exact small-sample behaviour: a p-value is never below its true level);
* `ks_test` -- two real samples: Kolmogorov-Smirnov (`ks_2samp`; conservative with ties);
* `stratified_test` -- outcomes grouped in strata (e.g. by `(observation, action)`): the
  `categorical_test` of every stratum, combined by Fisher's method (many strata that each
  differ a little) and by Bonferroni (one stratum that differs a lot), whichever is smaller,
  doubled;
* `goodness_of_fit` -- one sample against exact probabilities: 0 when an outcome of probability
  0 occurs, else Pearson's chi-square (`chisquare`).

Power (what a sample can detect): `detectable_tv` and `detectable_ks` give the smallest
effect -- a total-variation distance between two categorical distributions, a Kolmogorov-Smirnov
distance between two distribution functions -- that the test at level `alpha` rejects with
probability at least `power`; `needed_tv` and `needed_ks` the sample size that brings it
down to a given effect. For the chi-square tests the bound is exact in its asymptotics: the
non-centrality of an alternative at total variation `d` is at least `4 n d^2` (Cauchy-Schwarz:
`(sum |q - p|)^2 <= sum (q - p)^2 / p`), whichever way the difference is spread over the
categories. For KS it follows from the one point where the distribution functions differ by `d`:
there the empirical difference is normal with variance at most `(1/n + 1/m) / 4`.
tests/test_stats.py checks these claims by simulation.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from jaxenvs._optional import require

__all__ = [
    "categorical_test",
    "ks_test",
    "stratified_test",
    "goodness_of_fit",
    "model_test",
    "detectable_tv",
    "detectable_ks",
    "detectable_model",
    "needed_tv",
    "needed_ks",
    "needed_model",
    "pooled_stratified_test",
    "detectable_weighted_tv",
    "rank_test",
    "detectable_rank",
    "needed_rank",
    "noncentrality",
    "group",
    "local_strata_test",
    "detectable_local",
    "needed_local",
]

MIN_EXPECTED = 5  # below this expected count a table is tested exactly (Fisher)


def _st():
    return require("scipy.stats", extra="verify", purpose="jaxenvs.testing.verify_port's statistical tests")


# ---------------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------------


def _table(x_codes, y_codes) -> np.ndarray:
    """int64[2, K]: the counts of each category (sorted) on each side."""
    x_codes, y_codes = np.asarray(x_codes), np.asarray(y_codes)
    _, inverse = np.unique(np.concatenate([x_codes, y_codes]), return_inverse=True)
    inverse = inverse.ravel()
    k = int(inverse.max()) + 1 if len(inverse) else 0
    nx = len(x_codes)
    return np.stack([np.bincount(inverse[:nx], minlength=k), np.bincount(inverse[nx:], minlength=k)])


def table_test(table: np.ndarray) -> float:
    """p-value of homogeneity of a 2 x K table of counts (rows: the two samples)."""
    st = _st()
    table = np.asarray(table)
    table = table[:, table.sum(0) > 0]
    if table.shape[1] < 2 or np.any(table.sum(1) < 2):
        return 1.0  # one sample on a side: no test below p = 1 / (m + 1); 1.0 is conservative
    if table.shape[1] == 2:
        return float(st.fisher_exact(table).pvalue)
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
    if expected.min() >= MIN_EXPECTED:
        return float(st.chi2_contingency(table, correction=False).pvalue)
    # small expected counts: each category against the rest by Fisher's exact test, Bonferroni
    # over the K categories (exact and conservative; a permutation test of the chi-square
    # statistic could not give p-values below 1 / resamples)
    n = table.sum(1)
    ps = [st.fisher_exact(np.array([[c0, n[0] - c0], [c1, n[1] - c1]])).pvalue for c0, c1 in table.T]
    return float(min(1.0, table.shape[1] * min(ps)))


def categorical_test(x_codes, y_codes) -> float:
    """p-value that two samples of categories (any hashable numpy values) share a distribution."""
    return table_test(_table(x_codes, y_codes))


def ks_test(x, y) -> tuple[float, float]:
    """`(statistic, p_value)` of the two-sample Kolmogorov-Smirnov test of real samples."""
    x, y = np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel()
    if len(x) == 0 or len(y) == 0:
        return 0.0, 1.0
    res = _st().ks_2samp(x, y)
    return float(res.statistic), float(res.pvalue)


def group(codes: np.ndarray) -> dict:
    """`{code: indices}` of the rows holding each code."""
    if len(codes) == 0:
        return {}
    uniq, inverse = np.unique(codes, return_inverse=True)
    order = np.argsort(inverse.ravel(), kind="stable")
    bounds = np.cumsum(np.bincount(inverse.ravel(), minlength=len(uniq)))[:-1]
    return {u.item() if hasattr(u, "item") else u: idx for u, idx in zip(uniq, np.split(order, bounds))}


def stratified_tables(strata_x, outcome_x, strata_y, outcome_y) -> dict:
    """`{stratum: 2 x K table}` for the strata both sides sampled."""
    outcome_x, outcome_y = np.asarray(outcome_x), np.asarray(outcome_y)
    sx, sy = group(np.asarray(strata_x)), group(np.asarray(strata_y))
    return {s: _table(outcome_x[sx[s]], outcome_y[sy[s]]) for s in sorted(sx.keys() & sy.keys(), key=repr)}


def stratified_test(strata_x, outcome_x, strata_y, outcome_y) -> tuple[float, int]:
    """`(p_value, number of strata both sides sampled)` that outcomes follow one distribution
    within every stratum (samples independent within and across strata).

    `2 * min(p_fisher, S * min_s p_s)` over the S strata where some outcome varies (a stratum
    with one outcome on both sides has p = 1 given its margins and is left out).
    """
    tables = stratified_tables(strata_x, outcome_x, strata_y, outcome_y)
    ps = [table_test(t) for t in tables.values() if np.count_nonzero(t.sum(0)) >= 2]
    if not ps:
        return 1.0, len(tables)
    ps = np.clip(np.array(ps), 1e-300, 1.0)
    p_fisher = float(_st().combine_pvalues(ps, method="fisher").pvalue)
    p_bonf = float(len(ps) * ps.min())
    return min(1.0, 2.0 * min(p_fisher, p_bonf)), len(tables)


def goodness_of_fit(counts, probs) -> float:
    """p-value that `counts` (per outcome) were drawn from the exact probabilities `probs`: 0
    when an outcome of probability 0 occurs, else Pearson's chi-square on the support (outcomes
    expected fewer than 5 times pooled into one)."""
    counts, probs = np.asarray(counts, np.float64), np.asarray(probs, np.float64)
    if np.any(counts[probs <= 0] > 0):
        return 0.0
    counts, probs = counts[probs > 0], probs[probs > 0] / probs[probs > 0].sum()
    n = counts.sum()
    if n == 0 or len(probs) < 2:
        return 1.0
    expected = n * probs
    small = expected < MIN_EXPECTED
    if small.any():
        counts = np.append(counts[~small], counts[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
        if len(counts) < 2:
            return 1.0
    return float(_st().chisquare(counts, expected).pvalue)


# ---------------------------------------------------------------------------------------------
# power
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def noncentrality(df: int, alpha: float, power: float) -> float:
    """The non-centrality at which a chi-square(df) test at level `alpha` has power `power`."""
    st = _st()
    crit = st.chi2.isf(alpha, df)
    f = lambda lam: st.ncx2.sf(crit, df, lam) - power  # noqa: E731
    hi = 1.0
    while f(hi) < 0:
        hi *= 2.0
    from scipy.optimize import brentq

    return float(brentq(f, 1e-9, hi, xtol=1e-6))


def detectable_tv(n_eff: float, df: int, alpha: float, power: float) -> float:
    """The smallest total-variation distance that a chi-square test with `df` degrees of freedom
    at level `alpha` on `n_eff` samples detects with probability `power` (1.0: nothing below
    certainty). `n_eff` is `n` for one sample against exact probabilities, `n m / (n + m)` for
    two samples."""
    if n_eff <= 0:
        return 1.0
    return min(1.0, math.sqrt(noncentrality(max(int(df), 1), alpha, power) / (4.0 * n_eff)))


def needed_tv(effect: float, df: int, alpha: float, power: float) -> float:
    """`n_eff` at which `detectable_tv` reaches `effect`."""
    return noncentrality(max(int(df), 1), alpha, power) / (4.0 * effect * effect)


def detectable_ks(n: int, m: int, alpha: float, power: float) -> float:
    """The smallest Kolmogorov-Smirnov distance that the two-sample KS test at level `alpha` on
    `n` and `m` samples detects with probability `power` (asymptotically)."""
    st = _st()
    if n <= 0 or m <= 0:
        return 1.0
    scale = math.sqrt(1.0 / n + 1.0 / m)
    return min(1.0, scale * (float(st.kstwobign.isf(alpha)) + 0.5 * float(st.norm.isf(1.0 - power))))


def needed_ks(effect: float, alpha: float, power: float) -> int:
    """Samples per side at which `detectable_ks` reaches `effect`."""
    st = _st()
    c = float(st.kstwobign.isf(alpha)) + 0.5 * float(st.norm.isf(1.0 - power))
    return int(math.ceil(2.0 * (c / effect) ** 2))


def model_test(counts, probs) -> float:
    """`goodness_of_fit`: the test of `detectable_model`."""
    return goodness_of_fit(counts, probs)


def _model_power(n: int, df: int, alpha: float, d: float) -> float:
    """The smallest power of `goodness_of_fit` on `n` draws over alternatives at total variation
    `d`: mass `e` on outcomes of probability 0 (missed by all `n` draws with probability
    `(1 - e)^n`) and `d - e` within the support (the chi-square bound); the worst split counts."""
    st = _st()
    df = max(int(df), 1)
    e = d * np.linspace(0.0, 1.0, 41)
    inner = np.where(e < 1, (d - e) / np.maximum(1.0 - e, 1e-12), 0.0)  # in-support distance, renormalised
    p_chi = np.where(inner > 0, st.ncx2.sf(st.chi2.isf(alpha, df), df, 4.0 * n * inner * inner), alpha)
    return float(np.min(1.0 - (1.0 - e) ** n * (1.0 - p_chi)))


@functools.lru_cache(maxsize=1024)
def detectable_model(n: int, df: int, alpha: float, power: float) -> float:
    """The smallest total-variation distance between a port's outcome distribution and exact
    probabilities that `goodness_of_fit` on `n` draws detects with probability `power`
    (see `_model_power`)."""
    if n <= 0 or _model_power(n, df, alpha, 1.0) < power:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(16):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _model_power(n, df, alpha, mid) < power else (lo, mid)
    return hi


@functools.lru_cache(maxsize=1024)
def needed_model(effect: float, df: int, alpha: float, power: float, start: int = 256) -> int:
    """Draws (a power of 2 from `start`) at which `detectable_model` reaches `effect`."""
    n = start
    while _model_power(n, df, alpha, effect) < power and n < 1 << 30:
        n *= 2
    return n


# ---------------------------------------------------------------------------------------------
# pooled strata and ranks
# ---------------------------------------------------------------------------------------------

POOL_MIN = 10  # outcome categories with fewer samples (both sides) in a stratum are merged into one


def _merged(table: np.ndarray) -> np.ndarray:
    """A 2 x K table with the categories holding fewer than `POOL_MIN` samples merged into one
    (a coarsening: still a test of homogeneity, its chi-square approximation kept honest)."""
    table = table[:, table.sum(0) > 0]
    small = table.sum(0) < POOL_MIN
    if small.sum() >= 1 and (~small).sum() >= 1:
        table = np.concatenate([table[:, ~small], table[:, small].sum(1, keepdims=True)], axis=1)
    elif small.all():
        table = table.sum(1, keepdims=True)
    return table


def pooled_stratified_test(tables: dict, weights: dict) -> dict:
    """The pooled test of homogeneity across strata: Pearson's chi-square of each stratum's
    2 x K table (rare outcome categories merged, `_merged`), summed over the strata where every
    expected count is at least 1 and each side has at least `POOL_MIN` samples (the *pooled*
    strata), with degrees of freedom summed: every pooled stratum contributes, and many small
    differences add up. Combined by Bonferroni with each stratum's own `table_test` (one stratum
    that differs a lot, rare strata included): `p = 2 min(p_pooled, S min_s p_s)`.

    `weights` are the strata's shares of visits (summing to 1 over all strata). Returns a dict:
    `p`, `p_pooled`, `p_local`, `df`, `pooled` (the pooled strata), `rare` (the others, by
    share), `inv_info` (`sum_s w_s^2 / n_eff_s` over the pooled strata: the variance scale of
    the weighted total variation) and `rare_share` (the visits outside the pooled strata).
    """
    st = _st()
    stat, df, pooled, rare, inv_info, local = 0.0, 0, [], [], 0.0, []
    for s, t in tables.items():
        t = np.asarray(t)
        if np.count_nonzero(t.sum(0)) >= 2:
            local.append(table_test(t))
        m = _merged(t)
        n = m.sum(1)
        if m.shape[1] >= 1 and n.min() >= POOL_MIN:
            if m.shape[1] >= 2:
                expected = n[:, None] * m.sum(0)[None] / n.sum()
                if expected.min() < 1:
                    rare.append(s)
                    continue
                stat += float(((m - expected) ** 2 / expected).sum())
                df += m.shape[1] - 1
            pooled.append(s)
            inv_info += weights.get(s, 0.0) ** 2 / (n[0] * n[1] / n.sum())
        else:
            rare.append(s)
    p_pooled = float(st.chi2.sf(stat, df)) if df > 0 else 1.0
    p_local = min(1.0, len(local) * min(local)) if local else 1.0
    return {
        "p": min(1.0, 2.0 * min(p_pooled, p_local)),
        "p_pooled": p_pooled,
        "p_local": p_local,
        "df": df,
        "pooled": pooled,
        "rare": sorted(rare, key=lambda s: -weights.get(s, 0.0)),
        "inv_info": inv_info,
        "rare_share": float(sum(weights.get(s, 0.0) for s in rare)),
    }


def detectable_weighted_tv(inv_info: float, df: int, rare_share: float, alpha: float, power: float) -> float:
    """The smallest visitation-weighted total variation `D = sum_s w_s TV_s` that the pooled
    test (`pooled_stratified_test`, its pooled half at level `alpha / 2`) detects with
    probability `power`, plus the rare strata's share of visits (where a difference cannot be
    ruled out). The pooled chi-square's non-centrality is at least `sum_s 4 n_s TV_s^2`
    (`detectable_tv`'s bound per stratum); its least value subject to `sum_s w_s TV_s = D` is
    `4 D^2 / sum_s (w_s^2 / n_s)` (Cauchy-Schwarz), whichever way the difference is spread."""
    if df <= 0 or inv_info <= 0:
        return 1.0
    lam = noncentrality(max(int(df), 1), alpha / 2.0, power)
    return min(1.0, math.sqrt(lam * inv_info / 4.0) + rare_share)


def rank_test(ranks) -> tuple[float, float]:
    """`(statistic, p_value)`: one-sample Kolmogorov-Smirnov test that `ranks` (randomised
    ranks scaled to (0, 1): exactly uniform when each reference outcome is exchangeable with
    the port's draws at its state) are uniform."""
    u = np.asarray(ranks, np.float64).ravel()
    if len(u) == 0:
        return 0.0, 1.0
    res = _st().kstest(u, "uniform")
    return float(res.statistic), float(res.pvalue)


def detectable_rank(n: int, alpha: float, power: float) -> float:
    """The smallest Kolmogorov-Smirnov distance from uniform that `rank_test` on `n` ranks
    detects with probability `power` (asymptotically; `detectable_ks` with one side exact)."""
    st = _st()
    if n <= 0:
        return 1.0
    c = float(st.kstwobign.isf(alpha)) + 0.5 * float(st.norm.isf(1.0 - power))
    return min(1.0, c / math.sqrt(n))


def needed_rank(effect: float, alpha: float, power: float) -> int:
    st = _st()
    c = float(st.kstwobign.isf(alpha)) + 0.5 * float(st.norm.isf(1.0 - power))
    return int(math.ceil((c / effect) ** 2))


# ---------------------------------------------------------------------------------------------
# the local guarantee: every covered stratum
# ---------------------------------------------------------------------------------------------


def local_strata_test(tables: dict, weights: dict, coverage: float, missing: dict | None = None) -> dict:
    """Each stratum holding at least `coverage` of the visits (its share in `weights`) tested on
    its own: `table_test` of its 2 x K table, Bonferroni over the S covered strata (`p = S min_s
    p_s`). `missing` maps strata the reference visited and the port never did to their shares
    (covered ones count with no port sample: nothing can be certified there).

    Returns a dict: `p`, `covered` (a list of dicts, one per covered stratum, by share: `stratum`,
    `share`, `n_port`, `n_reference`, `n_eff` = n m / (n + m), `df` (outcome categories seen - 1,
    at least 1), `tv` (the observed total variation), `p`), `uncovered` (the number of strata
    below `coverage`) and `uncovered_share` (their visits)."""
    covered, uncovered, uncovered_share, ps = [], 0, 0.0, []
    for s, t in tables.items():
        w = weights.get(s, 0.0)
        if w < coverage:
            uncovered, uncovered_share = uncovered + 1, uncovered_share + w
            continue
        t = np.asarray(t)
        n = t.sum(1)
        k = int(np.count_nonzero(t.sum(0)))
        p = table_test(t) if k >= 2 else 1.0
        tv = 0.5 * float(np.abs(t[0] / max(n[0], 1) - t[1] / max(n[1], 1)).sum())
        covered.append({"stratum": s, "share": w, "n_port": int(n[0]), "n_reference": int(n[1]),
                        "n_eff": float(n[0] * n[1] / max(n.sum(), 1)), "df": max(k - 1, 1), "tv": tv, "p": p})
        ps.append(p)
    for s, w in (missing or {}).items():
        if w >= coverage:
            covered.append({"stratum": s, "share": w, "n_port": 0, "n_reference": -1, "n_eff": 0.0, "df": 1,
                            "tv": 1.0, "p": 1.0})
        else:
            uncovered, uncovered_share = uncovered + 1, uncovered_share + w
    covered.sort(key=lambda c: -c["share"])
    p = min(1.0, len(covered) * min(ps)) if ps else 1.0
    return {"p": p, "covered": covered, "uncovered": uncovered, "uncovered_share": uncovered_share}


def detectable_local(covered: list, alpha: float, power: float) -> tuple[float, dict | None]:
    """`(bound, stratum)`: the largest total variation, over the covered strata of
    `local_strata_test`, that its per-stratum test at level `alpha / S` (Bonferroni over the S
    covered strata) detects with probability `power` (`detectable_tv` of each stratum's `n_eff`
    and `df`), and the stratum where it is reached (the weakest; None when none is covered)."""
    if not covered:
        return 0.0, None
    level = alpha / len(covered)
    worst = max(covered, key=lambda c: detectable_tv(c["n_eff"], c["df"], level, power))
    return detectable_tv(worst["n_eff"], worst["df"], level, power), worst


def needed_local(covered: list, effect: float, alpha: float, power: float) -> float | None:
    """The factor by which every covered stratum's sample must grow for `detectable_local` to
    reach `effect` (samples grow with the episodes); None when a covered stratum has no port
    sample (more episodes of the same port would not fill it)."""
    if not covered:
        return 1.0
    if any(c["n_eff"] <= 0 for c in covered):
        return None
    level = alpha / len(covered)
    return max(needed_tv(effect, c["df"], level, power) / c["n_eff"] for c in covered)
