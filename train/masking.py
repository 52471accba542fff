"""A categorical policy over legal actions, and the loss helpers that keep non-acting rows out.

Turn-based games give every agent a legal-action mask each step (`obs["action_mask"]`, uint8 or
bool `[..., n]`); the agent whose turn it is not, and every agent at a chance ply or a terminal
state, has an all-zero row. `MaskedCategorical` is the policy distribution for such games, as Pgx
masks its logits:

* logits are shifted by the maximum of the *legal* logits (the shift carries no gradient), then
  shifted logits are floored at `MASKED_LOGIT / 2` and illegal ones replaced by `MASKED_LOGIT`
  (a large finite negative, never `-inf`), so every number stays finite for any finite input;
* `sample` and `mode` return a legal action whenever the row has one, and action 0 when it has
  none (a sequential environment ignores non-movers' actions);
* `log_prob`, `entropy` (over the legal actions only) and `kl` are finite, and exactly 0 on rows
  with no legal action, with exactly zero gradient there: such rows contribute nothing to a loss
  built from them. Their mean over a batch must still count acting rows only: use `acting_mean`.

`mask=None` means every action is legal: the plain categorical (the ablation switch that turns
masking off keeps the same code path).

The helpers a PPO or TRPO loss calls: `MaskedCategorical.log_prob`, `.entropy`, `.kl`,
`zero_rows` (zero the rows of any per-row quantity where the agent did not act), `acting_mean`
(mean over acting rows; 0 when none acted), `acting_normalize` (advantage normalisation over acting
rows) and `clipped_surrogate` (PPO's clipped objective, per row, 0 on non-acting rows). Each takes
`acting=None` for "every row acts" (environments without masks) and then computes the plain
expression, so one loss serves both.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = [
    "MASKED_LOGIT", "MaskedCategorical", "zero_rows", "acting_mean", "acting_normalize",
    "clipped_surrogate",
]

MASKED_LOGIT = -1e9
"""The logit an illegal action gets after the legal maximum is shifted to 0. Finite, so that
products and differences with it stay finite; large enough that `exp` of it is exactly 0 in
float32 and that Gumbel noise (at most about 17 in float32) never lifts it over a legal action."""


def _float_dtype(x):
    return jnp.promote_types(jnp.asarray(x).dtype, jnp.float32)


class MaskedCategorical:
    """Categorical distribution over the legal actions of each row.

    `logits`: float `[..., n]` (any finite values; computed in at least float32). `mask`: bool or
    integer `[..., n]`, nonzero = legal, broadcastable to `logits`; `None` = all legal.
    Attributes: `logits` (the masked, normalised log-probabilities, float32 `[..., n]`; illegal
    entries are about `MASKED_LOGIT`), `mask` (bool `[..., n]`) and `has_legal` (bool `[...]`:
    the row has at least one legal action, i.e. its agent acts).
    """

    def __init__(self, logits, mask=None):
        logits = jnp.asarray(logits)
        logits = logits.astype(_float_dtype(logits))
        if mask is None:
            mask = jnp.ones(logits.shape, bool)
        mask = jnp.broadcast_to(jnp.asarray(mask) != 0, logits.shape)
        self.mask = mask
        self.has_legal = jnp.any(mask, axis=-1)
        legal_max = jnp.max(jnp.where(mask, logits, -jnp.inf), axis=-1, keepdims=True)
        legal_max = jax.lax.stop_gradient(jnp.where(self.has_legal[..., None], legal_max, 0.0))
        shifted = jnp.where(mask, jnp.maximum(logits - legal_max, MASKED_LOGIT / 2), MASKED_LOGIT)
        self._shifted = shifted  # the order of the given logits, kept exactly (for `mode`)
        self.logits = jax.nn.log_softmax(shifted, axis=-1)

    def probs(self):
        """float32 `[..., n]`: probabilities, exactly 0 on illegal actions of rows that have a
        legal one (uniform over all actions on rows that have none)."""
        return jnp.where(self.mask | ~self.has_legal[..., None], jnp.exp(self.logits), 0.0)

    def sample(self, key):
        """int32 `[...]`: one action per row drawn with `key`; legal whenever the row has a legal
        action, 0 otherwise."""
        a = jax.random.categorical(key, self.logits, axis=-1).astype(jnp.int32)
        return jnp.where(self.has_legal, a, 0)

    def mode(self):
        """int32 `[...]`: the most probable legal action (the lowest index among ties), 0 on rows
        with no legal action."""
        # the argmax of the shifted logits, not of the normalised ones: normalising rounds logits
        # that differ by less than float32's resolution at log k (1e-30 and 0) to a tie
        return jnp.where(self.has_legal, jnp.argmax(self._shifted, axis=-1), 0).astype(jnp.int32)

    def log_prob(self, action):
        """float32 `[...]`: log-probability of `action` (int `[...]`); 0 on rows with no legal
        action. An illegal action of an acting row gets about `MASKED_LOGIT` (finite)."""
        lp = jnp.take_along_axis(self.logits, jnp.asarray(action)[..., None].astype(jnp.int32), axis=-1)[..., 0]
        return zero_rows(lp, self.has_legal)

    def entropy(self):
        """float32 `[...]`: entropy over the legal actions (`log k` for a uniform policy over `k`
        legal actions); 0 on rows with no legal action."""
        plogp = jnp.where(self.mask, jnp.exp(self.logits) * self.logits, 0.0)
        return zero_rows(-jnp.sum(plogp, axis=-1), self.has_legal)

    def kl(self, other: "MaskedCategorical"):
        """float32 `[...]`: KL(self || other) summed over self's legal actions; 0 on rows where
        self has no legal action. Both should be built with the same (stored) mask."""
        terms = jnp.where(self.mask, jnp.exp(self.logits) * (self.logits - other.logits), 0.0)
        return zero_rows(jnp.sum(terms, axis=-1), self.has_legal)


def zero_rows(x, acting):
    """`x` (float `[...]`) with the rows where `acting` (bool `[...]`) is False set to exactly 0,
    with exactly zero gradient there (as long as `x` is finite there). `acting=None`: every row
    acts (here and in every helper below), and `x` is returned as it is."""
    if acting is None:
        return x
    return jnp.where(acting, x, jnp.zeros((), jnp.asarray(x).dtype))


def acting_mean(x, acting):
    """float32 scalar: the mean of `x` (float `[...]`) over the rows where `acting` (bool, same
    shape) is True; 0 when no row acted. Non-acting rows get exactly zero gradient."""
    if acting is None:
        return jnp.mean(x)
    acting = jnp.asarray(acting, bool)
    total = jnp.sum(zero_rows(x, acting))
    return total / jnp.maximum(jnp.sum(acting), 1).astype(total.dtype)


def acting_normalize(advantage, acting, eps: float = 1e-8):
    """`advantage` (float `[...]`) minus its mean, divided by its std (+ `eps`), both over the
    acting rows only; non-acting rows become exactly 0."""
    if acting is None:
        return (advantage - advantage.mean()) / (advantage.std() + eps)
    mean = acting_mean(advantage, acting)
    var = acting_mean(jnp.square(advantage - mean), acting)
    return zero_rows((advantage - mean) / (jnp.sqrt(var) + eps), acting)


def clipped_surrogate(log_prob, old_log_prob, advantage, acting, clip_eps):
    """float32 `[...]`: PPO's clipped surrogate *loss* per row,
    `-min(r A, clip(r, 1 - eps, 1 + eps) A)` with `r = exp(log_prob - old_log_prob)`, and
    exactly 0 (zero gradient) on rows where `acting` is False. Average it with `acting_mean`."""
    ratio = jnp.exp(zero_rows(log_prob - old_log_prob, acting))
    loss = -jnp.minimum(ratio * advantage, jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantage)
    return zero_rows(loss, acting)
