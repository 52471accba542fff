"""TicTacToe: PettingZoo's ``classic.tictactoe_v3``, turn by turn, as one pure function.

Two agents take turns marking the cells of a 3 x 3 board; three in a row (a row, a column or a
diagonal) wins. Dynamics, as in PettingZoo's ``tictactoe_v3`` (``pettingzoo/classic/tictactoe``):

* agent 0 (PettingZoo's ``player_1``, marks ``X``) moves first, then the agents alternate;
* action ``i`` in ``{0, ..., 8}`` marks PettingZoo's cell ``i`` (``Board.squares[i]``). PettingZoo
  draws cell ``i`` in column ``i // 3``, row ``i % 3`` of its picture, and its observation reshapes
  the squares row-major: plane entry ``[i // 3, i % 3]`` is cell ``i``. Both are kept here;
* ``action`` is int32[2] (one row per agent, sequential dynamics): only the current player's entry
  is read, the other one is ignored whatever its value;
* the winning lines are PettingZoo's ``Board.winning_combinations`` (cells ``(0,1,2)``, ``(3,4,5)``,
  ``(6,7,8)``, ``(0,3,6)``, ``(1,4,7)``, ``(2,5,8)``, ``(0,4,8)``, ``(2,4,6)``); a win gives the
  mover +1 and the other agent -1, a full board without a win is a draw (0, 0); rewards are 0
  before the end (reward float32[2], zero-sum);
* observation: ``{"observation": int32[2, 3, 3, 2], "action_mask": uint8[2, 9]}``; agent ``p``'s
  planes are PettingZoo's ``observe(agent)``: ``[..., 0]`` its own marks, ``[..., 1]`` the
  opponent's. The mask row of the agent to move holds its legal cells (the empty ones), the other
  row is all zero; in a terminal state both rows are zero.

An illegal move (an occupied cell, or an action outside ``[0, 8]``) ends the game: the mover gets
-1 and the other agent +1 (PettingZoo's ``TerminateIllegalWrapper`` gives the other agent 0; here
the game stays zero-sum, as jaxenvs' turn-based contract says). ``info["illegal_action"]`` (bool)
says whether the step's move was illegal; ``jaxenvs.checked`` raises on one. Stepping a terminal
state (no auto-reset) counts as an illegal move: no cell is legal there. The step draws no
randomness.

The state keeps one 9-bit board per agent (bit ``i`` = a mark on cell ``i``), so a move, the win
test and the mask are a few integer operations with no gather.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import spaces, struct
from jaxenvs.core import Environment, Traits
from jaxenvs.games import tic_tac_toe as solver
from jaxenvs.rendering import draw

NUM_CELLS = 9
FULL_BOARD = (1 << NUM_CELLS) - 1
# PettingZoo's Board.winning_combinations, one bit mask per line
WIN_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
LINE_MASKS = np.array([sum(1 << i for i in line) for line in WIN_LINES], dtype=np.int32)
CELL_BITS = np.arange(NUM_CELLS, dtype=np.int32)
MARKS = ("X", "O")  # agent 0, agent 1
CELL_PX = 64  # rendering: pixels per cell


@struct.dataclass
class EnvParams:
    """Nothing to tune: the rules are fixed."""


@struct.dataclass
class EnvState:
    marks: jax.Array  # int32[2]: agent p's marks as a 9-bit board (bit i = cell i)
    current_player: jax.Array  # int32[]: the agent to move (after the end: the one that would move)
    terminated: jax.Array  # bool[]: the game is over (win, draw or illegal move)


def _bits(board: jax.Array) -> jax.Array:
    """int32[..., 9]: bit ``i`` of each 9-bit board in ``board``."""
    return (board[..., None] >> jnp.asarray(CELL_BITS)) & 1


class TicTacToe(Environment):
    """Two agents alternate marks on a 3 x 3 board (PettingZoo's ``tictactoe_v3``)."""

    traits = Traits(
        num_agents=2,
        dynamics="sequential",
        chance="deterministic",
        information="perfect",
        utility="zero_sum",
        reward_style="terminal",
        action_style="full_action_set",
    )
    render_fps = 2
    # action i marks cell i; cells are numbered column-major (PettingZoo's picture and render_text)
    ACTION_NAMES = tuple(f"mark cell {i} (column {i // 3}, row {i % 3})" for i in range(NUM_CELLS))
    MOVE_KEY = "cells, column-major as in PettingZoo:\n0 3 6\n1 4 7\n2 5 8"
    MAX_PLIES = NUM_CELLS  # the longest game: every cell marked (look-ahead and search stop there)
    # named opponents (jaxenvs.games.opponents; 'random' is every game's)
    OPPONENTS = {"perfect": (solver.perfect, "minimax over every position, uniform among the optimal moves: never loses")}

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def reset_env(self, key, params):
        state = EnvState(
            marks=jnp.zeros((2,), jnp.int32),
            current_player=jnp.zeros((), jnp.int32),
            terminated=jnp.zeros((), bool),
        )
        return self._obs(state), state

    def step_env(self, key, state, action, params):
        player = state.current_player
        move = action[player]
        mine, theirs = state.marks[player], state.marks[1 - player]
        bit = jnp.left_shift(jnp.int32(1), jnp.clip(move, 0, NUM_CELLS - 1))
        legal = (move >= 0) & (move < NUM_CELLS) & ((bit & (mine | theirs)) == 0) & ~state.terminated
        mine = mine | jnp.where(legal, bit, 0)
        lines = jnp.asarray(LINE_MASKS)
        won = legal & jnp.any((mine & lines) == lines)
        full = (mine | theirs) == FULL_BOARD
        mover_reward = jnp.where(legal, jnp.where(won, 1.0, 0.0), -1.0).astype(jnp.float32)
        is_mover = jnp.arange(2) == player
        state = EnvState(
            marks=jnp.where(is_mover, mine, state.marks),
            current_player=1 - player,
            terminated=~legal | won | full,
        )
        reward = jnp.where(is_mover, mover_reward, 0.0 - mover_reward)  # 0 - r: no -0.0
        info = {"illegal_action": ~legal}
        return self._obs(state), state, reward, state.terminated, jnp.zeros((), bool), info

    def legal_action_mask(self, state, params=None):
        """bool[2, 9]: the empty cells in the mover's row, all false in the other row and in a
        terminal state."""
        empty = _bits(~(state.marks[0] | state.marks[1])) == 1
        moves = (jnp.arange(2) == state.current_player) & ~state.terminated
        return moves[:, None] & empty[None, :]

    def current_player(self, state, params=None):
        return state.current_player

    def state_from_observation(self, obs, params=None):
        """The `EnvState` one agent's observation dict shows (a perfect-information game: the board
        is the whole state), as tree search (`jaxenvs.games.search`) starts from it: the observer is
        the mover (the first player when both have as many marks); ``terminated`` when the mask
        has no legal move."""
        planes = jnp.asarray(obs["observation"]).reshape(NUM_CELLS, 2).astype(jnp.int32)
        weights = jnp.left_shift(jnp.int32(1), jnp.asarray(CELL_BITS))
        mine, theirs = jnp.sum(planes[:, 0] * weights), jnp.sum(planes[:, 1] * weights)
        mover = jnp.where(jnp.sum(planes[:, 0]) == jnp.sum(planes[:, 1]), 0, 1).astype(jnp.int32)
        marks = jnp.where(mover == 0, jnp.stack([mine, theirs]), jnp.stack([theirs, mine]))
        return EnvState(marks=marks, current_player=mover, terminated=~jnp.any(jnp.asarray(obs["action_mask"]) != 0))

    def _obs(self, state):
        bits = _bits(state.marks)  # [agent, cell]: the agent's own marks
        planes = jnp.stack([bits, bits[::-1]], axis=-1).reshape(2, 3, 3, 2)
        return {"observation": planes, "action_mask": self.legal_action_mask(state).astype(jnp.uint8)}

    def observation_space(self, params=None):
        return spaces.Dict(
            {
                "observation": spaces.Box(0, 1, (3, 3, 2), jnp.int32),
                "action_mask": spaces.Box(0, 1, (NUM_CELLS,), jnp.uint8),
            }
        )

    def action_space(self, params=None):
        return spaces.Discrete(NUM_CELLS)

    def render(self, state, params=None):
        """uint8[192, 192, 3]: PettingZoo's layout (cell ``i`` in column ``i // 3``, row ``i % 3``),
        64 px per cell, black grid lines, agent 0's marks as red crosses, agent 1's as blue rings."""
        size = 3 * CELL_PX
        ys, xs = draw.pixel_grid(size, size)
        col, row = (xs // CELL_PX).astype(jnp.int32), (ys // CELL_PX).astype(jnp.int32)
        cell = jnp.clip(3 * col + row, 0, NUM_CELLS - 1)
        owner = _bits(state.marks)[:, cell]  # int32[2, H, W]
        dx, dy = xs - (col + 0.5) * CELL_PX, ys - (row + 0.5) * CELL_PX
        reach = 0.32 * CELL_PX
        cross = (jnp.maximum(jnp.abs(dx), jnp.abs(dy)) <= reach) & (
            (jnp.abs(dx - dy) <= 4) | (jnp.abs(dx + dy) <= 4)
        )
        radius = jnp.sqrt(dx**2 + dy**2)
        ring = jnp.abs(radius - reach) <= 3.5
        frame = draw.canvas(size, size)
        frame = draw.paint(frame, cross & (owner[0] == 1), draw.RED)
        frame = draw.paint(frame, ring & (owner[1] == 1), draw.BLUE)
        for k in (1, 2):
            frame = draw.paint(frame, draw.vline_mask((size, size), k * CELL_PX, 3.0), draw.BLACK)
            frame = draw.paint(frame, draw.hline_mask((size, size), k * CELL_PX, 3.0), draw.BLACK)
        return frame

    def move_at(self, x, y):
        """The move a click at pixel column ``x``, row ``y`` of `render`'s frame selects: the cell
        under it, -1 off the board (numpy, elementwise over arrays; a window's clicks use it)."""
        x, y = np.asarray(x), np.asarray(y)
        inside = (x >= 0) & (x < 3 * CELL_PX) & (y >= 0) & (y < 3 * CELL_PX)
        return np.where(inside, 3 * (x // CELL_PX) + y // CELL_PX, -1)

    def render_text(self, state, params=None):
        """The board (PettingZoo's layout, ``.`` empty) and a status line: who is to move, or after
        the end ``game over:`` and the result (who won, a draw, or who made an illegal move)."""
        marks = np.asarray(state.marks)
        cells = ["X" if marks[0] >> i & 1 else "O" if marks[1] >> i & 1 else "." for i in range(NUM_CELLS)]
        rows = [" ".join(cells[row + 3 * col] for col in range(3)) for row in range(3)]
        player = int(state.current_player)
        if not bool(state.terminated):
            return "\n".join(rows + [f"agent {player} ({MARKS[player]}) to move"])
        mover, other = 1 - player, player  # the agent whose move ended the game
        mine = int(marks[mover])
        if any(mine & int(m) == int(m) for m in LINE_MASKS):
            result = f"agent {mover} ({MARKS[mover]}) wins"
        elif int(marks[0] | marks[1]) == FULL_BOARD:
            result = "draw"
        else:
            result = f"agent {mover} ({MARKS[mover]}) made an illegal move: agent {other} ({MARKS[other]}) wins"
        return "\n".join(rows + [f"game over: {result}"])
