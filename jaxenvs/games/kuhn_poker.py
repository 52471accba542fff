"""Exact exploitability of a Kuhn poker policy, in JAX (jittable, differentiable almost everywhere).

Kuhn poker as OpenSpiel's `kuhn_poker` plays it: cards J < Q < K (0, 1, 2), each player antes 1
and is dealt one card (6 equally likely deals); actions 0 = Pass, 1 = Bet; histories `pp`
(showdown for 1), `bb` and `pbb` (showdown for 2), `bp` and `pbp` (the player facing the bet
folds and loses 1).

**Information sets.** A player deciding knows their card and the history, so there are 12
information sets, indexed `3 * h + card`:

| rows  | `h` | who      | history | OpenSpiel string |
|-------|-----|----------|---------|------------------|
| 0-2   | 0   | player 0 | (none)  | `"0"`, `"1"`, `"2"` |
| 3-5   | 1   | player 1 | `p`     | `"0p"`, `"1p"`, `"2p"` |
| 6-8   | 2   | player 1 | `b`     | `"0b"`, `"1b"`, `"2b"` |
| 9-11  | 3   | player 0 | `pb`    | `"0pb"`, `"1pb"`, `"2pb"` |

A policy is a float `[12, 2]` table: row `i` = the probabilities of (Pass, Bet) in information set
`i`. `infoset_index` maps an OpenSpiel `information_state_tensor` (float `[..., 11]`: player
one-hot, card one-hot, then one (Pass, Bet) one-hot per action so far; `KuhnPoker-v0`'s
`obs["observation"]`) to that index; `infoset_tensors()` is the inverse, so `policy_table(probs_fn)`
turns a jittable `probs_fn(obs) -> float[2]` on one agent's observation dict into the table.

`exploitability(table)` = NashConv / 2 (OpenSpiel's `exploitability.exploitability` for a
two-player zero-sum game): the mean over the two players of what a best response to the other
player's policy gains over the policy's own value. Uniform play gives 11/24 = 0.4583; a Nash
equilibrium 0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs.core import is_concrete

__all__ = [
    "NUM_INFOSETS", "HISTORIES", "infoset_index", "infoset_tensors", "policy_table",
    "best_response_values", "nash_conv", "exploitability",
]

NUM_INFOSETS = 12
HISTORIES = ("", "p", "b", "pb")
"""The history of each block of three information sets (index `3 * h + card`)."""
INFO_STATE_SIZE = 11
# The 6 deals (card of player 0, card of player 1), each with probability 1/6.
_DEALS = np.array([(c0, c1) for c0 in range(3) for c1 in range(3) if c0 != c1], np.int32)


def infoset_index(info_state) -> jax.Array:
    """int32 `[...]`: the information-set index (see the module docstring) of OpenSpiel
    `information_state_tensor`s float `[..., 11]` at decision states, or of observation dicts
    holding them as `"observation"` (`KuhnPoker-v0`'s). Any tensor maps into `[0, 12)`; tensors
    of terminal or chance states give a meaningless index."""
    if isinstance(info_state, dict):
        info_state = info_state["observation"]
    t = jnp.asarray(info_state)
    if t.shape[-1:] != (INFO_STATE_SIZE,):
        raise ValueError(f"a Kuhn poker information_state_tensor has {INFO_STATE_SIZE} entries, got shape {t.shape}")
    card = jnp.argmax(t[..., 2:5], axis=-1)
    num_actions = jnp.sum(t[..., 5:] != 0, axis=-1)
    h = jnp.where(num_actions == 0, 0, jnp.where(num_actions == 1, 1 + (t[..., 6] != 0), 3))
    return (3 * h + card).astype(jnp.int32)


def infoset_tensors() -> np.ndarray:
    """float32 `[12, 11]`: OpenSpiel's `information_state_tensor` of each information set."""
    out = np.zeros((NUM_INFOSETS, INFO_STATE_SIZE), np.float32)
    for h, history in enumerate(HISTORIES):
        player = len(history) % 2
        for card in range(3):
            row = out[3 * h + card]
            row[player] = 1.0
            row[2 + card] = 1.0
            for k, a in enumerate(history):
                row[5 + 2 * k + (a == "b")] = 1.0
    return out


def policy_table(probs_fn) -> jax.Array:
    """float32 `[12, 2]`: `probs_fn(obs)` (jittable; float `[2]`, the probabilities of Pass and
    Bet) on the observation dict `{"observation": float32[11], "action_mask": uint8[2]}` of each
    information set (both actions are legal at every Kuhn decision)."""
    obs = {
        "observation": jnp.asarray(infoset_tensors()),
        "action_mask": jnp.ones((NUM_INFOSETS, 2), jnp.uint8),
    }
    return jnp.asarray(jax.vmap(probs_fn)(obs), jnp.float32)


def _check_table(table) -> jax.Array:
    table = jnp.asarray(table)
    if table.shape != (NUM_INFOSETS, 2):
        raise ValueError(
            f"a Kuhn poker policy table is [12, 2] (information set, (Pass, Bet) probabilities), got shape {table.shape}"
        )
    if is_concrete(table):
        t = np.asarray(table, np.float64)
        bad = ~np.all(np.isfinite(t), axis=-1) | np.any(t < 0, axis=-1) | ~np.isclose(t.sum(-1), 1.0, atol=1e-5)
        if np.any(bad):
            i = int(np.argmax(bad))
            raise ValueError(f"row {i} of the Kuhn policy table is not a probability vector: {t[i].tolist()}")
    return table.astype(jnp.promote_types(table.dtype, jnp.float32))


def best_response_values(table) -> jax.Array:
    """float32 `[2]`: the expected return of a best response of player 0 against `table`'s
    player-1 policy, and of player 1 against its player-0 policy."""
    table = _check_table(table)
    c0, c1 = jnp.asarray(_DEALS[:, 0]), jnp.asarray(_DEALS[:, 1])
    w = 1.0 / len(_DEALS)
    s = jnp.sign(c0 - c1).astype(table.dtype)  # showdown result for player 0
    first, after_pass, after_bet, after_pass_bet = (table[3 * h + c] for h, c in zip(range(4), (c0, c1, c1, c0)))
    by_c0 = jax.nn.one_hot(c0, 3, dtype=table.dtype).T  # [3, 6]: sum over deals by player 0's card
    by_c1 = jax.nn.one_hot(c1, 3, dtype=table.dtype).T

    # player 0 best-responds; values per deal weighted by chance and player 1's reach
    pb_pass = by_c0 @ (w * after_pass[:, 1] * -1.0)
    pb_bet = by_c0 @ (w * after_pass[:, 1] * 2.0 * s)
    v_pb = jnp.maximum(pb_pass, pb_bet)
    root_pass = by_c0 @ (w * after_pass[:, 0] * s) + v_pb
    root_bet = by_c0 @ (w * (after_bet[:, 0] * 1.0 + after_bet[:, 1] * 2.0 * s))
    br0 = jnp.sum(jnp.maximum(root_pass, root_bet))

    # player 1 best-responds (its return is minus player 0's); weighted by player 0's reach
    b_pass = by_c1 @ (w * first[:, 1] * -1.0)
    b_bet = by_c1 @ (w * first[:, 1] * -2.0 * s)
    p_pass = by_c1 @ (w * first[:, 0] * -s)
    p_bet = by_c1 @ (w * first[:, 0] * (after_pass_bet[:, 0] * 1.0 + after_pass_bet[:, 1] * -2.0 * s))
    br1 = jnp.sum(jnp.maximum(b_pass, b_bet)) + jnp.sum(jnp.maximum(p_pass, p_bet))
    return jnp.stack([br0, br1])


def nash_conv(table) -> jax.Array:
    """float32 scalar: the sum over players of the best-response value against the others minus
    the policy's own value; the own values sum to 0 (zero-sum), so it is the sum of
    `best_response_values`."""
    return jnp.sum(best_response_values(table))


def exploitability(table) -> jax.Array:
    """float32 scalar: `nash_conv(table) / 2` (OpenSpiel's convention). `table`: float `[12, 2]`
    (Pass, Bet) probabilities per information set; rows are checked to be probability vectors when
    the table is concrete (under `jit` it is the caller's promise)."""
    return nash_conv(table) / 2.0
