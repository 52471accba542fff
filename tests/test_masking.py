"""`train.masking`: the masked categorical distribution and the acting-row loss helpers.

Property tests (hypothesis) over random logits — moderate ones compared with a float64 numpy
reference, extreme ones (any finite float32, up to +-3.4e38) checked for finiteness — and random masks with all-illegal
rows forced in; gradients of every loss term are exactly zero on rows with no legal action. One
batch shape, so each jitted function compiles once.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats

from jaxenvs.train.masking import (
    MASKED_LOGIT, MaskedCategorical, acting_mean, acting_normalize, clipped_surrogate, zero_rows,
)
from jaxenvs.train.networks import Categorical

B, N = 6, 5
SETTINGS = settings(max_examples=25, deadline=None)


def masks():
    """bool[B, N] with rows 0 and 1 all illegal and row 2 all legal; the rest random."""
    return arrays(bool, (B, N)).map(lambda m: np.concatenate([np.zeros((2, N), bool), np.ones((1, N), bool), m[3:]]))


def logits(bound=None):
    """float32[B, N] in [-bound, bound]; any finite float32 (up to +-3.4e38) without a bound. No
    subnormals: XLA's CPU backend flushes them to zero, so a subnormal logit and 0 are one value
    to the compiled policy (its mode may pick either)."""
    if bound is None:
        return arrays(np.float32, (B, N), elements=st.floats(allow_nan=False, allow_infinity=False, width=32,
                                                             allow_subnormal=False))
    return arrays(np.float32, (B, N), elements=st.floats(-bound, bound, width=32, allow_subnormal=False))


@jax.jit
def evaluate(logits, mask, other_logits, action, key):
    d, o = MaskedCategorical(logits, mask), MaskedCategorical(other_logits, mask)
    return dict(
        logits=d.logits, probs=d.probs(), sample=d.sample(key), mode=d.mode(), log_prob=d.log_prob(action),
        entropy=d.entropy(), kl=d.kl(o), has_legal=d.has_legal,
    )


def _loss_terms(logits, other_logits, mask, action, old_log_prob, advantage):
    d, o = MaskedCategorical(logits, mask), MaskedCategorical(other_logits, mask)
    acting = d.has_legal
    return jnp.stack([
        jnp.sum(d.log_prob(action)),
        jnp.sum(d.entropy()),
        jnp.sum(d.kl(o)),
        acting_mean(clipped_surrogate(d.log_prob(action), old_log_prob, advantage, acting, 0.2), acting),
        acting_mean(d.entropy(), acting),
    ])


# d(each loss term) / d(logits, other_logits): [5, B, N] each
loss_jacobians = jax.jit(jax.jacrev(_loss_terms, argnums=(0, 1)))


def legal_action(mask, seed):
    """int32[B]: a legal action of each row that has one (0 otherwise)."""
    rng = np.random.default_rng(seed)
    return np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in mask], np.int32)


@SETTINGS
@given(logits(50.0), logits(50.0), masks(), st.integers(0, 2**31 - 1))
def test_matches_softmax_over_legal_actions(x, y, mask, seed):
    a = legal_action(mask, seed)
    out = jax.device_get(evaluate(x, mask, y, a, jax.random.key(seed)))
    legal = mask.any(-1)
    np.testing.assert_array_equal(out["has_legal"], legal)
    for i in np.flatnonzero(legal):
        m = mask[i]
        p = np.zeros(N)
        z = x[i][m].astype(np.float64)
        p[m] = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        q = np.zeros(N)
        w = y[i][m].astype(np.float64)
        q[m] = np.exp(w - w.max()) / np.exp(w - w.max()).sum()
        np.testing.assert_allclose(out["probs"][i], p, atol=1e-5)
        assert out["probs"][i][~m].max(initial=0.0) == 0.0
        ent = -np.sum(p[m] * np.log(np.maximum(p[m], 1e-300)))
        assert out["entropy"][i] == pytest.approx(ent, abs=1e-4)
        assert out["log_prob"][i] == pytest.approx(np.log(p[a[i]]), abs=1e-4, rel=1e-5)
        kl = np.sum(np.where(p > 0, p * (np.log(np.maximum(p, 1e-300)) - np.log(np.maximum(q, 1e-300))), 0.0))
        assert out["kl"][i] == pytest.approx(kl, abs=1e-4, rel=1e-4)
        assert m[out["sample"][i]] and m[out["mode"][i]]
        assert x[i][out["mode"][i]] == x[i][m].max()


@SETTINGS
@given(logits(), logits(), masks(), st.integers(0, 2**31 - 1))
def test_extreme_logits_stay_finite_and_no_legal_rows_contribute_nothing(x, y, mask, seed):
    a = legal_action(mask, seed)
    out = jax.device_get(evaluate(x, mask, y, a, jax.random.key(seed)))
    legal = mask.any(-1)
    for name in ("logits", "probs", "log_prob", "entropy", "kl"):
        assert np.all(np.isfinite(out[name])), name
    assert np.all(out["logits"] >= MASKED_LOGIT - 1.0) and np.all(out["logits"] <= 0.0)
    np.testing.assert_allclose(out["probs"].sum(-1), 1.0, atol=1e-5)
    # sample and mode legal whenever the row has a legal action; 0 otherwise
    rows = np.arange(B)
    assert np.all(mask[rows, out["sample"]][legal]) and np.all(mask[rows, out["mode"]][legal])
    assert np.all(out["sample"][~legal] == 0) and np.all(out["mode"][~legal] == 0)
    # entropy within [0, log(#legal)], KL >= 0 (up to float32 rounding)
    k = mask.sum(-1)
    assert np.all(out["entropy"][legal] >= -1e-6)
    assert np.all(out["entropy"][legal] <= np.log(np.maximum(k[legal], 1)) + 1e-5)
    assert np.all(out["kl"] >= -1e-5)
    # rows with no legal action: exactly 0 in every term
    for name in ("log_prob", "entropy", "kl"):
        assert np.all(out[name][~legal] == 0.0), name
    # gradients: finite everywhere, exactly 0 on no-legal rows and on illegal entries
    old = np.where(legal, out["log_prob"] + 0.1, 0.0).astype(np.float32)
    adv = np.linspace(-1, 1, B).astype(np.float32)
    jx, jy = jax.device_get(loss_jacobians(x, y, mask, a, old, adv))
    for j in (jx, jy):
        assert np.all(np.isfinite(j))
        assert np.all(j[:, ~legal, :] == 0.0)
        assert np.all(j[:, ~mask] == 0.0)  # illegal entries (every entry of a no-legal row)


def test_no_legal_rows_get_exactly_zero_gradient_with_a_plain_all_illegal_batch():
    x = jnp.array([[3.0, -2.0, 0.5, 1e30, -1e30]] * B, jnp.float32)
    mask = np.zeros((B, N), bool)
    jx, jy = jax.device_get(loss_jacobians(x, x, mask, np.zeros(B, np.int32), np.zeros(B, np.float32), np.ones(B, np.float32)))
    assert np.all(jx == 0.0) and np.all(jy == 0.0)
    # every loss term is exactly 0 too
    assert np.all(np.asarray(_loss_terms(x, x, mask, jnp.zeros(B, jnp.int32), jnp.zeros(B), jnp.ones(B))) == 0.0)


def test_sample_is_distributed_as_the_masked_softmax():
    x = jnp.array([0.3, 5.0, -0.2, 1.0, 0.0], jnp.float32)
    mask = jnp.array([1, 0, 1, 1, 0], jnp.uint8)  # the largest logit is illegal
    keys = jax.random.split(jax.random.key(7), 20_000)
    draws = np.asarray(jax.jit(jax.vmap(lambda k: MaskedCategorical(x, mask).sample(k)))(keys))
    counts = np.bincount(draws, minlength=N)
    assert counts[1] == counts[4] == 0
    p = np.exp(np.array([0.3, -0.2, 1.0])) / np.exp(np.array([0.3, -0.2, 1.0])).sum()
    # chi-square goodness of fit: a correct sampler fails with probability 1e-4
    assert stats.chisquare(counts[[0, 2, 3]], p * len(draws)).pvalue > 1e-4


def test_mask_none_is_the_plain_categorical_and_ratio_is_one_under_the_stored_mask():
    x = jax.random.normal(jax.random.key(0), (B, N)) * 3
    a = jnp.arange(B) % N
    plain, unmasked = Categorical(x), MaskedCategorical(x)
    np.testing.assert_allclose(unmasked.log_prob(a), plain.log_prob(a), atol=1e-6)
    np.testing.assert_allclose(unmasked.entropy(), plain.entropy(), atol=1e-6)
    # recomputing the log-prob under the stored mask with unchanged logits gives ratio 1 exactly
    mask = np.ones((B, N), bool)
    mask[:, 0] = False
    mask[3] = False
    d = MaskedCategorical(x, mask)
    act = d.sample(jax.random.key(1))
    ratio = jnp.exp(MaskedCategorical(x, mask).log_prob(act) - d.log_prob(act))
    np.testing.assert_allclose(ratio, 1.0, atol=1e-6)


def test_acting_helpers():
    x = jnp.array([1.0, 2.0, 3.0, 100.0])
    acting = jnp.array([True, True, True, False])
    assert float(acting_mean(x, acting)) == pytest.approx(2.0)
    assert float(acting_mean(x, jnp.zeros(4, bool))) == 0.0
    np.testing.assert_array_equal(zero_rows(x, acting), [1.0, 2.0, 3.0, 0.0])
    g = jax.grad(lambda v: acting_mean(v, acting))(x)
    np.testing.assert_allclose(g, [1 / 3, 1 / 3, 1 / 3, 0.0])
    n = acting_normalize(x, acting)
    assert float(n[3]) == 0.0
    assert float(jnp.mean(n[:3])) == pytest.approx(0.0, abs=1e-6)
    assert float(jnp.std(n[:3])) == pytest.approx(1.0, abs=1e-4)
    # clipped surrogate: -min(r A, clip(r) A), 0 on non-acting rows
    lp, old, adv = jnp.log(jnp.array([1.5, 0.5, 1.0, 9.0])), jnp.zeros(4), jnp.array([1.0, 1.0, -2.0, 5.0])
    np.testing.assert_allclose(clipped_surrogate(lp, old, adv, acting, 0.2), [-1.2, -0.5, 2.0, 0.0], rtol=1e-6)


def test_mode_keeps_the_order_of_logits_closer_than_float32_resolution():
    """Logits -1.3e-30 and 0 (found by the property test above) normalise to the same float32
    log-probability; the mode is still the larger one."""
    x = np.full((2, 5), -1.3230633e-30, np.float32)
    x[0, 1] = 0.0
    x[1, 3] = 1e-38  # a subnormal-adjacent gap, the largest at index 3
    mode = jax.jit(lambda v: MaskedCategorical(v, np.ones((2, 5), bool)).mode())(x)
    np.testing.assert_array_equal(np.asarray(mode), [1, 3])
