"""Connect Four players (jittable, vmappable ``policy(key, obs) -> action`` on ONE agent's
observation dict of `ConnectFour-v0`: ``{"observation": int[6, 7, 2], "action_mask": uint8[7]}``,
plane 0 the observer's pieces, plane 1 the opponent's, row 0 at the top, action = column).

* `heuristic` (the opponent ``heuristic``): a move that wins at once if there is one; else one
  that blocks the opponent's immediate win; else, among the remaining legal moves, those that do
  not let the opponent win on its next move (no piece dropped right under an opponent's winning
  cell); among the candidates it prefers the column nearest the centre (ties drawn uniformly). A
  one-ply-lookahead player of the kind Connect Four tutorials use as a baseline: it beats random
  play almost always and punishes every one-move blunder.
* `no_blunder` (the opponent ``no-blunder``): `heuristic` without the centre preference: a win,
  else a block, else uniform among the moves that give the opponent no immediate win.
* `win_block` (the opponent ``win-block``): a winning move, else a block, else uniform among the
  legal moves (no look-ahead, no centre preference): weaker.
* Variants of `heuristic` that choose differently among the same candidates (a policy trained
  against one line of play must beat these too): `heuristic_left` / `heuristic_right`
  (``heuristic-left`` / ``heuristic-right``: deterministic, the centre first, then its left /
  right neighbour, ...: centre orders 3 2 4 1 5 0 6 / 3 4 2 5 1 6 0), and `heuristic_soft`
  (``heuristic-soft``: a candidate drawn with probability proportional to 4 - its distance from
  the centre, so the centre 4 : 3 : 2 : 1 against the edges).
* `heuristic_noisy` (``heuristic-noisy``): `heuristic` with a uniformly random legal move instead
  in 20% of its moves (`NOISE`): a training opponent that leads to positions the heuristic
  itself never reaches.

`ConnectFour` declares them all (`jaxenvs.games.opponents`).

The rules themselves (`drop`, `drop_cell`, `add_piece`, `open_columns`, `heights_of`, and the win
tests `four_in_a_row` after a move and `completing_cells` / `wins_at_once` before one) are the one
pure core that `ConnectFour`'s step and these players share, as Pgx's games serve its envs.

`lookahead_values(obs, depth)` is the exact look-ahead of `jaxenvs.games.search.lookahead_values`
for Connect Four, on bool planes and shifted slices (no gather, no game state): the same values
(the tests compare them on random positions) at a fraction of the cost; `ConnectFour` declares it
as its ``LOOKAHEAD``, which `jaxenvs.games.search.lookahead_policy` uses.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .opponents import mask_of, observation_of, uniform_among
from .search import check_depth

__all__ = [
    "heuristic", "heuristic_left", "heuristic_right", "heuristic_soft", "heuristic_noisy", "no_blunder", "win_block",
    "candidates", "lines", "landing_cells", "winning_moves", "lookahead_values", "ROWS", "COLS", "NOISE",
    "heights_of", "open_columns", "drop_cell", "add_piece", "drop", "four_in_a_row", "completing_cells", "wins_at_once",
]

# ---- the rules: the one pure game core of the env (`jaxenvs.envs.connect_four.ConnectFour`) and of
# the players and the look-ahead below. A board is bool planes [6, 7] (row 0 at the top) and the
# pieces per column (int32 [7]); a piece lands on the largest empty row of its column.

ROWS, COLS = 6, 7


def heights_of(filled) -> jax.Array:
    """int32 `[7]`: the pieces in each column of the bool `[6, 7]` board ``filled`` (the cells taken)."""
    return jnp.sum(filled, axis=0).astype(jnp.int32)


def open_columns(heights) -> jax.Array:
    """bool `[7]`: the columns a piece can still be dropped in (the legal moves of a game not over)."""
    return heights < ROWS


def drop_cell(height, column, placed=None) -> jax.Array:
    """bool `[6, 7]`: the cell a piece dropped in ``column`` (int32 scalar) lands on, for ``height``
    pieces in that column (all false where ``placed``, a bool scalar, is false)."""
    cell = jnp.arange(ROWS)[:, None] == ROWS - 1 - height
    if placed is not None:
        cell = placed & cell
    return cell & (jnp.arange(COLS)[None, :] == column)


def add_piece(heights, column, placed=None) -> jax.Array:
    """The pieces per column after a piece is dropped in ``column`` (only where ``placed``, a bool
    scalar, is true)."""
    hit = jnp.arange(COLS) == column
    if placed is not None:
        hit = placed & hit
    return heights + hit.astype(heights.dtype)


def drop(mine, heights, column):
    """``(mine, heights)`` after the owner of the bool `[6, 7]` plane ``mine`` drops a piece in the
    open ``column``."""
    return mine | drop_cell(heights[column], column), add_piece(heights, column)


def four_in_a_row(mine: jax.Array) -> jax.Array:
    """bool[]: whether the bool[6, 7] board ``mine`` holds four in a row in any direction (the
    env's win test, after a move).

    The windows of the four directions are joined and reduced once, as uint8 (a max): XLA:CPU runs
    each ``jnp.any`` of a small bool array as a reduction of its own, and a batched step spent about
    half of its time in four of them. With one uint8 max over the 69 windows (the same values) its
    random-play steps/s against Pgx's went from 1.39x to 1.93x at 1,024 envs
    (``benchmarks/steps_per_sec.py``, docs/guides/performance.md)."""
    horizontal = mine[:, :-3] & mine[:, 1:-2] & mine[:, 2:-1] & mine[:, 3:]
    vertical = mine[:-3] & mine[1:-2] & mine[2:-1] & mine[3:]
    diagonal = mine[:-3, :-3] & mine[1:-2, 1:-2] & mine[2:-1, 2:-1] & mine[3:, 3:]
    anti_diagonal = mine[3:, :-3] & mine[2:-1, 1:-2] & mine[1:-2, 2:-1] & mine[:-3, 3:]
    windows = jnp.concatenate([w.ravel() for w in (horizontal, vertical, diagonal, anti_diagonal)])
    return jnp.max(windows.astype(jnp.uint8)) > 0


def completing_cells(mine) -> jax.Array:
    """bool `[6, 7]`: the cells where one more piece of ``mine`` (bool `[6, 7]`) would complete a
    line of four (whether or not the cell is free; the look-ahead's win test, before a move): for
    every direction and every place of the cell in its line, the AND of the other three cells, as
    shifted slices of the board padded by 3."""
    pad = jnp.pad(mine, 3)
    out = jnp.zeros((ROWS, COLS), bool)
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for k in range(4):  # the cell is the k-th of its line
            line = jnp.ones((ROWS, COLS), bool)
            for j in range(4):
                if j != k:
                    r0, c0 = 3 + (j - k) * dr, 3 + (j - k) * dc
                    line = line & pad[r0:r0 + ROWS, c0:c0 + COLS]
            out = out | line
    return out


def wins_at_once(mine, heights) -> jax.Array:
    """bool `[7]`: the open columns where a piece of ``mine`` completes a line of four."""
    row = jnp.clip(ROWS - 1 - heights, 0, ROWS - 1)
    return open_columns(heights) & completing_cells(mine)[row, jnp.arange(COLS)]


# ---- players ------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def lines() -> np.ndarray:
    """int32 `[69, 4]`: flat cells (`row * 7 + col`, row 0 at the top) of every line of four:
    24 horizontal, 21 vertical, 24 diagonal."""
    out = []
    for r in range(ROWS):
        for c in range(COLS):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                cells = [(r + k * dr, c + k * dc) for k in range(4)]
                if all(0 <= rr < ROWS and 0 <= cc < COLS for rr, cc in cells):
                    out.append([rr * COLS + cc for rr, cc in cells])
    arr = np.array(out, np.int32)
    arr.flags.writeable = False
    return arr


def landing_cells(observation) -> jax.Array:
    """int32 `[7]`: the flat cell (`row * 7 + col`) a piece dropped in each column lands on, for
    one observation `[6, 7, 2]`; -1 for a full column."""
    filled = jnp.any(jnp.asarray(observation) != 0, axis=-1)  # [6, 7]
    row = jnp.sum(~filled, axis=0) - 1  # pieces stack from row 5 up
    return jnp.where(row >= 0, row * COLS + jnp.arange(COLS), -1).astype(jnp.int32)


def winning_moves(plane, landing) -> jax.Array:
    """bool `[7]`: the columns where a piece of the player whose pieces are `plane` (bool/int
    `[6, 7]`) completes a line of four through its landing cell (`landing`, int32 `[7]`, -1 =
    full column: never winning)."""
    all_lines = jnp.asarray(lines())  # [69, 4]
    cells = jnp.arange(ROWS * COLS)
    placed = (jnp.asarray(plane).reshape(-1) != 0)[None, :] | (cells[None, :] == landing[:, None])  # [7, 42]
    complete = jnp.all(placed[:, all_lines], axis=-1)  # [7, 69]
    through = jnp.any(all_lines[None, :, :] == landing[:, None, None], axis=-1)  # [7, 69]
    return jnp.any(complete & through, axis=-1) & (landing >= 0)


def _board(obs, who):
    mask = mask_of(obs, COLS, who)
    board = observation_of(obs, (ROWS, COLS, 2), who)
    return mask, board, landing_cells(board)


def win_block(key, obs) -> jax.Array:
    """int32 scalar: uniform among the legal columns that win at once; if none, among those that
    block the opponent's immediate win; if none, among all legal columns."""
    mask, board, landing = _board(obs, "connect_four.win_block")
    win = winning_moves(board[..., 0], landing) & mask
    block = winning_moves(board[..., 1], landing) & mask
    return uniform_among(key, jnp.where(jnp.any(win), win, jnp.where(jnp.any(block), block, mask)))


def _safe_moves(board, landing, mask) -> jax.Array:
    """bool `[7]`: the legal columns after which the opponent has no immediate win (the cell
    above the landing cell is not a winning cell of the opponent)."""
    above = jnp.where(landing >= COLS, landing - COLS, -1)  # the cell right above (-1: top row)
    theirs = board[..., 1]
    # the opponent's winning cells: a piece of theirs on that cell completes a line
    opp_wins_above = winning_moves(theirs, above)  # [7], per column: the cell above our piece
    return mask & ~opp_wins_above


_CENTRE_ORDER = -np.abs(np.arange(COLS) - (COLS - 1) / 2)  # higher is nearer the centre
NOISE = 0.2  # heuristic_noisy: the share of its moves that are uniformly random legal moves


def candidates(obs, who: str = "connect_four.candidates") -> jax.Array:
    """bool `[7]`: the columns the heuristic players choose among on one observation: those that
    win at once; if none, those that block the opponent's immediate win; if none, the legal
    columns that give the opponent no immediate win; if none, every legal column."""
    mask, board, landing = _board(obs, who)
    win = winning_moves(board[..., 0], landing) & mask
    block = winning_moves(board[..., 1], landing) & mask
    safe = _safe_moves(board, landing, mask)
    rest = jnp.where(jnp.any(safe), safe, mask)
    return jnp.where(jnp.any(win), win, jnp.where(jnp.any(block), block, rest))


def heuristic(key, obs) -> jax.Array:
    """int32 scalar: win at once, else block the opponent's immediate win, else a legal column
    that gives the opponent no immediate win (all legal columns when none does); among the
    candidates the one nearest the centre (ties uniform)."""
    choice = candidates(obs, "connect_four.heuristic")
    centre = jnp.asarray(_CENTRE_ORDER, jnp.float32)
    best = jnp.max(jnp.where(choice, centre, -jnp.inf))
    return uniform_among(key, choice & (centre == best))


def _first_in_order(choice, order) -> jax.Array:
    rank = np.empty(COLS, np.float32)
    rank[list(order)] = -np.arange(COLS, dtype=np.float32)  # higher is earlier in ``order``
    return jnp.argmax(jnp.where(choice, jnp.asarray(rank), -jnp.inf)).astype(jnp.int32)


def heuristic_left(key, obs) -> jax.Array:
    """int32 scalar: `heuristic`'s candidates, the first of them in the order 3 2 4 1 5 0 6 (the
    centre, then the nearer columns left before right): deterministic."""
    del key
    return _first_in_order(candidates(obs, "connect_four.heuristic_left"), (3, 2, 4, 1, 5, 0, 6))


def heuristic_right(key, obs) -> jax.Array:
    """int32 scalar: `heuristic`'s candidates, the first of them in the order 3 4 2 5 1 6 0 (right
    before left): deterministic."""
    del key
    return _first_in_order(candidates(obs, "connect_four.heuristic_right"), (3, 4, 2, 5, 1, 6, 0))


_SOFT_WEIGHTS = 4.0 - np.abs(np.arange(COLS) - (COLS - 1) // 2)  # 1 2 3 4 3 2 1


def heuristic_soft(key, obs) -> jax.Array:
    """int32 scalar: `heuristic`'s candidates, one drawn with probability proportional to 4 minus
    its distance from the centre column (weights 1 2 3 4 3 2 1)."""
    choice = candidates(obs, "connect_four.heuristic_soft")
    logits = jnp.where(choice, jnp.log(jnp.asarray(_SOFT_WEIGHTS, jnp.float32)), -jnp.inf)
    draw = jax.random.categorical(key, logits).astype(jnp.int32)
    return jnp.where(jnp.any(choice), draw, 0).astype(jnp.int32)


def heuristic_noisy(key, obs) -> jax.Array:
    """int32 scalar: `heuristic`'s move, or with probability `NOISE` a uniformly random legal one."""
    k_coin, k_rand, k_heur = jax.random.split(key, 3)
    mask = mask_of(obs, COLS, "connect_four.heuristic_noisy")
    return jnp.where(jax.random.uniform(k_coin) < NOISE, uniform_among(k_rand, mask), heuristic(k_heur, obs))


def no_blunder(key, obs) -> jax.Array:
    """int32 scalar: win at once, else block the opponent's immediate win, else uniform among the
    legal columns that give the opponent no immediate win (all legal columns when none does)."""
    return uniform_among(key, candidates(obs, "connect_four.no_blunder"))


def _children(mine, theirs, heights, plies: int) -> jax.Array:
    """float32 `[7]`: each column's value for the mover over ``plies`` plies (any value for an
    illegal column: the caller masks it)."""
    win = wins_at_once(mine, heights)
    if plies == 1:
        return win.astype(jnp.float32)

    def after(col):
        mine2, heights2 = drop(mine, heights, col)
        below = -jnp.max(jnp.where(heights2 < ROWS, _children(theirs, mine2, heights2, plies - 1), -jnp.inf))
        return jnp.where(jnp.all(heights2 >= ROWS), 0.0, below)  # a full board is a draw

    return jnp.where(win, 1.0, jax.vmap(after)(jnp.arange(COLS)))


def lookahead_values(obs, depth: int) -> jax.Array:
    """float32 `[7]`: `jaxenvs.games.search.lookahead_values` for the mover of one observation
    ``obs`` (plane 0 the mover's pieces): each column's exact value over ``depth`` plies (+1 a
    forced win, -1 a forced loss, 0 neither within the horizon), ``-inf`` for the columns the
    observation's action mask does not allow."""
    check_depth(depth)
    mask = mask_of(obs, COLS, "connect_four.lookahead_values")
    board = observation_of(obs, (ROWS, COLS, 2), "connect_four.lookahead_values") != 0
    mine, theirs = board[..., 0], board[..., 1]
    heights = heights_of(mine | theirs)
    return jnp.where(mask, _children(mine, theirs, heights, depth), -jnp.inf)
