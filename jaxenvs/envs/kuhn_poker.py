"""KuhnPoker: OpenSpiel's ``kuhn_poker`` (two players), explicit chance included.

A three-card poker game (Kuhn, 1950). Dynamics, as in OpenSpiel's ``kuhn_poker``
(``open_spiel/games/kuhn_poker``), with OpenSpiel's explicit chance player:

* each player antes 1; the deck holds cards 0 < 1 < 2 (Jack, Queen, King);
* the game starts at a chance node that deals player 0's card (outcome ``c`` = card ``c``,
  probability 1/3 each), then one that deals player 1's from the two left (1/2 each). At a chance
  node `KuhnPoker.chance_outcomes` is float32[3] over the cards (0 for a dealt one), `apply_chance`
  deals the given card (it raises `jaxenvs.core.ChanceError` on a card out of range or already
  dealt, or on a decision state; traced outcomes under `jaxenvs.checked`), and ``step`` ignores the action and draws the card uniformly among those
  left with its key (``info["chance_outcome"]``: the card dealt, -1 at decision steps);
* then players alternate, player 0 first: action 0 = Pass, 1 = Bet (both legal at every
  decision); ``action`` is int32[2] (one row per player, sequential dynamics): only the current
  player's entry is read. Betting sequences: ``pp`` showdown for 1, ``bb`` and ``pbb`` showdown
  for 2, ``bp`` and ``pbp`` a fold: the bettor wins 1. At a showdown the higher card wins;
* reward float32[2]: 0 until the end, then OpenSpiel's ``state.returns()`` (zero-sum);
* observation ``{"observation": float32[2, 11], "action_mask": uint8[2, 2]}``: row ``p`` is
  OpenSpiel's ``information_state_tensor(p)``: player one-hot (2), own card one-hot (3, zeros
  before the deal), then two bits (Pass, Bet) for each of the up to 3 actions taken. The mask row
  of the player to move is ``[1, 1]``, the other row, every row at a chance node and at a terminal
  state are zero (OpenSpiel's ``legal_actions_mask(p)``).

An illegal move (an action outside ``{0, 1}``, or any move in a terminal state) ends the game: the
mover gets -1 and the other player +1; ``info["illegal_action"]`` (bool) says whether the step's
move was illegal, and ``jaxenvs.checked`` raises on one. `current_player` is 0 at chance nodes (it
must lie in ``[0, 2)``; OpenSpiel says -1 there: use `is_chance_node`). Wrap the env in
`jaxenvs.wrappers.FoldChanceNodes` to have the deal done inside ``reset``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import spaces, struct
from jaxenvs.core import Environment, Traits, check_chance_outcome
from jaxenvs.rendering import draw

NUM_CARDS = 3
NUM_ACTIONS = 2  # Pass, Bet
MAX_ACTIONS = 3  # the longest betting sequence: pass, bet, pass/bet
TENSOR_SIZE = 2 + NUM_CARDS + 2 * MAX_ACTIONS  # OpenSpiel's information_state_tensor_shape: [11]
CARD_NAMES = "JQK"
HIDDEN = -2  # a card `KuhnPoker.observer_view` hides (-1: not dealt yet)
ACTION_NAMES = ("Pass", "Bet")
PANEL = 96  # rendering: px per player
CARD_COLORS = np.array([draw.GREY, (60, 120, 220), (220, 160, 40), (200, 40, 40)], dtype=np.uint8)  # none, J, Q, K


@struct.dataclass
class EnvParams:
    """Nothing to tune: OpenSpiel's two-player game."""


@struct.dataclass
class EnvState:
    cards: jax.Array  # int32[2]: each player's card, -1 before it is dealt (HIDDEN in an observer_view)
    history: jax.Array  # int32[3]: the betting actions so far (0 Pass, 1 Bet), -1 after the last
    num_actions: jax.Array  # int32[]: betting actions taken
    terminated: jax.Array  # bool[]
    returns: jax.Array  # float32[2]: OpenSpiel's returns (0 before the end)


def _showdown_or_fold(history, num_actions, cards):
    """(terminal bool[], returns float32[2]) of the betting sequence ``history[:num_actions]``."""
    h0, h1 = history[0], history[1]
    terminal = ((num_actions == 2) & ~((h0 == 0) & (h1 == 1))) | (num_actions == 3)
    last = history[jnp.clip(num_actions - 1, 0, MAX_ACTIONS - 1)]
    bets = jnp.sum(history == 1)
    folded = (last == 0) & (bets > 0)
    folder = (num_actions - 1) % 2
    showdown_winner = jnp.where(cards[0] > cards[1], 0, 1)
    winner = jnp.where(folded, 1 - folder, showdown_winner)
    stake = jnp.where(folded, 1.0, jnp.where(bets > 0, 2.0, 1.0))
    returns = jnp.where(jnp.arange(2) == winner, stake, -stake).astype(jnp.float32)
    return terminal, jnp.where(terminal, returns, 0.0).astype(jnp.float32)


class KuhnPoker(Environment):
    """Two-player Kuhn poker with explicit chance deals (OpenSpiel's ``kuhn_poker``)."""

    traits = Traits(
        num_agents=2,
        dynamics="sequential",
        chance="explicit_stochastic",
        information="imperfect",
        utility="zero_sum",
        reward_style="terminal",
        action_style="full_action_set",
    )
    render_fps = 1
    ACTION_NAMES = ACTION_NAMES

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def reset_env(self, key, params):
        state = EnvState(
            cards=jnp.full((2,), -1, jnp.int32),
            history=jnp.full((MAX_ACTIONS,), -1, jnp.int32),
            num_actions=jnp.zeros((), jnp.int32),
            terminated=jnp.zeros((), bool),
            returns=jnp.zeros((2,), jnp.float32),
        )
        return self._obs(state), state

    # ---- explicit chance ----------------------------------------------------------------------
    def is_chance_node(self, state, params=None):
        return (state.cards[1] == -1) & ~state.terminated

    def chance_outcomes(self, state, params=None):
        """float32[3]: the probability of dealing each card at a chance node (uniform over the
        cards not dealt yet); all zero elsewhere."""
        left = (jnp.arange(NUM_CARDS) != state.cards[0]) & (jnp.arange(NUM_CARDS) != state.cards[1])
        p = left / jnp.sum(left)
        return jnp.where(self.is_chance_node(state), p, 0.0).astype(jnp.float32)

    def apply_chance(self, state, outcome, params=None):
        """Deal card ``outcome`` to the first player without one (player 0, then player 1).

        Concrete arguments are checked on the host (`jaxenvs.core.ChanceError`, a ValueError): the
        state must be a chance node and the card one not dealt yet (probability > 0 in
        `chance_outcomes`). Traced ones are checked under ``make(..., checked=True)`` and
        `jaxenvs.checked`; otherwise an invalid outcome is the caller's error (not detected)."""
        check_chance_outcome(self, state, outcome, params)
        return self._deal(state, outcome)

    @staticmethod
    def _deal(state, outcome):
        seat = jnp.where(state.cards[0] < 0, 0, 1)
        cards = jnp.where(jnp.arange(2) == seat, jnp.asarray(outcome, jnp.int32), state.cards)
        return state.replace(cards=cards)

    def observer_view(self, state, player: int, params=None) -> EnvState:
        """The state as ``player`` sees it (what a person in that seat may be shown): the other
        player's card hidden (`HIDDEN`: drawn as a grey card face, written ``?``) until a showdown
        shows both; after a fold, as in poker, it stays hidden. Not a state to step from."""
        bets = jnp.sum(state.history == 1)
        last = state.history[jnp.clip(state.num_actions - 1, 0, MAX_ACTIONS - 1)]
        folded = (state.num_actions > 0) & (last == 0) & (bets > 0)
        shown = state.terminated & ~folded & (state.num_actions >= 2)
        return state.replace(cards=jnp.where((jnp.arange(2) == player) | shown, state.cards, HIDDEN).astype(jnp.int32))

    # ---- decisions ------------------------------------------------------------------------------
    def current_player(self, state, params=None):
        return jnp.where(self.is_chance_node(state), 0, state.num_actions % 2).astype(jnp.int32)

    def legal_action_mask(self, state, params=None):
        """bool[2, 2]: ``[True, True]`` in the mover's row at a decision node, false elsewhere."""
        decision = ~self.is_chance_node(state) & ~state.terminated
        moves = (jnp.arange(2) == self.current_player(state)) & decision
        return jnp.broadcast_to(moves[:, None], (2, NUM_ACTIONS))

    def step_env(self, key, state, action, params):
        chance = self.is_chance_node(state)
        # chance: a card uniform among those left, as chance_outcomes says (exactly uniform)
        card = spaces.Discrete(NUM_CARDS).sample(key, mask=self.chance_outcomes(state) > 0)
        dealt = self._deal(state, card)  # used at chance nodes only

        player = self.current_player(state)
        move = action[player]
        legal = (move >= 0) & (move < NUM_ACTIONS) & ~state.terminated
        history = jnp.where(jnp.arange(MAX_ACTIONS) == state.num_actions, move, state.history)
        num_actions = state.num_actions + 1
        terminal, returns = _showdown_or_fold(history, num_actions, state.cards)
        illegal_returns = jnp.where(jnp.arange(2) == player, -1.0, 1.0).astype(jnp.float32)
        returns = jnp.where(legal, returns, illegal_returns)
        moved = EnvState(
            cards=state.cards,
            history=jnp.where(legal, history, state.history),
            num_actions=jnp.where(legal, num_actions, state.num_actions),
            terminated=terminal | ~legal,
            returns=jnp.where(terminal | ~legal, returns, 0.0),
        )
        state = jax.tree.map(lambda c, m: jnp.where(chance, c, m), dealt, moved)
        reward = jnp.where(chance, 0.0, moved.returns).astype(jnp.float32)
        info = {"illegal_action": ~chance & ~legal, "chance_outcome": jnp.where(chance, card, -1).astype(jnp.int32)}
        return self._obs(state), state, reward, state.terminated, jnp.zeros((), bool), info

    def _obs(self, state):
        player = jnp.eye(2, dtype=jnp.float32)  # [observer, one-hot]
        card = (state.cards[:, None] == jnp.arange(NUM_CARDS)).astype(jnp.float32)  # zeros before the deal
        taken = jnp.arange(MAX_ACTIONS) < state.num_actions
        bits = (state.history[:, None] == jnp.arange(NUM_ACTIONS)) & taken[:, None]  # [action, pass/bet]
        history = jnp.broadcast_to(bits.reshape(-1).astype(jnp.float32), (2, 2 * MAX_ACTIONS))
        tensor = jnp.concatenate([player, card, history], axis=1)
        return {"observation": tensor, "action_mask": self.legal_action_mask(state).astype(jnp.uint8)}

    def observation_space(self, params=None):
        return spaces.Dict(
            {
                "observation": spaces.Box(0.0, 1.0, (TENSOR_SIZE,), jnp.float32),
                "action_mask": spaces.Box(0, 1, (NUM_ACTIONS,), jnp.uint8),
            }
        )

    def action_space(self, params=None):
        return spaces.Discrete(NUM_ACTIONS)

    def render(self, state, params=None):
        """uint8[96, 192, 3]: player 0 on the left half, player 1 on the right. Each half shows the
        player's card as a coloured card face (grey undealt, blue J, gold Q, red K) and, below it,
        one square per action taken (white Pass, black Bet) in the order played; after the end a
        bar at the bottom is green for the player with positive returns, red otherwise."""
        height, width = PANEL, 2 * PANEL
        ys, xs = draw.pixel_grid(height, width)
        seat = (xs >= PANEL).astype(jnp.int32)
        x = xs - seat * PANEL
        frame = draw.canvas(height, width, (0, 100, 40))
        face = (jnp.abs(x - PANEL / 2) <= 18) & (ys >= 8) & (ys <= 58)
        color = jnp.asarray(CARD_COLORS)[jnp.maximum(state.cards[seat] + 1, 0)]  # grey: undealt or hidden
        frame = jnp.where(face[..., None], color, frame)
        slot = jnp.clip(((xs - 24) // 16).astype(jnp.int32), 0, MAX_ACTIONS - 1)
        in_slot = (ys >= 64) & (ys < 76) & (xs >= 24) & (xs < 24 + 16 * MAX_ACTIONS) & ((xs - 24) % 16 < 12)
        taken = slot < state.num_actions
        act_color = jnp.where((state.history[slot] == 1)[..., None], jnp.uint8(0), jnp.uint8(255))
        frame = jnp.where((in_slot & taken)[..., None], jnp.broadcast_to(act_color, frame.shape), frame)
        bar = (ys >= 84) & state.terminated
        outcome = jnp.where((state.returns[seat] > 0)[..., None], jnp.asarray(draw.GREEN, jnp.uint8), jnp.asarray(draw.RED, jnp.uint8))
        frame = jnp.where(bar[..., None], outcome, frame)
        return draw.paint(frame, draw.vline_mask((height, width), PANEL, 2.0), draw.BLACK)

    def render_text(self, state, params=None):
        """One line: the cards (``?`` undealt), the bets so far (``p`` pass, ``b`` bet) and who is to
        act (or ``chance deals``); after the end the returns and how the hand ended (a fold, a
        showdown or an illegal move) with the winner and the amount won."""
        cards = [CARD_NAMES[c] if c >= 0 else "?" for c in np.asarray(state.cards)]
        history = "".join("pb"[a] for a in np.asarray(state.history)[: int(state.num_actions)])
        line = f"KuhnPoker: cards {cards[0]} {cards[1]}, bets '{history}'"
        if bool(state.terminated):
            returns = np.asarray(state.returns)
            winner = int(np.argmax(returns))
            n = int(state.num_actions)
            hist = np.asarray(state.history)[:n]
            ended, _ = _showdown_or_fold(jnp.asarray(state.history), jnp.asarray(n), jnp.asarray(state.cards))
            if not bool(ended):  # the betting was not over: an illegal move ended the game
                how = f"player {1 - winner} made an illegal move"
            elif hist[-1] == 0 and (hist == 1).any():
                how = f"player {(n - 1) % 2} folds"
            else:
                how = f"showdown {cards[0]} vs {cards[1]}"
            return line + f", returns {returns.tolist()}: {how}, player {winner} wins {returns[winner]:g}"
        if bool(self.is_chance_node(state)):
            return line + ", chance deals"
        return line + f", player {int(self.current_player(state))} to act"
