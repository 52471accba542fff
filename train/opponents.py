"""Fixed opponents for turn-based games: jittable, vmappable `policy(key, obs) -> action`.

A policy acts on ONE agent's observation as a `full_action_set` environment gives it:
`obs = {"observation": ..., "action_mask": uint8[n]}` (no agent or batch axis; `jax.vmap` it for
a batch). It returns an int32 scalar action, legal whenever the mask has a legal action, and 0
when the mask is all zero (the agent is not to move; a sequential environment ignores the action
of a non-mover). The observation layouts are those of `TicTacToe-v0` (PettingZoo's
`classic.tictactoe_v3`: int `[3, 3, 2]`, plane 0 the observer's marks, plane 1 the opponent's,
action `i` = cell `observation[i // 3, i % 3]`) and `ConnectFour-v0` (PettingZoo's
`classic.connect_four_v3`: int `[6, 7, 2]`, same planes, row 0 at the top, a piece dropped in a
column lands in its lowest empty row, action = column).

* `random_legal`: uniform among the legal actions; any masked game.
* `tictactoe_perfect`: uniform among the minimax-optimal moves (values from
  `train.game_values`, which solves every reachable position once, on first use, into a
  `[3**9, 9]` lookup table embedded in the compiled program); it never loses.
* `connect_four_heuristic`: a winning move if there is one, else one that blocks the opponent's
  immediate win, else random legal (uniform among the candidates at each stage).

`OPPONENTS` names them for command lines; `get_opponent(name)` looks one up.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from . import game_values
from .masking import MaskedCategorical

__all__ = [
    "Policy", "random_legal", "uniform_among", "tictactoe_code", "tictactoe_perfect_moves",
    "tictactoe_perfect", "connect_four_lines", "connect_four_landing_cells",
    "connect_four_winning_moves", "connect_four_heuristic", "OPPONENTS", "get_opponent",
]

Policy = Callable[[jax.Array, dict], jax.Array]
"""`policy(key, obs) -> action`: typed PRNG key, one agent's observation dict, int32 scalar."""


def _mask_of(obs, n: int | None = None, who: str = "policy") -> jax.Array:
    """bool `[n]` from `obs["action_mask"]`, with a trace-time check of its structure."""
    if not isinstance(obs, dict) or "action_mask" not in obs:
        raise TypeError(
            f"{who} takes one agent's observation dict {{'observation': ..., 'action_mask': uint8[n]}}, "
            f"got {type(obs).__name__}" + (f" with keys {sorted(obs)}" if isinstance(obs, dict) else "")
        )
    mask = jnp.asarray(obs["action_mask"])
    if mask.ndim != 1 or (n is not None and mask.shape != (n,)):
        want = f"[{n}]" if n is not None else "[n]"
        raise ValueError(
            f"{who}: obs['action_mask'] must have shape {want} (one agent, no batch axis; jax.vmap the "
            f"policy for a batch), got {mask.shape}"
        )
    return mask != 0


def _observation_of(obs, shape: tuple[int, ...], who: str) -> jax.Array:
    x = jnp.asarray(obs["observation"])
    if x.shape != shape:
        raise ValueError(
            f"{who}: obs['observation'] must have shape {list(shape)} (one agent, no batch axis; jax.vmap "
            f"the policy for a batch), got {list(x.shape)}"
        )
    return x


def uniform_among(key, allowed) -> jax.Array:
    """int32 scalar (or `[...]` for `allowed` bool `[..., n]`): uniform among the True entries,
    0 where none is True."""
    allowed = jnp.asarray(allowed, bool)
    return MaskedCategorical(jnp.zeros(allowed.shape, jnp.float32), allowed).sample(key)


def random_legal(key, obs) -> jax.Array:
    """int32 scalar: uniform among the legal actions of `obs["action_mask"]` (uint8/bool `[n]`);
    0 when none is legal. Works for any masked game."""
    return uniform_among(key, _mask_of(obs, who="random_legal"))


# ---- Tic-Tac-Toe ------------------------------------------------------------------------------

_POW3 = 3 ** np.arange(9)


def tictactoe_code(observation) -> jax.Array:
    """int32 `[...]`: the mover-relative board code (see `train.game_values`) of Tic-Tac-Toe
    observations int/float `[..., 3, 3, 2]`."""
    planes = jnp.asarray(observation).reshape(*jnp.shape(observation)[:-3], 9, 2).astype(jnp.int32)
    return jnp.sum((planes[..., 0] + 2 * planes[..., 1]) * jnp.asarray(_POW3, jnp.int32), axis=-1)


@functools.lru_cache(maxsize=None)
def _optimal_moves_table() -> np.ndarray:
    return game_values.optimal_moves()


def tictactoe_perfect_moves(obs) -> jax.Array:
    """bool `[9]`: the minimax-optimal legal moves of one Tic-Tac-Toe observation dict; the
    legal moves when the board is not a reachable decision position (all False for a non-mover)."""
    mask = _mask_of(obs, 9, "tictactoe_perfect")
    code = tictactoe_code(_observation_of(obs, (3, 3, 2), "tictactoe_perfect"))
    best = jnp.asarray(_optimal_moves_table())[code] & mask
    return jnp.where(jnp.any(best), best, mask)


def tictactoe_perfect(key, obs) -> jax.Array:
    """int32 scalar: a perfect Tic-Tac-Toe move, uniform among the minimax-optimal legal moves of
    `obs` (`{"observation": [3, 3, 2], "action_mask": uint8[9]}`); 0 for a non-mover."""
    return uniform_among(key, tictactoe_perfect_moves(obs))


# ---- Connect Four -----------------------------------------------------------------------------

ROWS, COLS = 6, 7


@functools.lru_cache(maxsize=None)
def connect_four_lines() -> np.ndarray:
    """int32 `[69, 4]`: flat cells (`row * 7 + col`, row 0 at the top) of every line of four:
    24 horizontal, 21 vertical, 24 diagonal."""
    lines = []
    for r in range(ROWS):
        for c in range(COLS):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                cells = [(r + k * dr, c + k * dc) for k in range(4)]
                if all(0 <= rr < ROWS and 0 <= cc < COLS for rr, cc in cells):
                    lines.append([rr * COLS + cc for rr, cc in cells])
    out = np.array(lines, np.int32)
    out.flags.writeable = False
    return out


def connect_four_landing_cells(observation) -> jax.Array:
    """int32 `[7]`: the flat cell (`row * 7 + col`) a piece dropped in each column lands on, for
    one observation `[6, 7, 2]`; -1 for a full column."""
    filled = jnp.any(jnp.asarray(observation) != 0, axis=-1)  # [6, 7]
    row = jnp.sum(~filled, axis=0) - 1  # pieces stack from row 5 up
    return jnp.where(row >= 0, row * COLS + jnp.arange(COLS), -1).astype(jnp.int32)


def connect_four_winning_moves(plane, landing) -> jax.Array:
    """bool `[7]`: the columns where a piece of the player whose pieces are `plane` (bool/int
    `[6, 7]`) completes a line of four through its landing cell (`landing`, int32 `[7]`, -1 =
    full column: never winning)."""
    lines = jnp.asarray(connect_four_lines())  # [69, 4]
    cells = jnp.arange(ROWS * COLS)
    placed = (jnp.asarray(plane).reshape(-1) != 0)[None, :] | (cells[None, :] == landing[:, None])  # [7, 42]
    complete = jnp.all(placed[:, lines], axis=-1)  # [7, 69]
    through = jnp.any(lines[None, :, :] == landing[:, None, None], axis=-1)  # [7, 69]
    return jnp.any(complete & through, axis=-1) & (landing >= 0)


def connect_four_heuristic(key, obs) -> jax.Array:
    """int32 scalar: for one Connect Four observation dict (`{"observation": [6, 7, 2],
    "action_mask": uint8[7]}`), uniform among the legal columns that win at once; if none, among
    those that block the opponent's immediate win; if none, among all legal columns; 0 for a
    non-mover."""
    mask = _mask_of(obs, COLS, "connect_four_heuristic")
    board = _observation_of(obs, (ROWS, COLS, 2), "connect_four_heuristic")
    landing = connect_four_landing_cells(board)
    win = connect_four_winning_moves(board[..., 0], landing) & mask
    block = connect_four_winning_moves(board[..., 1], landing) & mask
    choice = jnp.where(jnp.any(win), win, jnp.where(jnp.any(block), block, mask))
    return uniform_among(key, choice)


OPPONENTS: dict[str, Policy] = {
    "random": random_legal,
    "tictactoe-perfect": tictactoe_perfect,
    "connect-four-heuristic": connect_four_heuristic,
}
"""Named opponents (`random` fits any masked game; the others one game each)."""


def get_opponent(name: str) -> Policy:
    """The opponent called `name` in `OPPONENTS`; a ValueError listing the names otherwise."""
    try:
        return OPPONENTS[name]
    except KeyError:
        raise ValueError(f"unknown opponent {name!r}; choose one of {sorted(OPPONENTS)}") from None
