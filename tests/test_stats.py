"""jaxenvs.testing.stats: the tests keep their false-alarm rate, small strata can fail, and the
stated power (detectable_tv, detectable_ks, detectable_model) holds in simulation.

Power claims are checked on simulated alternatives at exactly the claimed detectable effect: the
rejection rate over R runs must be at least `power` less 3 binomial standard deviations
(`sqrt(power (1 - power) / R)`); false-alarm rates at most the level plus 3 standard deviations.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from helpers import require

require("scipy")

from jaxenvs.testing import stats  # noqa: E402

R = 200  # simulated runs per claim


def tolerance(p: float, runs: int = R) -> float:
    return 3 * math.sqrt(p * (1 - p) / runs)


def test_disjoint_small_strata_are_rejected():
    # 14 strata, 8 samples per side each, port always 4, reference always 0 (the case that read p = 0.44)
    strata = np.repeat(np.arange(14), 8)
    p, k = stats.stratified_test(strata, np.full(112, 4), strata, np.zeros(112, int))
    assert k == 14 and p < 1e-6
    # one stratum alone: Fisher's exact 2 / C(16, 8), doubled by the combination
    p1, _ = stats.stratified_test(np.zeros(8), np.full(8, 4), np.zeros(8), np.zeros(8, int))
    assert p1 == pytest.approx(2 * 2 / math.comb(16, 8))


def test_tests_keep_their_false_alarm_rate():
    rng = np.random.default_rng(0)
    level = 0.05
    p_cat = [stats.categorical_test(rng.integers(0, 6, 300), rng.integers(0, 6, 400)) for _ in range(R)]
    p_small = [stats.categorical_test(rng.integers(0, 4, 12), rng.integers(0, 4, 9)) for _ in range(R)]
    p_ks = [stats.ks_test(rng.normal(size=300), rng.normal(size=400))[1] for _ in range(R)]
    strata = np.repeat(np.arange(10), 6)
    p_str = [stats.stratified_test(strata, rng.integers(0, 3, 60), strata, rng.integers(0, 3, 60))[0] for _ in range(R)]
    for ps in (p_cat, p_small, p_ks, p_str):
        assert np.mean(np.array(ps) < level) <= level + tolerance(level)


def test_goodness_of_fit_is_zero_on_an_impossible_outcome():
    assert stats.goodness_of_fit([10, 5, 1], [0.5, 0.5, 0.0]) == 0.0
    assert stats.goodness_of_fit([500, 500], [0.5, 0.5]) == pytest.approx(1.0)


@pytest.mark.parametrize("power", [0.8, 0.95])
def test_detectable_tv_holds_for_the_hardest_alternative(power):
    """Two samples of 4 categories: the alternative at total variation d spread as the
    Cauchy-Schwarz bound's equality case (q_k = p_k (1 +- 2d)), the hardest for chi-square."""
    rng = np.random.default_rng(1)
    n, alpha, df = 2000, 1e-3, 3
    d = stats.detectable_tv(n * n / (2 * n), df, alpha, power)
    p = np.full(4, 0.25)
    q = p * (1 + 2 * d * np.array([1, -1, 1, -1]))
    assert 0.5 * np.abs(q - p).sum() == pytest.approx(d)
    rejected = 0
    for _ in range(R):
        x, y = rng.choice(4, n, p=p), rng.choice(4, n, p=q)
        rejected += stats.categorical_test(x, y) < alpha
    assert rejected / R >= power - tolerance(power)


def test_detectable_ks_holds_for_a_shift():
    rng = np.random.default_rng(2)
    n, alpha, power = 500, 1e-3, 0.9
    d = stats.detectable_ks(n, n, alpha, power)  # a shift of U(0, 1) by d is a KS distance d
    rejected = sum(stats.ks_test(rng.random(n), rng.random(n) + d)[1] < alpha for _ in range(R))
    assert rejected / R >= power - tolerance(power)
    assert stats.needed_ks(d, alpha, power) == pytest.approx(n, rel=0.01)


@pytest.mark.parametrize("outside", [0.0, 0.5])
def test_detectable_model_holds_inside_and_outside_the_support(outside):
    """One sample of n draws against exact probabilities (1/3 each); the alternative at total
    variation d puts `outside * d` on an outcome of probability 0, the rest within the support."""
    rng = np.random.default_rng(3)
    n, alpha, power, df = 4096, 1e-4, 0.95, 2
    d = stats.detectable_model(n, df, alpha, power)
    p = np.array([1 / 3, 1 / 3, 1 / 3, 0.0])
    e = outside * d
    a = d - e
    q = np.array([1 / 3 + a, 1 / 3 - (a + e) / 2, 1 / 3 - (a + e) / 2, e])
    assert 0.5 * np.abs(q - p).sum() == pytest.approx(d)
    rejected = sum(stats.goodness_of_fit(rng.multinomial(n, q), p) < alpha for _ in range(R))
    assert rejected / R >= power - tolerance(power)
    assert stats.needed_model(d * 1.01, df, alpha, power) <= n


def test_needed_inverts_detectable():
    for df in (1, 3, 10):
        n_eff = stats.needed_tv(0.05, df, 1e-4, 0.95)
        assert stats.detectable_tv(n_eff, df, 1e-4, 0.95) == pytest.approx(0.05)
    assert stats.detectable_tv(4, 1, 1e-3, 0.95) == 1.0  # 8 samples per side detect nothing below certainty


def test_pooled_stratified_test_keeps_its_level_and_its_stated_power():
    """A/A: strata of several sizes (some too small to pool) drawn alike on both sides reject at
    most at the level; an alternative at exactly the stated visitation-weighted TV, spread as the
    bound's hardest case (the same TV in every stratum), is rejected at least at the power."""
    rng = np.random.default_rng(3)
    level, power = 0.05, 0.9
    sizes = np.array([400, 300, 200, 100, 60, 8])  # per side; the last stratum too small to pool
    base = np.array([0.5, 0.3, 0.2])

    def tables(shift):
        out = {}
        for s, n in enumerate(sizes):
            q = base + shift * np.array([1.0, -1.0, 0.0])  # TV = shift in every stratum
            out[s] = np.stack([rng.multinomial(n, base), rng.multinomial(n, q)])
        return out

    weights = {s: n / sizes.sum() for s, n in enumerate(sizes)}
    p_null = [stats.pooled_stratified_test(tables(0.0), weights)["p"] for _ in range(R)]
    assert np.mean(np.array(p_null) < level) <= level + tolerance(level)
    res = stats.pooled_stratified_test(tables(0.0), weights)
    assert res["rare"] == [5] and res["rare_share"] == pytest.approx(8 / sizes.sum())
    d = stats.detectable_weighted_tv(res["inv_info"], res["df"], 0.0, level, power)
    p_alt = [stats.pooled_stratified_test(tables(d), weights)["p"] for _ in range(R)]
    assert np.mean(np.array(p_alt) < level) >= power - tolerance(power)


def test_rank_test_is_uniform_under_exchangeability_and_sees_a_shift():
    rng = np.random.default_rng(4)
    from jaxenvs.testing.from_state import ranks

    ps = []
    for _ in range(R):  # discrete outcomes with ties: the randomised ranks are exactly uniform
        port = rng.integers(0, 3, size=(300, 64)).astype(float)
        ref = rng.integers(0, 3, size=300).astype(float)
        ps.append(stats.rank_test(ranks(port, ref, rng))[1])
    assert np.mean(np.array(ps) < 0.05) <= 0.05 + tolerance(0.05)
    port = rng.normal(size=(2000, 64))
    ref = rng.normal(0.3, 1.0, size=2000)
    assert stats.rank_test(ranks(port, ref, rng))[1] < 1e-6
