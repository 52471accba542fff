"""A seat for a person at the terminal: `play_game` plays one game of a two-player turn-based game
of perfect information (``TicTacToe-v0``, ``ConnectFour-v0``) where each seat is a person
(``None``) or a policy ``policy(key, obs) -> action``.

Before each of a person's moves the board is drawn (the game's ``render_text``) with the numbering
of the moves beside it (the game's ``MOVE_KEY``: Tic-Tac-Toe's cells are column-major, as in
PettingZoo) and the legal moves listed with what they mean (the game's ``ACTION_NAMES``); the
person types a move number. Input that is not a number, or a move that is not legal, is refused
and asked again with the legal moves listed; ``q`` (or ``quit``) gives the game up. At the end the
final board and the result are shown. End of input (Ctrl-D, a closed pipe) stops the game:
`InputEnded`; Ctrl-C raises KeyboardInterrupt as usual (the command line exits 130, no
traceback).
"""

from __future__ import annotations

from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["play_game", "InputEnded", "supports_people", "board_with_key"]

QUIT = ("q", "quit", "exit")


class InputEnded(Exception):
    """The person's input ended (EOF) or they gave the game up (``q``)."""


def supports_people(env) -> bool:
    """Whether a person can play ``env`` here: a two-player turn-based game of perfect
    information without chance moves, with a text rendering."""
    base = getattr(env, "unwrapped", env)
    t = base.traits
    return (t.num_agents == 2 and t.dynamics == "sequential" and t.information == "perfect"
            and t.chance == "deterministic" and hasattr(base, "render_text"))


def board_with_key(env, state, params=None) -> str:
    """The board (``render_text``) with the game's move numbering (``MOVE_KEY``) beside it."""
    base = getattr(env, "unwrapped", env)
    board = env.render_text(state, params).splitlines()
    key = getattr(base, "MOVE_KEY", "").splitlines()
    if not key:
        return "\n".join(board)
    body, status = board[:-1], board[-1]  # the last line of render_text says whose move it is
    width = max(len(line) for line in body) if body else 0
    title, grid = key[0], key[1:]
    if not grid:  # a key that is one sentence (Connect Four: the numbers are under the board)
        return "\n".join(board + [title])
    rows = [f"{line.ljust(width)}      {grid[i] if i < len(grid) else ''}".rstrip() for i, line in enumerate(body)]
    return "\n".join([f"{'board'.ljust(width)}      {title}"] + rows + [status])


def _legal_text(base, legal: np.ndarray) -> str:
    names = getattr(base, "ACTION_NAMES", None)
    moves = [int(a) for a in np.flatnonzero(legal)]
    if names and not getattr(base, "MOVE_KEY", None):  # the key beside the board already says what they mean
        return ", ".join(f"{a} ({names[a]})" for a in moves)
    return ", ".join(str(a) for a in moves)


def _ask(base, player: int, legal: np.ndarray, read: Callable[[str], str], write: Callable[[str], None]) -> int:
    """The person's move: re-prompted until it is a legal move number."""
    moves = [int(a) for a in np.flatnonzero(legal)]
    write(f"legal moves: {_legal_text(base, legal)}")
    while True:
        try:
            text = read(f"agent {player}, your move ({'/'.join(map(str, moves))}, q to quit): ")
        except EOFError:
            raise InputEnded("input ended before the game did") from None
        text = text.strip()
        if text.lower() in QUIT:
            raise InputEnded("the game was given up")
        try:
            move = int(text)
        except ValueError:
            write(f"{text!r} is not a move number; type one of {', '.join(map(str, moves))} (or q to quit)")
            continue
        if move not in moves:
            write(f"{move} is not a legal move here; legal moves: {_legal_text(base, legal)}")
            continue
        return move


def play_game(env, seats: Sequence[Callable | None], key, params=None, read: Callable[[str], str] = input,
              write: Callable[[str], None] = print, labels: Sequence[str] | None = None) -> np.ndarray:
    """Play one game of ``env`` (built with ``autoreset=False``), seat ``i`` played by
    ``seats[i]``: a policy ``policy(key, obs) -> action`` on one agent's observation, or None for
    a person at the terminal (``read`` asks them, ``write`` shows them the board). Returns the
    returns float ``[2]`` (per seat). Raises `InputEnded` when a person's input ends or they quit,
    ValueError for a game a person cannot play here (`supports_people`)."""
    if not supports_people(env):
        raise ValueError(
            f"a person plays two-player turn-based games of perfect information without chance moves (TicTacToe-v0, "
            f"ConnectFour-v0) at the terminal; {env.spec.id if getattr(env, 'spec', None) else env} is not one"
        )
    if len(seats) != env.num_agents:
        raise ValueError(f"play_game needs one entry per seat ({env.num_agents}), got {len(seats)}")
    base = env.unwrapped
    params = env.default_params if params is None else params
    labels = list(labels) if labels is not None else ["person" if s is None else "policy" for s in seats]
    step = jax.jit(env.step)
    acts = [None if s is None else jax.jit(s) for s in seats]
    key, k_reset = jax.random.split(key)
    obs, state = jax.jit(env.reset)(k_reset, params)
    returns = np.zeros(env.num_agents)
    people = sum(s is None for s in seats)
    done = False
    while not done:
        player = int(env.current_player(state, params))
        row = jax.tree.map(lambda x: x[player], obs)
        key, k_act, k_step = jax.random.split(key, 3)
        if acts[player] is None:
            write("")
            write(board_with_key(env, state, params))
            move = _ask(base, player, np.asarray(row["action_mask"]) != 0, read, write)
        else:
            move = int(acts[player](k_act, row))
            if people:
                names = getattr(base, "ACTION_NAMES", None)
                write(f"agent {player} ({labels[player]}) plays {move}" + (f" ({names[move]})" if names else ""))
        joint = jnp.zeros((env.num_agents,), jnp.int32).at[player].set(move)
        obs, state, reward, terminated, truncated, _ = step(k_step, state, joint, params)
        returns += np.asarray(reward, np.float64)
        done = bool(terminated) or bool(truncated)
    write("")
    write(board_with_key(env, state, params))
    for i, r in enumerate(returns):
        outcome = "wins" if r > 0 else "loses" if r < 0 else "draws"
        write(f"agent {i} ({labels[i]}) {outcome} (return {r:+g})")
    return returns
