"""Advantages: `gae` (generalised advantage estimation with truncation bootstrapping, every
row acting every step) and `gae_decisions` (the same over each row's own decisions: the credit
assignment of turn-based self-play, `train.turns.SelfPlay`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["gae", "gae_decisions"]


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """Generalised advantage estimation over a rollout that may cross episode ends.

    All arrays are ``[T, B]`` (time first). ``values[t] = V(obs_t)``; ``next_values[t]`` is the
    value of the observation step ``t`` led to before any reset (``V(info["final_obs"])``), so
    truncated steps bootstrap from it and terminated ones from 0:
    ``delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t`` and
    ``A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}`` with ``done = terminated | truncated``
    (``A_T = 0``). Returns ``(advantages, value_targets = advantages + values)``, float32[T, B].
    """
    not_term = 1.0 - terminated.astype(jnp.float32)
    not_done = 1.0 - (terminated | truncated).astype(jnp.float32)
    deltas = rewards + gamma * not_term * next_values - values

    def backward(adv_next, xs):
        delta, cont = xs
        adv = delta + gamma * lam * cont * adv_next
        return adv, adv

    _, adv = jax.lax.scan(backward, jnp.zeros_like(values[0]), (deltas, not_done), reverse=True)
    return adv, adv + values


def gae_decisions(rewards, values, next_values, terminated, truncated, acting, gamma, lam):
    """GAE over each row's own decisions: the credit assignment of turn-based self-play.

    All arrays are ``[T, B]`` (time first; a row is one seat of one environment); ``acting[t, b]``
    says that row ``b`` made a decision at step ``t`` (its agent had a legal action). Per row, the
    steps where it did not act are skipped:

    * a reward arriving on a step where the row did not act (the opponent's winning move gives this
      seat -1; the showdown after the opponent's call) is added to the row's LAST decision before
      it in the same episode (rewards of the steps from one decision up to the next are summed);
    * a decision bootstraps from the value of the row's NEXT decision in the same episode; when the
      episode ends first, from 0 if it terminated and from ``next_values`` (``V(final_obs)``) of its
      last step if it was truncated; when the rollout ends first, from ``next_values[T - 1]`` (the
      value of the row's observation where the rollout stopped, as `gae` does);
    * the time unit is the row's own decision: ``delta = R + gamma * V(next decision) - V`` and
      ``A = delta + gamma * lam * A(next decision)``; episode ends cut the trace.

    Non-acting steps get advantage 0 and target ``values`` (they are left out of every loss).
    Rewards that come before a row's first decision of an episode have no decision to go to and
    are dropped. With every row acting at every step this is `gae` exactly (tested).
    Returns ``(advantages, value_targets = advantages + values)``, float32[T, B].
    """
    acting = acting.astype(bool)
    done = terminated | truncated
    bootstrap_end = jnp.where(terminated, 0.0, next_values)  # where an episode ends at step t

    def backward(carry, xs):
        adv_next, v_next, r_acc = carry
        r, v, end, v_end, act = xs
        # an episode ends after this step: what lies later belongs to the next episode
        adv_next = jnp.where(end, 0.0, adv_next)
        v_next = jnp.where(end, v_end, v_next)
        r_acc = jnp.where(end, 0.0, r_acc) + r
        adv = r_acc + gamma * v_next - v + gamma * lam * adv_next
        carry = (jnp.where(act, adv, adv_next), jnp.where(act, v, v_next), jnp.where(act, 0.0, r_acc))
        return carry, jnp.where(act, adv, 0.0)

    init = (jnp.zeros_like(values[0]), next_values[-1], jnp.zeros_like(values[0]))
    _, adv = jax.lax.scan(backward, init, (rewards, values, done, bootstrap_end, acting), reverse=True)
    return adv, adv + values
