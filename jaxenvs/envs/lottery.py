"""Lottery: ReinforcementLearning.jl's ``LotteryEnv`` (its "How to write a customized
environment?" example, after Monte Carlo Tree Search: A Tutorial, WSC 2018).

With $10 in your pocket you play once. Dynamics, as in ReinforcementLearning.jl, with the
payouts and probabilities as params fields:

* actions ``0`` PowerRich: reward 100,000,000 with probability 0.01, else -10;
  ``1`` MegaHaul: reward 1,000,000 with probability 0.05, else -10; ``2`` NoTicket: reward 0;
* observation int32 scalar in ``Discrete(2)``: 0 before playing, 1 after (RL.jl's state,
  whether the lottery has been played);
* every step plays the lottery and sets ``terminated`` (a one-shot game; stepping a played state
  again plays again, and raises with ``make(..., checked=True)`` under `jaxenvs.checked`);
  the probabilities must lie in ``[0, 1]`` and the prizes be finite float32 numbers (``validate_params``);
  the reward is float32 (1e8 and 1e6 are exact in float32);
* ``info``: ``{"won": bool, "action": int32}`` (``won`` is False for NoTicket; ``action`` is
  the action played, after clipping).

Out-of-range actions are clipped into ``[0, 2]`` (documented behaviour; ``make(...,
checked=True)`` with `jaxenvs.checked` raises instead). The step draws one uniform number.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxenvs import prng, struct

from jaxenvs import spaces
from jaxenvs.core import Environment, Traits, require_param
from jaxenvs.rendering import draw

ACTION_NAMES = ("PowerRich", "MegaHaul", "NoTicket")
NUM_ACTIONS = len(ACTION_NAMES)
NO_TICKET = ACTION_NAMES.index("NoTicket")
# one colour per choice: PowerRich, MegaHaul, NoTicket
CHOICE_COLORS = np.array([draw.YELLOW, draw.BLUE, draw.GREY], dtype=np.uint8)
CELL = 64  # px per choice in the rendering


@struct.dataclass
class EnvParams:
    power_rich_prize: float = 100_000_000.0  # reward of a winning PowerRich ticket
    power_rich_prob: float = 0.01  # probability that a PowerRich ticket wins; in [0, 1]
    mega_haul_prize: float = 1_000_000.0  # reward of a winning MegaHaul ticket
    mega_haul_prob: float = 0.05  # probability that a MegaHaul ticket wins; in [0, 1]
    losing_reward: float = -10.0  # reward of a losing ticket (the price of the ticket)


@struct.dataclass
class EnvState:
    """The dynamics read none of it (every step plays afresh); ``action`` and ``won`` are the
    record of the round played, which the picture shows: the outcome of a random draw cannot be
    derived from anything else. The reward is derived from them and the params where shown."""

    played: jax.Array  # int32 scalar: 0 before playing, 1 after
    action: jax.Array  # int32 scalar: the last action played, -1 before playing
    won: jax.Array  # bool scalar: the last ticket won


class Lottery(Environment):
    """Buy a PowerRich or MegaHaul ticket, or none (ReinforcementLearning.jl's LotteryEnv)."""

    traits = Traits(num_agents=1, chance="stochastic", information="perfect", reward_style="terminal")
    render_fps = 2
    ACTION_NAMES = ACTION_NAMES
    # what the frame's colours mean: rows of (rgb or None, text), drawn under frames by
    # jaxenvs.rendering.legend (jaxenvs play, policy GIFs)
    legend = (
        ((None, "tickets (chosen one framed):"),),
        tuple((tuple(c), name) for c, name in zip(CHOICE_COLORS.tolist(), ACTION_NAMES)),
        ((None, "bar:"), (draw.GREEN, "won"), (draw.RED, "lost"), (draw.GREY, "no ticket")),
    )

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def validate_params(self, params: EnvParams) -> None:
        big = float(np.finfo(np.float32).max)  # the reward is float32: a larger prize would be inf
        for name in ("power_rich_prize", "mega_haul_prize", "losing_reward"):
            require_param("Lottery", name, getattr(params, name), low=-big, high=big)
        for name in ("power_rich_prob", "mega_haul_prob"):
            require_param("Lottery", name, getattr(params, name), low=0, high=1)

    def reset_env(self, key, params):
        state = EnvState(
            played=jnp.zeros((), jnp.int32),
            action=jnp.full((), -1, jnp.int32),
            won=jnp.zeros((), bool),
        )
        return state.played, state

    def step_env(self, key, state, action, params):
        action = jnp.clip(action, 0, NUM_ACTIONS - 1).astype(jnp.int32)
        # float32 draw and probabilities whatever jax_enable_x64 says: the same key, the same draw
        win_prob = jnp.stack([params.power_rich_prob, params.mega_haul_prob, 0.0]).astype(jnp.float32)[action]
        won = (prng.uniform(key, ()) < win_prob) & (action != NO_TICKET)
        reward = _reward(action, won, params)
        state = EnvState(played=jnp.ones((), jnp.int32), action=action, won=won)
        terminated = jnp.ones((), bool)
        truncated = jnp.zeros((), bool)
        return state.played, state, reward, terminated, truncated, {"won": won, "action": action}

    def render(self, state, params=None):
        """uint8[96, 192, 3]: the three choices left to right, and the outcome bar below.

        PowerRich is a yellow disc, MegaHaul a blue square, NoTicket a grey bar; after playing,
        the chosen one gets a black frame. Rows 68 to 95 show the outcome: green for a win,
        red for a losing ticket, grey for NoTicket, white before playing.
        """
        frame = draw.canvas(3 * CELL // 2, 3 * CELL)
        shape = frame.shape[:2]
        x0 = state.action * CELL  # -CELL before playing: the frame falls outside the picture
        frame = draw.paint(frame, draw.rect_mask(shape, x0, 0, x0 + CELL, CELL), draw.BLACK)
        frame = draw.fill_rect(frame, x0 + 4, 4, x0 + CELL - 4, CELL - 4, draw.WHITE)
        q = CELL / 4
        frame = draw.fill_circle(frame, 2 * q, 2 * q, q, CHOICE_COLORS[0])
        frame = draw.fill_rect(frame, CELL + q, q, CELL + 3 * q, 3 * q, CHOICE_COLORS[1])
        frame = draw.fill_rect(frame, 2 * CELL + q, 1.75 * q, 2 * CELL + 3 * q, 2.25 * q, CHOICE_COLORS[2])
        outcome = jnp.where(state.won, 1, jnp.where(state.action == NO_TICKET, 3, 2))
        outcome = jnp.where(state.played == 1, outcome, 0)
        colors = jnp.asarray([draw.WHITE, draw.GREEN, draw.RED, draw.GREY], jnp.uint8)
        return draw.fill_rect(frame, 0, CELL + 4, 3 * CELL, 3 * CELL // 2, colors[outcome])

    def render_text(self, state, params=None):
        if int(state.played) == 0:
            return "Lottery: not played yet"
        name = ACTION_NAMES[int(state.action)]
        result = "won" if bool(state.won) else "no ticket" if int(state.action) == NO_TICKET else "lost"
        return f"Lottery: {name} -> {result}, reward {float(_reward(state.action, state.won, params)):,.0f}"

    def observation_space(self, params=None):
        return spaces.Discrete(2)

    def action_space(self, params=None):
        return spaces.Discrete(NUM_ACTIONS)


def _reward(action, won, params):
    """float32: the prize of a winning ticket, ``losing_reward`` for a losing one, 0 for NoTicket."""
    prize = jnp.stack([params.power_rich_prize, params.mega_haul_prize, 0.0])[action]
    return jnp.where(won, prize, jnp.where(action == NO_TICKET, 0.0, params.losing_reward)).astype(jnp.float32)
