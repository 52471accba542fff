"""A seat for a person: `play_game` plays one game of a two-player turn-based game where each
seat is a person (``None``) or a policy ``policy(key, obs) -> action``; the person plays at the
terminal (`Terminal`, here) or in a pygame window (`jaxenvs.games.window.BoardWindow`).

Games a person can play (`supports_people`): two-player turn-based games with a text rendering,
of perfect information (``TicTacToe-v0``, ``ConnectFour-v0``), or of imperfect information whose
class declares what a seat may see (``observer_view(state, player)``: ``KuhnPoker-v0``, the other
player's card hidden until a showdown; one person a game there). Chance nodes are stepped by the
game (its ``step`` draws the outcome with its key): nobody is asked.

At the terminal, before each of a person's moves the board is drawn (the game's ``render_text``,
as the person may see it) with the numbering of the moves beside it (the game's ``MOVE_KEY``:
Tic-Tac-Toe's cells are column-major, as in PettingZoo) and the legal moves listed with what they
mean (the game's ``ACTION_NAMES``); the person types a move number, or a move's name (``pass``,
``bet``; a unique beginning such as ``b`` will do). Input that is neither, or a move that is not
legal, is refused and asked again with the legal moves listed; ``q`` (or ``quit``) gives the game
up. The moves of the policies and, at the end, the final board and the result are written.
End of input (Ctrl-D, a closed pipe) stops the game: `InputEnded` (the command line's error, exit
status 1); ``q`` or closing the window gives it up: `GameGivenUp`, an `InputEnded` that the command
line reports as a plain line (exit status 0), since the person asked for it. Ctrl-C raises
KeyboardInterrupt as usual (the command line exits 130, no traceback).
"""

from __future__ import annotations

from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["play_game", "InputEnded", "GameGivenUp", "supports_people", "board_with_key", "Terminal", "parse_move", "legal_text",
           "seat_view"]

QUIT = ("q", "quit", "exit")


class InputEnded(Exception):
    """The person's input ended (EOF), they gave the game up (``q``) or closed the window."""


class GameGivenUp(InputEnded):
    """The person gave the game up on purpose: ``q`` at the terminal, or the window closed."""


def supports_people(env) -> bool:
    """Whether a person can play ``env``: a two-player turn-based game with a text rendering, of
    perfect information or whose class says what a seat may see (``observer_view``)."""
    base = getattr(env, "unwrapped", env)
    t = base.traits
    return (t.num_agents == 2 and t.dynamics == "sequential" and hasattr(base, "render_text")
            and (t.information == "perfect" or base.observer_view is not None))


def hides_information(env) -> bool:
    """Whether a seat may not see the whole state (one person a game: nobody else may look)."""
    return getattr(env, "unwrapped", env).traits.information != "perfect"


def seat_view(env, state, seat: int | None, params=None):
    """The state as a person in ``seat`` may see it (the game's ``observer_view``; the state itself
    in a game of perfect information, or for ``seat=None``)."""
    base = getattr(env, "unwrapped", env)
    view = base.observer_view
    return state if view is None or seat is None else view(state, seat, params)


def board_with_key(env, state, params=None) -> str:
    """The board (``render_text``) with the game's move numbering (``MOVE_KEY``) beside it."""
    base = getattr(env, "unwrapped", env)
    board = env.render_text(state, params).splitlines()
    key = (base.MOVE_KEY or "").splitlines()
    if not key:
        return "\n".join(board)
    body, status = board[:-1], board[-1]  # the last line of render_text says whose move it is
    width = max(len(line) for line in body) if body else 0
    title, grid = key[0], key[1:]
    if not grid:  # a key that is one sentence (Connect Four: the numbers are under the board)
        return "\n".join(board + [title])
    rows = [f"{line.ljust(width)}      {grid[i] if i < len(grid) else ''}".rstrip() for i, line in enumerate(body)]
    return "\n".join([f"{'board'.ljust(width)}      {title}"] + rows + [status])


def legal_text(env, legal: np.ndarray) -> str:
    """The legal moves, each with its name where no key beside the board says what it means."""
    base = getattr(env, "unwrapped", env)
    names = base.ACTION_NAMES
    moves = [int(a) for a in np.flatnonzero(legal)]
    if names and not base.MOVE_KEY:  # the key beside the board already says what they mean
        return ", ".join(f"{a} ({names[a]})" for a in moves)
    return ", ".join(str(a) for a in moves)


def move_text(env, move: int) -> str:
    names = getattr(env, "unwrapped", env).ACTION_NAMES
    return f"{move}" + (f" ({names[move]})" if names else "")


def parse_move(env, text: str, legal: np.ndarray) -> tuple[int | None, str]:
    """``(move, "")`` for a legal move typed as its number or its name (or a unique beginning of
    one, any case), else ``(None, why)``: what was wrong and the legal moves."""
    base = getattr(env, "unwrapped", env)
    moves = [int(a) for a in np.flatnonzero(legal)]
    text = text.strip()
    try:
        move = int(text)
    except ValueError:
        names = base.ACTION_NAMES or ()
        found = [i for i, name in enumerate(names) if text and name.lower().startswith(text.lower())]
        if len(found) != 1:
            named = base.ACTION_NAMES and not base.MOVE_KEY
            listed = legal_text(env, legal) if named else ", ".join(map(str, moves))
            return None, f"{text!r} is not a move{'' if named else ' number'}; type one of {listed} (or q to quit)"
        move = found[0]
    if move not in moves:
        keyed = base.MOVE_KEY or not 0 <= move < len(legal)  # a key beside the board names it
        return None, f"{move if keyed else move_text(env, move)} is not a legal move here; legal moves: {legal_text(env, legal)}"
    return move, ""


class Terminal:
    """A person at the terminal: the board written with ``write``, moves read with ``read``."""

    def __init__(self, read: Callable[[str], str] = input, write: Callable[[str], None] = print):
        self.read, self.write = read, write

    def ask(self, env, state, params, player: int, legal: np.ndarray) -> int:
        """The person's move (``state`` as they may see it): re-prompted until it is legal."""
        self.write("")
        self.write(board_with_key(env, state, params))
        self.write(f"legal moves: {legal_text(env, legal)}")
        moves = [int(a) for a in np.flatnonzero(legal)]
        while True:
            try:
                text = self.read(f"agent {player}, your move ({'/'.join(map(str, moves))}, q to quit): ")
            except EOFError:
                raise InputEnded("input ended before the game did") from None
            if text.strip().lower() in QUIT:
                raise GameGivenUp("the game was given up")
            move, why = parse_move(env, text, legal)
            if move is not None:
                return move
            self.write(why)

    def end(self, env, state, params, result: Sequence[str]) -> None:
        """The game is over: the final board and the result are written by `play_game` already."""

    def note(self, text: str) -> None:
        """A line for the person (a policy's move): the terminal has it from `play_game` already."""

    def update(self, env, state, params, status: str) -> None:
        """The board while a policy thinks: the terminal draws it before the person's next move."""

    def close(self) -> None:
        pass


def play_game(env, seats: Sequence[Callable | None], key, params=None, read: Callable[[str], str] = input,
              write: Callable[[str], None] = print, labels: Sequence[str] | None = None, screen=None) -> np.ndarray:
    """Play one game of ``env`` (built with ``autoreset=False``), seat ``i`` played by
    ``seats[i]``: a policy ``policy(key, obs) -> action`` on one agent's observation, or None for
    a person. The person plays on ``screen`` (`Terminal` or `jaxenvs.games.window.BoardWindow`;
    default ``Terminal(read, write)``); the policies' moves and the result are written with
    ``write`` either way. Returns the returns float ``[2]`` (per seat). Raises `InputEnded` when a
    person's input ends, they quit or close the window; ValueError for a game a person cannot play
    (`supports_people`) or two people at a game that hides information."""
    if not supports_people(env):
        raise ValueError(
            f"a person plays two-player turn-based games with a text rendering, of perfect information or that say "
            f"what a seat may see (TicTacToe-v0, ConnectFour-v0, KuhnPoker-v0); "
            f"{env.spec.id if getattr(env, 'spec', None) else env} is not one"
        )
    if len(seats) != env.num_agents:
        raise ValueError(f"play_game needs one entry per seat ({env.num_agents}), got {len(seats)}")
    people = [i for i, s in enumerate(seats) if s is None]
    if len(people) > 1 and hides_information(env):
        raise ValueError(f"{env.spec.id if getattr(env, 'spec', None) else env} hides each player's information: one "
                         "person a game (the other seat a policy), as nobody else may look at their screen")
    viewer = people[0] if people and hides_information(env) else None  # whose eyes the board is drawn for
    screen = Terminal(read, write) if screen is None else screen
    base = env.unwrapped
    params = env.default_params if params is None else params
    labels = list(labels) if labels is not None else ["person" if s is None else "policy" for s in seats]
    step = jax.jit(env.step)
    acts = [None if s is None else jax.jit(s) for s in seats]
    chance = getattr(base, "is_chance_node", None)
    key, k_reset = jax.random.split(key)
    obs, state = jax.jit(env.reset)(k_reset, params)
    returns = np.zeros(env.num_agents)
    done = False
    while not done:
        key, k_act, k_step = jax.random.split(key, 3)
        player = int(env.current_player(state, params))
        if chance is not None and bool(chance(state, params)):  # the game deals: nobody moves
            move = 0
        elif acts[player] is None:
            row = jax.tree.map(lambda x: x[player], obs)
            shown = seat_view(env, state, player if viewer is not None else None, params)
            move = screen.ask(env, shown, params, player, np.asarray(row["action_mask"]) != 0)
        else:
            if people:  # the board while the policy thinks (a window shows the person's move at once)
                screen.update(env, seat_view(env, state, viewer, params), params,
                              f"agent {player} ({labels[player]}) to move")
            move = int(acts[player](k_act, jax.tree.map(lambda x: x[player], obs)))
            if people:
                line = f"agent {player} ({labels[player]}) plays {move_text(env, move)}"
                write(line)
                screen.note(line)
        joint = jnp.zeros((env.num_agents,), jnp.int32).at[player].set(move)
        obs, state, reward, terminated, truncated, _ = step(k_step, state, joint, params)
        returns += np.asarray(reward, np.float64)
        done = bool(terminated) or bool(truncated)
    result = [f"agent {i} ({labels[i]}) {'wins' if r > 0 else 'loses' if r < 0 else 'draws'} (return {r:+g})"
              for i, r in enumerate(returns)]
    final = seat_view(env, state, viewer, params)
    write("")
    write(board_with_key(env, final, params))
    for line in result:
        write(line)
    screen.end(env, final, params, result)
    return returns
