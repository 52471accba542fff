"""ConnectFour: PettingZoo's ``classic.connect_four_v3``, turn by turn, as one pure function.

Two agents take turns dropping pieces into the 7 columns of a 6-row board; a piece falls to the
lowest empty row of its column. Four in a row (horizontal, vertical or diagonal) wins. Dynamics,
as in PettingZoo's ``connect_four_v3`` (``pettingzoo/classic/connect_four``):

* agent 0 (PettingZoo's ``player_0``, red pieces) moves first, then the agents alternate;
* action ``c`` in ``{0, ..., 6}`` drops a piece into column ``c``; ``action`` is int32[2] (one row
  per agent, sequential dynamics): only the current player's entry is read;
* the board is PettingZoo's: row 0 at the top, row 5 at the bottom (pieces land on the largest
  empty row), ``board[r, c]`` is 0 (empty), 1 (agent 0) or 2 (agent 1);
* a win gives the mover +1 and the other agent -1; a full board without a win is a draw (0, 0);
  rewards are 0 before the end (reward float32[2], zero-sum);
* observation: ``{"observation": int32[2, 6, 7, 2], "action_mask": uint8[2, 7]}``; agent ``p``'s
  planes are PettingZoo's ``observe(agent)``: ``[..., 0]`` its own pieces, ``[..., 1]`` the
  opponent's. The mask row of the agent to move holds the columns that are not full, the other
  row is all zero; in a terminal state both rows are zero.

An illegal move (a full column, or an action outside ``[0, 6]``) ends the game: the mover gets -1
and the other agent +1 (PettingZoo's ``TerminateIllegalWrapper`` gives the other agent 0; here the
game stays zero-sum, as jaxenvs' turn-based contract says). ``info["illegal_action"]`` (bool) says
whether the step's move was illegal; ``jaxenvs.checked`` raises on one. Stepping a terminal state
(no auto-reset) counts as an illegal move. The step draws no randomness.

The rules (where a piece lands, the open columns, the win test) are the pure game core in
`jaxenvs.games.connect_four`, which the players and the look-ahead there use too. The win test
looks at the mover's pieces only (only they can have made a new line) through shifted slices of
the board: elementwise operations that fuse, no gather.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import spaces, struct
from jaxenvs.core import Environment, Traits
from jaxenvs.games import connect_four as solver
from jaxenvs.games.connect_four import COLS, ROWS, add_piece, drop_cell, four_in_a_row, heights_of, open_columns
from jaxenvs.rendering import draw

CELL_PX = 32  # rendering: pixels per cell
PIECE_COLORS = np.array([draw.WHITE, draw.RED, draw.BLACK], dtype=np.uint8)  # empty, agent 0, agent 1
BOARD_COLOR = (30, 80, 200)
PIECES = ".XO"  # render_text: empty, agent 0, agent 1


@struct.dataclass
class EnvParams:
    """Nothing to tune: the rules are fixed."""


@struct.dataclass
class EnvState:
    board: jax.Array  # int32[6, 7]: 0 empty, 1 agent 0, 2 agent 1 (row 0 at the top)
    heights: jax.Array  # int32[7]: pieces in each column
    current_player: jax.Array  # int32[]: the agent to move (after the end: the one that would move)
    terminated: jax.Array  # bool[]: the game is over (win, draw or illegal move)


class ConnectFour(Environment):
    """Two agents drop pieces into a 6 x 7 board, four in a row wins (PettingZoo's ``connect_four_v3``)."""

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
    ACTION_NAMES = tuple(f"drop a piece in column {c}" for c in range(COLS))
    MOVE_KEY = "moves: the column numbers under the board"
    MAX_PLIES = ROWS * COLS  # the longest game: every cell filled (look-ahead and search stop there)
    # named opponents (jaxenvs.games.opponents; 'random' is every game's)
    OPPONENTS = {
        "heuristic": (solver.heuristic, "win, else block, else avoid giving the opponent a win, prefer the centre"),
        "no-blunder": (solver.no_blunder, "win, else block, else random among the moves that give the opponent no win"),
        "win-block": (solver.win_block, "win, else block, else random legal"),
        "heuristic-left": (solver.heuristic_left,
                           "the heuristic's moves, the first in the column order 3 2 4 1 5 0 6 (deterministic)"),
        "heuristic-right": (solver.heuristic_right,
                            "the heuristic's moves, the first in the column order 3 4 2 5 1 6 0 (deterministic)"),
        "heuristic-soft": (solver.heuristic_soft, "the heuristic's moves, drawn with centre weights 1 2 3 4 3 2 1"),
        "heuristic-noisy": (solver.heuristic_noisy, "the heuristic, with a random legal move instead 20% of the time"),
    }

    # exact look-ahead at play time (jaxenvs.games.search.lookahead_policy): the same values as the generic
    # search over step_env, on bool planes (about 40x faster at depth 4)
    LOOKAHEAD = staticmethod(solver.lookahead_values)
    LOOKAHEAD_BYTES = 16  # per line of play of LOOKAHEAD (measured 4-8: jaxenvs.games.search.check_budget)

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def reset_env(self, key, params):
        state = EnvState(
            board=jnp.zeros((ROWS, COLS), jnp.int32),
            heights=jnp.zeros((COLS,), jnp.int32),
            current_player=jnp.zeros((), jnp.int32),
            terminated=jnp.zeros((), bool),
        )
        return self._obs(state), state

    def step_env(self, key, state, action, params):
        player = state.current_player
        column = action[player]
        height = state.heights[jnp.clip(column, 0, COLS - 1)]
        legal = (column >= 0) & (column < COLS) & open_columns(height) & ~state.terminated
        board = jnp.where(drop_cell(height, column, legal), player + 1, state.board)
        heights = add_piece(state.heights, column, legal)
        won = legal & four_in_a_row(board == player + 1)
        full = jnp.min(heights) == ROWS  # an int reduction: XLA:CPU runs a small bool one slowly (see four_in_a_row)
        mover_reward = jnp.where(legal, jnp.where(won, 1.0, 0.0), -1.0).astype(jnp.float32)
        state = EnvState(board=board, heights=heights, current_player=1 - player, terminated=~legal | won | full)
        reward = jnp.where(jnp.arange(2) == player, mover_reward, 0.0 - mover_reward)  # 0 - r: no -0.0
        info = {"illegal_action": ~legal}
        return self._obs(state), state, reward, state.terminated, jnp.zeros((), bool), info

    def legal_action_mask(self, state, params=None):
        """bool[2, 7]: the columns that are not full in the mover's row, all false in the other row
        and in a terminal state."""
        moves = (jnp.arange(2) == state.current_player) & ~state.terminated
        return moves[:, None] & open_columns(state.heights)[None, :]

    def current_player(self, state, params=None):
        return state.current_player

    def state_from_observation(self, obs, params=None):
        """The `EnvState` one agent's observation dict shows (a perfect-information game: the board
        is the whole state), as tree search (`jaxenvs.games.search`) starts from it: the observer is
        the mover (the first player when both have as many pieces); ``terminated`` when the mask
        has no legal move."""
        planes = jnp.asarray(obs["observation"]).astype(jnp.int32)  # [6, 7, 2]
        mover = jnp.where(jnp.sum(planes[..., 0]) == jnp.sum(planes[..., 1]), 0, 1).astype(jnp.int32)
        board = jnp.where(planes[..., 0] != 0, mover + 1, jnp.where(planes[..., 1] != 0, 2 - mover, 0))
        return EnvState(board=board.astype(jnp.int32), heights=heights_of(board != 0),
                        current_player=mover, terminated=~jnp.any(jnp.asarray(obs["action_mask"]) != 0))

    def _obs(self, state):
        own = jnp.stack([state.board == 1, state.board == 2])  # [agent, row, col]
        planes = jnp.stack([own, own[::-1]], axis=-1).astype(jnp.int32)
        return {"observation": planes, "action_mask": self.legal_action_mask(state).astype(jnp.uint8)}

    def observation_space(self, params=None):
        return spaces.Dict(
            {
                "observation": spaces.Box(0, 1, (ROWS, COLS, 2), jnp.int32),
                "action_mask": spaces.Box(0, 1, (COLS,), jnp.uint8),
            }
        )

    def action_space(self, params=None):
        return spaces.Discrete(COLS)

    def render(self, state, params=None):
        """uint8[192, 224, 3]: PettingZoo's layout (row 0 at the top), 32 px per cell, a blue board
        with white holes, agent 0's pieces red, agent 1's black."""
        height, width = ROWS * CELL_PX, COLS * CELL_PX
        ys, xs = draw.pixel_grid(height, width)
        row, col = (ys // CELL_PX).astype(jnp.int32), (xs // CELL_PX).astype(jnp.int32)
        dx, dy = xs - (col + 0.5) * CELL_PX, ys - (row + 0.5) * CELL_PX
        hole = dx**2 + dy**2 <= (0.4 * CELL_PX) ** 2
        piece = jnp.asarray(PIECE_COLORS)[jnp.clip(state.board, 0, 2)[row, col]]
        return jnp.where(hole[..., None], piece, jnp.asarray(BOARD_COLOR, jnp.uint8)).astype(jnp.uint8)

    def move_at(self, x, y):
        """The move a click at pixel column ``x``, row ``y`` of `render`'s frame selects: the column
        under it, -1 off the board (numpy, elementwise over arrays; a window's clicks use it)."""
        x, y = np.asarray(x), np.asarray(y)
        inside = (x >= 0) & (x < COLS * CELL_PX) & (y >= 0) & (y < ROWS * CELL_PX)
        return np.where(inside, x // CELL_PX, -1)

    def render_text(self, state, params=None):
        """The board (row 0 at the top, ``X`` agent 0, ``O`` agent 1), the column numbers and a
        status line: who is to move, or after the end ``game over:`` and the result."""
        board = np.asarray(state.board)
        rows = [" ".join(PIECES[v] for v in row) for row in board]
        player = int(state.current_player)
        if not bool(state.terminated):
            status = f"agent {player} ({PIECES[player + 1]}) to move"
        else:
            mover, other = 1 - player, player  # the agent whose move ended the game
            if bool(four_in_a_row(jnp.asarray(board == mover + 1))):
                status = f"game over: agent {mover} ({PIECES[mover + 1]}) wins"
            elif bool(np.all(np.asarray(state.heights) == ROWS)):
                status = "game over: draw"
            else:
                status = (f"game over: agent {mover} ({PIECES[mover + 1]}) made an illegal move: "
                          f"agent {other} ({PIECES[other + 1]}) wins")
        return "\n".join(rows + [" ".join(str(c) for c in range(COLS)), status])
