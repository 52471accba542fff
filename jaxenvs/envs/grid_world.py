"""GridWorld: Gymnasium's custom-environment tutorial ("Make your own custom environment").

An agent walks on a ``size x size`` grid towards a target. Dynamics, as in the tutorial:

* reset: the agent's cell is uniform over the grid, the target's uniform over the *other* cells
  (the tutorial re-draws until they differ; here one draw of a cell index and of an offset among
  the remaining ``size**2 - 1`` cells gives the same distribution without a loop);
* actions ``0 -> (+1, 0)`` right, ``1 -> (0, +1)`` up, ``2 -> (-1, 0)`` left, ``3 -> (0, -1)``
  down; the new position is clipped to the grid;
* reward 1.0 and ``terminated`` when the agent stands on the target, else 0.0;
* observation ``{"agent": int32[2], "target": int32[2]}`` (x, y); ``info["distance"]`` is the
  Manhattan distance between them (int32).

Out-of-range actions are clipped into ``[0, NUM_ACTIONS - 1] = [0, 3]`` (documented behaviour; ``make(...,
checked=True)`` with `jaxenvs.checked` raises instead). The step itself draws no randomness.

Stepping a state whose episode terminated (no auto-reset; Gymnasium leaves it undefined): the
dynamics apply unchanged, so a move away from the target pays 0 and does not terminate, and a
move into a wall that keeps the agent on the target pays 1 and terminates again. With ``make(...,
checked=True)`` and `jaxenvs.checked` such a step raises. ``params.size`` must be an integer
in ``[2, MAX_SIZE]`` with ``MAX_SIZE = 46340`` (``validate_params``: the cell index ``size**2`` is
int32); a state from another ``size`` has the same shapes, so it is not caught
when traced: its positions are clipped into the grid on the next step, and a target outside the
grid is never reached.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxenvs import struct

from jaxenvs import prng, spaces
from jaxenvs.core import Environment, Traits, require_param
from jaxenvs.rendering import draw
from jaxenvs.levels import ParamSpace, Uniform

# rows: action index -> (dx, dy)
ACTION_TO_DIRECTION = np.array([[1, 0], [0, 1], [-1, 0], [0, -1]], dtype=np.int32)
NUM_ACTIONS = len(ACTION_TO_DIRECTION)  # the action space's size; every bound below derives from it
MAX_SIZE = 46340  # the largest size whose size**2 cells fit in int32 (46341**2 > 2**31 - 1)


@struct.dataclass
class EnvParams:
    size: int = 5  # side length of the square grid (cells); >= 2


@struct.dataclass
class EnvState:
    agent: jax.Array  # int32[2], (x, y)
    target: jax.Array  # int32[2], (x, y)


class GridWorld(Environment):
    """Reach the target on a square grid (Gymnasium's custom-environment tutorial)."""

    traits = Traits(
        num_agents=1,
        chance="deterministic",
        information="perfect",
        reward_style="terminal",
    )
    render_fps = 4
    # action i moves by ACTION_TO_DIRECTION[i]; y grows downwards in the picture, as in Gym's tutorial
    ACTION_NAMES = ("right (x+1)", "up (y+1: down on screen)", "left (x-1)", "down (y-1: up on screen)")

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def validate_params(self, params: EnvParams) -> None:
        # the reset draws a cell index below size**2 in int32: sizes above MAX_SIZE would wrap
        require_param("GridWorld", "size", params.size, integer=True, low=2, high=MAX_SIZE)

    def param_space(self):
        """`jaxenvs.levels.ParamSpace`: ``size`` uniform in 3..9 (a params field: shapes do not
        change with it, so one program plays every size)."""
        return ParamSpace(self.default_params, size=Uniform(3, 9))

    def reset_env(self, key, params):
        n_cells = params.size * params.size
        # one draw of 64 random bits; modulo bias is below 2**-32 * n_cells (negligible)
        bits = prng.bits(key, (2,))
        agent_idx = (bits[0] % jnp.uint32(n_cells)).astype(jnp.int32)
        offset = (bits[1] % jnp.uint32(n_cells - 1)).astype(jnp.int32)
        target_idx = offset + (offset >= agent_idx).astype(jnp.int32)  # uniform over the cells other than agent_idx
        state = EnvState(
            agent=jnp.stack([agent_idx % params.size, agent_idx // params.size]).astype(jnp.int32),
            target=jnp.stack([target_idx % params.size, target_idx // params.size]).astype(jnp.int32),
        )
        return self._obs(state), state

    def step_env(self, key, state, action, params):
        action = jnp.clip(action, 0, NUM_ACTIONS - 1)
        direction = jnp.asarray(ACTION_TO_DIRECTION)[action]
        agent = jnp.clip(state.agent + direction, 0, params.size - 1)
        state = state.replace(agent=agent)
        terminated = jnp.all(agent == state.target)
        reward = terminated.astype(jnp.float32)
        truncated = jnp.zeros((), bool)
        return self._obs(state), state, reward, terminated, truncated, self._info(state)

    def _obs(self, state):
        return {"agent": state.agent, "target": state.target}

    def state_fits_params(self, state, params):
        """Agent and target on the ``size`` x ``size`` grid (checked mode refuses other states)."""
        cells = jnp.stack([state.agent, state.target])
        return jnp.all((cells >= 0) & (cells < params.size))

    def _info(self, state):
        return {"distance": jnp.sum(jnp.abs(state.agent - state.target)).astype(jnp.int32)}

    def render(self, state, params=None):
        """uint8[512, 512, 3]: white board, grey grid lines, red target square, blue agent circle.

        As in the tutorial, ``x`` grows to the right and ``y`` downwards in the picture.
        """
        window = 512
        pix = window / params.size
        frame = draw.canvas(window, window)
        tx, ty = state.target[0] * pix, state.target[1] * pix
        frame = draw.fill_rect(frame, tx, ty, tx + pix, ty + pix, draw.RED)
        frame = draw.fill_circle(frame, (state.agent[0] + 0.5) * pix, (state.agent[1] + 0.5) * pix, pix / 3, draw.BLUE)
        # grid lines: pixel centres within 1.5 px of a multiple of window/size, in exact integer
        # arithmetic (2 * size * distance = |(2c + 1) * size - 2 * k * window|)
        c = jnp.arange(window, dtype=jnp.int32)
        r = ((2 * c + 1) * params.size) % (2 * window)
        line = jnp.minimum(r, 2 * window - r) <= 3 * params.size
        return draw.paint(frame, line[None, :] | line[:, None], draw.BLACK)

    def render_text(self, state, params=None):
        size = int(params.size)
        agent, target = np.asarray(state.agent), np.asarray(state.target)
        rows = []
        for y in range(size):
            row = ""
            for x in range(size):
                row += "A" if (x, y) == tuple(agent) else "T" if (x, y) == tuple(target) else "."
            rows.append(row)
        return "\n".join(rows)

    def observation_space(self, params=None):
        cell = spaces.Box(0, params.size - 1, (2,), np.int32)
        return spaces.Dict({"agent": cell, "target": cell})

    def action_space(self, params=None):
        return spaces.Discrete(NUM_ACTIONS)
