"""Tic-Tac-Toe solved exactly: every reachable position's move values, the perfect player
`perfect` (jittable), and the exact outcome probabilities of a game between two policies given as
probability tables (host-side numpy).

**Board code.** A position is seen from the player to move (the *mover*), as the observation of
`TicTacToe-v0` / PettingZoo's `classic.tictactoe_v3` shows it: `obs["observation"]` is
`[3, 3, 2]` with plane 0 the observer's marks and plane 1 the opponent's, and cell `i` (PettingZoo's
action `i`) is `observation[i // 3, i % 3]` (PettingZoo builds the planes from
`board.squares.reshape(3, 3)`). The code is `sum_i 3**i * d_i` with `d_i` 0 empty, 1 the mover's
mark, 2 the opponent's: an int in `[0, 3**9)`. Tic-Tac-Toe's rules treat both players alike, so a
mover-relative code carries everything (who moves first follows from the mark counts: the first
player moves when both have as many marks).

**Policy tables.** A policy is a float `[3**9, 9]` table: row `code` holds the probabilities of the
mover's 9 actions in that position (only reachable decision positions are read). `random_table()`
is uniform over empty cells; `minimax_table()` is uniform over the value-optimal empty cells (pure
minimax values win/draw/loss, no preference for faster wins). `outcome_probabilities(first,
second)` enumerates the game tree and returns the exact probabilities
`(first mover wins, second mover wins, draw)`: random vs random is `(0.5849, 0.2881, 0.1270)`,
minimax (first) vs random `(0.9678, 0, 0.0322)`, minimax vs minimax `(0, 0, 1)`.

The solve takes about 0.2 s and is cached (done on first use, never at import).

`perfect(key, obs)` plays uniformly among the minimax-optimal legal moves of one agent's
observation dict (`TicTacToe-v0`'s): it never loses. `TicTacToe` declares it as its opponent
``perfect`` (`jaxenvs.games.opponents`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .opponents import mask_of, observation_of, uniform_among

__all__ = [
    "perfect", "perfect_moves", "code_of", "NUM_CODES", "LINES", "board_code", "decision_positions", "move_values", "optimal_moves",
    "random_table", "minimax_table", "outcome_probabilities",
]

NUM_CODES = 3**9
LINES = np.array([(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)])
"""int `[8, 3]`: the cells of every winning line (PettingZoo's `winning_combinations`)."""
_POW3 = 3 ** np.arange(9)


def board_code(observation) -> np.ndarray:
    """int64 `[...]`: the mover-relative code of observations `[..., 3, 3, 2]` (numpy; the same
    formula as `code_of`, which is its jittable twin)."""
    planes = np.asarray(observation).reshape(*np.shape(observation)[:-3], 9, 2).astype(np.int64)
    return np.sum((planes[..., 0] + 2 * planes[..., 1]) * _POW3, axis=-1)


_LINE_TUPLES = tuple(tuple(int(c) for c in line) for line in LINES)


def _digits(code: int) -> list[int]:
    return [(code // 3**i) % 3 for i in range(9)]


def _swap_after_move(digits: list[int], cell: int) -> int:
    """Code of the position after the mover marks `cell`, seen from the next mover."""
    swap = (0, 2, 1)
    return sum(3**i * (2 if i == cell else swap[d]) for i, d in enumerate(digits))


def _has_line(digits: list[int], mark: int) -> bool:
    return any(digits[i] == digits[j] == digits[k] == mark for i, j, k in _LINE_TUPLES)


@functools.lru_cache(maxsize=None)
def _solve() -> tuple[dict, dict, dict]:
    """`(values, q, children)`: the mover's minimax value of every reachable code, the action
    values (float[9], -inf on filled cells) and child codes (int[9], -1 on filled cells) of every
    reachable decision code."""
    values: dict[int, int] = {}
    q: dict[int, np.ndarray] = {}
    children: dict[int, np.ndarray] = {}

    def solve(code: int) -> int:
        if code in values:
            return values[code]
        d = _digits(code)
        if _has_line(d, 2):  # the opponent's last move made a line
            v = -1
        elif 0 not in d:
            v = 0
        else:
            qa, kids = np.full(9, -np.inf), np.full(9, -1, np.int64)
            for cell in (i for i in range(9) if d[i] == 0):
                kids[cell] = _swap_after_move(d, cell)
                qa[cell] = -solve(int(kids[cell]))
            q[code], children[code] = qa, kids
            v = int(qa.max())
        values[code] = v
        return v

    solve(0)
    return values, q, children


def decision_positions() -> np.ndarray:
    """int64 `[4520]`: the codes of every reachable position where a player must move (sorted)."""
    return np.array(sorted(_solve()[1]), dtype=np.int64)


@functools.lru_cache(maxsize=None)
def _move_values() -> np.ndarray:
    table = np.full((NUM_CODES, 9), -np.inf, np.float32)
    for code, qa in _solve()[1].items():
        table[code] = qa
    table.flags.writeable = False
    return table


def move_values() -> np.ndarray:
    """float32 `[3**9, 9]`: the minimax value for the mover of each move (+1 forced win, 0 draw,
    -1 forced loss) in every reachable decision position; `-inf` on filled cells and in rows of
    unreachable or terminal positions. (A read-only array, computed once.)"""
    return _move_values()


def optimal_moves() -> np.ndarray:
    """bool `[3**9, 9]`: the value-optimal moves of every reachable decision position (all False
    in other rows)."""
    q = move_values()
    best = q.max(axis=-1, keepdims=True)
    return np.isfinite(q) & (q == best)


def _uniform_over(allowed: np.ndarray) -> np.ndarray:
    counts = allowed.sum(axis=-1, keepdims=True)
    return np.where(allowed, 1.0 / np.maximum(counts, 1), 0.0)


def random_table() -> np.ndarray:
    """float64 `[3**9, 9]`: uniform over the empty cells (the random-legal player)."""
    return _uniform_over(np.isfinite(move_values()))


def minimax_table() -> np.ndarray:
    """float64 `[3**9, 9]`: uniform over the value-optimal moves (the perfect player)."""
    return _uniform_over(optimal_moves())


def _check_table(table, name: str) -> np.ndarray:
    table = np.asarray(table, dtype=np.float64)
    if table.shape != (NUM_CODES, 9):
        raise ValueError(f"{name} must be a [3**9, 9] = [{NUM_CODES}, 9] probability table, got shape {table.shape}")
    q = move_values()
    rows = decision_positions()
    t, legal = table[rows], np.isfinite(q[rows])
    bad = ~np.all(np.isfinite(t), axis=-1) | np.any(t < 0, axis=-1) | ~np.isclose(t.sum(axis=-1), 1.0, atol=1e-6)
    bad |= np.any((t > 0) & ~legal, axis=-1)
    if np.any(bad):
        code = int(rows[np.argmax(bad)])
        raise ValueError(
            f"{name} row {code} (empty cells {np.flatnonzero(legal[np.argmax(bad)]).tolist()}) is not a probability "
            f"vector over the empty cells: {table[code].tolist()}; every reachable decision position's row must be "
            f"nonnegative, sum to 1 and put no mass on filled cells"
        )
    return table


def outcome_probabilities(first, second) -> np.ndarray:
    """float64 `[3]`: exact `(first mover wins, second mover wins, draw)` probabilities when the
    policy table `first` (float `[3**9, 9]`, see the module docstring) plays the first mover and
    `second` the second, by enumerating the game tree (memoised over positions).

    Raises ValueError when a reachable decision row of either table is not a probability vector
    over the empty cells.
    """
    tables = (_check_table(first, "first"), _check_table(second, "second"))
    values, _, children = _solve()
    memo: dict[int, np.ndarray] = {}

    def outcome(code: int, first_to_move: bool) -> np.ndarray:
        if code in memo:
            return memo[code]
        if code not in children:  # terminal: a line by the player who just moved (-1), or a full board
            if values[code] == -1:
                r = np.array([0.0, 1.0, 0.0]) if first_to_move else np.array([1.0, 0.0, 0.0])
            else:
                r = np.array([0.0, 0.0, 1.0])
        else:
            p = tables[0 if first_to_move else 1][code]
            r = np.zeros(3)
            for cell in np.flatnonzero(p > 0):
                r = r + p[cell] * outcome(int(children[code][cell]), not first_to_move)
        memo[code] = r
        return r

    return outcome(0, True)


# ---- the perfect player (jittable) ---------------------------------------------------------------


def code_of(observation) -> jax.Array:
    """int32 `[...]`: the mover-relative board code of Tic-Tac-Toe observations int/float
    `[..., 3, 3, 2]` (the jittable twin of `board_code`)."""
    planes = jnp.asarray(observation).reshape(*jnp.shape(observation)[:-3], 9, 2).astype(jnp.int32)
    return jnp.sum((planes[..., 0] + 2 * planes[..., 1]) * jnp.asarray(_POW3, jnp.int32), axis=-1)


def perfect_moves(obs) -> jax.Array:
    """bool `[9]`: the minimax-optimal legal moves of one Tic-Tac-Toe observation dict; the legal
    moves when the board is not a reachable decision position (all False for a non-mover)."""
    mask = mask_of(obs, 9, "tic_tac_toe.perfect")
    code = code_of(observation_of(obs, (3, 3, 2), "tic_tac_toe.perfect"))
    best = jnp.asarray(optimal_moves())[code] & mask
    return jnp.where(jnp.any(best), best, mask)


def perfect(key, obs) -> jax.Array:
    """int32 scalar: a perfect Tic-Tac-Toe move, uniform among the minimax-optimal legal moves of
    `obs` (`{"observation": [3, 3, 2], "action_mask": uint8[9]}`); it never loses."""
    return uniform_among(key, perfect_moves(obs))
