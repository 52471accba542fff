"""garage's ``LinearFeatureBaseline``, jitted: a linear value estimate refit every update.

Features of an observation ``obs`` (float32[D], the trainer's flattened observation) seen at step
``t`` of its episode (``t = 0`` right after a reset), as in garage's
``garage/np/baselines/linear_feature_baseline.py``::

    o = clip(obs, -10, 10);  s = t / 100
    features = [o, o**2, s, s**2, s**3, 1]          # float32[2 * D + 4]

The coefficients are garage's ridge solution ``c = argmin |X c - y|^2 + reg |c|^2``, i.e. of
``(X^T X + reg * I) c = X^T y`` (garage: ``np.linalg.lstsq`` on those normal equations, in
float64), computed in float32 as the least-squares solution of the stacked system
``[X; sqrt(reg) I] c = [y; 0]`` with unit-norm columns, which has the same solution and squares
no condition number;
as garage does, the regularisation grows x10 (up to 4 times) while the solution is not finite.
``y`` are the returns the baseline should predict.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["linear_features", "num_linear_features", "fit_linear_baseline", "predict_linear_baseline"]

_REG_GROWTH = 10.0 ** jnp.arange(5)  # reg, 10 reg, ..., 1e4 reg: garage's five tries


def num_linear_features(obs_dim: int) -> int:
    """Length of `linear_features` for observations of ``obs_dim`` dimensions."""
    return 2 * obs_dim + 4


def linear_features(obs: jax.Array, t: jax.Array) -> jax.Array:
    """float32[..., 2 * D + 4] from observations float32[..., D] and episode steps int[...]."""
    o = jnp.clip(obs, -10.0, 10.0)
    s = (t.astype(jnp.float32) / 100.0)[..., None]
    return jnp.concatenate([o, o**2, s, s**2, s**3, jnp.ones_like(s)], axis=-1)


def fit_linear_baseline(features: jax.Array, returns: jax.Array, reg: jax.Array) -> jax.Array:
    """Coefficients float32[F] of the ridge fit of ``returns`` float32[N] on ``features``
    float32[N, F]: the first finite solution for ``reg * 10**k``, ``k = 0..4`` (NaN if none is)."""
    # Columns scaled to unit norm (c = d * c', the ridge rows scaled alike): the same solution,
    # better conditioned in float32 when features differ in scale (t**3 against obs).
    d = 1.0 / jnp.maximum(jnp.linalg.norm(features, axis=0), 1e-6)
    target = jnp.concatenate([returns, jnp.zeros(features.shape[1], jnp.float32)])

    def solve(r):
        return d * jnp.linalg.lstsq(jnp.concatenate([features * d, jnp.sqrt(r) * jnp.diag(d)]), target)[0]

    solutions = jax.vmap(solve)(reg * _REG_GROWTH)
    finite = jnp.all(jnp.isfinite(solutions), axis=1)
    return solutions[jnp.argmax(finite)]


def predict_linear_baseline(coeffs: jax.Array, obs: jax.Array, t: jax.Array) -> jax.Array:
    """Baseline values float32[...] of observations float32[..., D] at episode steps ``t``."""
    return linear_features(obs, t) @ coeffs
