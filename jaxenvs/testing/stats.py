"""Two-sample tests in plain numpy (no scipy): what :func:`jaxenvs.testing.verify_port` uses.

* :func:`ks_test` -- Kolmogorov-Smirnov for real-valued samples: the asymptotic Kolmogorov
  distribution with Stephens' small-sample correction. With ties (discrete values) the test is
  conservative: its false-alarm rate stays below the nominal one.
* :func:`categorical_test` -- for samples of categories: Pearson's chi-square test of homogeneity
  (categories expected fewer than 5 times pooled into one) combined, by Bonferroni, with an exact
  binomial test per category (which catches a category that only one side ever produces, where
  the chi-square approximation is poor).
* :func:`stratified_test` -- the same data split into strata (e.g. transitions grouped by
  ``(observation, action)``): the sum of the strata's Pearson statistics against a chi-square with
  the summed degrees of freedom (a Cochran-style pooled test: many small strata that each differ a
  little add up), combined by Bonferroni with the exact binomial test of every category of every
  stratum.

Every function returns a p-value: the probability, if both samples come from one distribution,
of a difference at least as large.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["ks_test", "categorical_test", "stratified_test", "chi2_sf", "binomial_two_sided"]


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for X ~ chi-square(df): the regularised upper incomplete gamma Q(df/2, x/2)."""
    if df <= 0:
        return 1.0
    if x <= 0:
        return 1.0
    a, z = df / 2.0, x / 2.0
    log_front = a * math.log(z) - z - math.lgamma(a)
    if z < a + 1.0:  # series for the lower function P, Q = 1 - P
        term = total = 1.0 / a
        n = a
        for _ in range(10_000):
            n += 1.0
            term *= z / n
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(log_front))
    # continued fraction for Q (modified Lentz)
    tiny = 1e-300
    b = z + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return min(1.0, math.exp(log_front) * h)


def _kolmogorov_sf(t: float) -> float:
    """P(K > t) for the Kolmogorov distribution."""
    if t < 0.2:
        return 1.0
    k = np.arange(1, 101)
    return float(np.clip(2.0 * np.sum((-1.0) ** (k - 1) * np.exp(-2.0 * k * k * t * t)), 0.0, 1.0))


def ks_test(x, y) -> tuple[float, float]:
    """``(statistic, p_value)`` of the two-sample Kolmogorov-Smirnov test of real samples."""
    x, y = np.sort(np.asarray(x, np.float64).ravel()), np.sort(np.asarray(y, np.float64).ravel())
    n, m = len(x), len(y)
    if n == 0 or m == 0:
        return 0.0, 1.0
    grid = np.concatenate([x, y])
    d = float(np.max(np.abs(np.searchsorted(x, grid, "right") / n - np.searchsorted(y, grid, "right") / m)))
    en = math.sqrt(n * m / (n + m))
    return d, _kolmogorov_sf((en + 0.12 + 0.11 / en) * d)


def binomial_two_sided(k: np.ndarray, n: np.ndarray, p: float) -> np.ndarray:
    """Exact two-sided binomial p-values of ``k`` successes in ``n`` trials (arrays), success
    probability ``p``: the total probability of outcomes no more likely than the one observed."""
    k, n = np.asarray(k, np.int64).ravel(), np.asarray(n, np.int64).ravel()
    out = np.ones(len(k))
    lp, lq = math.log(p), math.log1p(-p)
    cache: dict[int, np.ndarray] = {}
    for i, (ki, ni) in enumerate(zip(k, n)):
        if ni == 0:
            continue
        pmf = cache.get(int(ni))
        if pmf is None:
            j = np.arange(ni + 1)
            logc = np.array([math.lgamma(ni + 1) - math.lgamma(v + 1) - math.lgamma(ni - v + 1) for v in j])
            pmf = cache[int(ni)] = np.exp(logc + j * lp + (ni - j) * lq)
        out[i] = min(1.0, float(np.sum(pmf[pmf <= pmf[ki] * (1 + 1e-7)])))
    return out


def _pearson(table: np.ndarray) -> tuple[float, int]:
    """Pearson's statistic and degrees of freedom of a 2 x K table of counts, categories expected
    fewer than 5 times pooled into one (dropped when the pool itself stays below 5)."""
    table = table[:, table.sum(0) > 0]
    n = table.sum(1, keepdims=True)
    if table.shape[1] < 2 or np.any(n == 0):
        return 0.0, 0
    expected = n * table.sum(0, keepdims=True) / n.sum()
    small = np.any(expected < 5, axis=0)
    if small.any():
        pooled = table[:, small].sum(1, keepdims=True)
        table = table[:, ~small]
        if pooled.sum() * n.min() / n.sum() >= 5 or table.shape[1] == 0:
            table = np.concatenate([table, pooled], axis=1)
        if table.shape[1] < 2:
            return 0.0, 0
        expected = n * table.sum(0, keepdims=True) / n.sum()
    return float(np.sum((table - expected) ** 2 / expected)), table.shape[1] - 1


def _table(x_codes, y_codes) -> np.ndarray:
    _, inverse = np.unique(np.concatenate([x_codes, y_codes]), return_inverse=True)
    inverse = inverse.ravel()
    k = int(inverse.max()) + 1 if len(inverse) else 0
    nx = len(x_codes)
    return np.stack([np.bincount(inverse[:nx], minlength=k), np.bincount(inverse[nx:], minlength=k)])


def _binomial_min(tables: list[np.ndarray]) -> tuple[float, int]:
    """Smallest exact per-category binomial p-value over the tables' categories (those within 2
    standard deviations of their expected count skipped), and the number of categories."""
    ks, ns, ps = [], [], []
    for t in tables:
        n = t.sum(1)
        if np.any(n == 0) or t.shape[1] < 2:
            continue
        ks.append(t[0])
        ns.append(t.sum(0))
        ps.append(np.full(t.shape[1], n[0] / n.sum()))
    if not ks:
        return 1.0, 0
    k, nn, p = np.concatenate(ks), np.concatenate(ns), np.concatenate(ps)
    # the exact sum only where the count is over 2 standard deviations off (elsewhere the p-value
    # exceeds ~0.05, far above any Bonferroni threshold, and 1.0 stands for it: conservative)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.abs(k - nn * p) / np.sqrt(nn * p * (1 - p))
    far = np.flatnonzero(z > 2)
    best = 1.0
    for i in far:
        best = min(best, float(binomial_two_sided(k[i : i + 1], nn[i : i + 1], float(p[i]))[0]))
    return best, len(k)


def categorical_test(x_codes, y_codes) -> float:
    """p-value that two samples of categories (any hashable numpy values: ints, or byte strings of
    rows) come from one distribution: ``2 * min(p_chi2, K * min_k p_binomial_k)``, capped at 1."""
    table = _table(np.asarray(x_codes), np.asarray(y_codes))
    stat, df = _pearson(table)
    p_chi = chi2_sf(stat, df)
    p_bin, k = _binomial_min([table])
    return min(1.0, 2.0 * min(p_chi, p_bin * max(k, 1)))


def stratified_test(strata_x, outcome_x, strata_y, outcome_y) -> tuple[float, int]:
    """``(p_value, number of strata compared)`` that outcomes have the same distribution within
    every stratum on both sides (samples within a stratum independent)."""
    strata_x, strata_y = np.asarray(strata_x), np.asarray(strata_y)
    outcome_x, outcome_y = np.asarray(outcome_x), np.asarray(outcome_y)
    sx, sy = _group(strata_x), _group(strata_y)
    tables = []
    for s in sx.keys() & sy.keys():
        t = _table(outcome_x[sx[s]], outcome_y[sy[s]])
        if t.shape[1] >= 2:
            tables.append(t)
    stat = df = 0
    for t in tables:
        s, d = _pearson(t)
        stat, df = stat + s, df + d
    p_chi = chi2_sf(stat, df)
    p_bin, k = _binomial_min(tables)
    return min(1.0, 2.0 * min(p_chi, p_bin * max(k, 1))), len(sx.keys() & sy.keys())


def _group(codes: np.ndarray) -> dict:
    if len(codes) == 0:
        return {}
    uniq, inverse = np.unique(codes, return_inverse=True)
    order = np.argsort(inverse.ravel(), kind="stable")
    bounds = np.cumsum(np.bincount(inverse.ravel(), minlength=len(uniq)))[:-1]
    return {u.item() if hasattr(u, "item") else u: idx for u, idx in zip(uniq, np.split(order, bounds))}
