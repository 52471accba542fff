"""RockPaperScissors: ReinforcementLearning.jl's ``RockPaperScissorsEnv``.

A one-shot, simultaneous, zero-sum game of two agents. Dynamics, as in ReinforcementLearning.jl:

* each agent picks ``0`` Rock, ``1`` Paper or ``2`` Scissors; ``action`` is int32[2] (agent 0,
  agent 1). Rock beats Scissors, Scissors beats Paper, Paper beats Rock;
* reward float32[2]: ``(+1, -1)`` when agent 0 wins, ``(-1, +1)`` when agent 1 wins, ``(0, 0)``
  on a tie, so the rewards always sum to 0;
* observation int32[2], one scalar per agent: 0 before the round, 1 after. It never shows the
  other agent's choice before the round (imperfect information: moves are simultaneous);
* every step plays a round and sets ``terminated`` (stepping a played state plays again; with
  ``make(..., checked=True)`` under `jaxenvs.checked` it raises);
* ``info``: ``{"actions": int32[2], "opponent_action": int32[2]}``, the choices as played
  (after clipping); ``opponent_action[i]`` is the choice of the agent other than ``i``.

Out-of-range actions are clipped into ``[0, 2]`` (documented behaviour; ``make(...,
checked=True)`` with `jaxenvs.checked` raises instead). The step draws no randomness.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxenvs import struct

from jaxenvs import spaces
from jaxenvs.core import Environment, Traits
from jaxenvs.rendering import draw

ACTION_NAMES = ("Rock", "Paper", "Scissors")
NUM_ACTIONS = len(ACTION_NAMES)
# index: (own choice - other's choice) mod 3 -> own reward (0 tie, 1 win, 2 loss)
REWARD_BY_DIFFERENCE = np.array([0.0, 1.0, -1.0], dtype=np.float32)
# one colour per choice: Rock, Paper, Scissors
CHOICE_COLORS = np.array([draw.BROWN, draw.BLUE, draw.RED], dtype=np.uint8)
# outcome bar: before the round, win, loss, draw
OUTCOME_COLORS = np.array([draw.WHITE, draw.GREEN, draw.RED, draw.GREY], dtype=np.uint8)
PANEL = 128  # px per agent in the rendering


@struct.dataclass
class EnvParams:
    """Nothing to tune: the payoffs are the fixed zero-sum ones."""


@struct.dataclass
class EnvState:
    """The dynamics read none of it (every step plays a fresh round); ``actions`` is the record
    of the round played, which the picture and ``render_text`` show and nothing else holds."""

    played: jax.Array  # int32 scalar: 0 before the round, 1 after
    actions: jax.Array  # int32[2]: the choices of the last round, -1 before the round


class RockPaperScissors(Environment):
    """Two agents play one round of rock-paper-scissors (ReinforcementLearning.jl)."""

    traits = Traits(
        num_agents=2,
        dynamics="simultaneous",
        chance="deterministic",
        information="imperfect",
        utility="zero_sum",
        reward_style="terminal",
    )
    render_fps = 2
    ACTION_NAMES = ACTION_NAMES
    # what the frame's colours mean: rows of (rgb or None, text), drawn under frames by
    # jaxenvs.rendering.legend (jaxenvs play, policy GIFs)
    legend = (
        ((None, "left: agent 0   right: agent 1"),),
        tuple((tuple(c), name) for c, name in zip(CHOICE_COLORS.tolist(), ACTION_NAMES)),
        ((None, "bar:"), (tuple(OUTCOME_COLORS[1].tolist()), "win"), (tuple(OUTCOME_COLORS[2].tolist()), "loss"),
         (tuple(OUTCOME_COLORS[3].tolist()), "draw")),
    )

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def reset_env(self, key, params):
        state = EnvState(played=jnp.zeros((), jnp.int32), actions=jnp.full((2,), -1, jnp.int32))
        return self._obs(state), state

    def step_env(self, key, state, action, params):
        actions = jnp.clip(action, 0, NUM_ACTIONS - 1).astype(jnp.int32)
        own_reward = jnp.asarray(REWARD_BY_DIFFERENCE)[(actions - actions[::-1]) % NUM_ACTIONS]
        state = EnvState(played=jnp.ones((), jnp.int32), actions=actions)
        terminated = jnp.ones((), bool)
        truncated = jnp.zeros((), bool)
        info = {"actions": actions, "opponent_action": actions[::-1]}
        return self._obs(state), state, own_reward, terminated, truncated, info

    def _obs(self, state):
        return jnp.broadcast_to(state.played, (2,))

    def render(self, state, params=None):
        """uint8[128, 256, 3]: agent 0 on the left half, agent 1 on the right.

        After the round each half shows the agent's choice centred at row 48 (Rock a brown disc,
        Paper a blue upright rectangle, Scissors a red cross) and, in rows 100 to 127, the
        agent's outcome: green win, red loss, grey draw. Before the round both are blank.
        """
        frame = draw.canvas(PANEL, 2 * PANEL)
        ys, xs = draw.pixel_grid(PANEL, 2 * PANEL)
        agent = (xs >= PANEL).astype(jnp.int32)  # which agent's half a pixel lies in
        dx, dy = xs - (agent * PANEL + PANEL / 2), ys - 48.0
        shapes = jnp.stack([
            dx**2 + dy**2 <= 28.0**2,
            (jnp.abs(dx) <= 22) & (jnp.abs(dy) <= 30),
            (jnp.maximum(jnp.abs(dx), jnp.abs(dy)) <= 28)
            & ((jnp.abs(dx - dy) <= 6) | (jnp.abs(dx + dy) <= 6)),
        ])
        played = state.played == 1
        choice = jnp.clip(state.actions, 0, NUM_ACTIONS - 1)[agent]  # int32[H, W]
        in_shape = jnp.take_along_axis(shapes, choice[None], axis=0)[0] & played
        colors = jnp.asarray(CHOICE_COLORS)[choice]
        frame = jnp.where(in_shape[..., None], colors, frame)
        difference = (state.actions - state.actions[::-1]) % NUM_ACTIONS  # 0 draw, 1 win, 2 loss
        outcome = jnp.where(played, jnp.asarray([3, 1, 2])[difference], 0)
        bar = (ys >= 100) & played
        frame = jnp.where(bar[..., None], jnp.asarray(OUTCOME_COLORS)[outcome[agent]], frame)
        return draw.paint(frame, draw.vline_mask((PANEL, 2 * PANEL), PANEL, 2.0), draw.BLACK)

    def render_text(self, state, params=None):
        if int(state.played) == 0:
            return "RockPaperScissors: round not played yet"
        a0, a1 = (int(a) for a in np.asarray(state.actions))
        r0 = float(REWARD_BY_DIFFERENCE[(a0 - a1) % NUM_ACTIONS])
        result = "draw" if r0 == 0 else "agent 0 wins" if r0 > 0 else "agent 1 wins"
        return f"RockPaperScissors: {ACTION_NAMES[a0]} vs {ACTION_NAMES[a1]} -> {result}"

    def observation_space(self, params=None):
        return spaces.Discrete(2)

    def action_space(self, params=None):
        return spaces.Discrete(NUM_ACTIONS)
