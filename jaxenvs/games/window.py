"""A person's seat in a pygame window (``pip install 'jaxenvs[render]'``): `BoardWindow` is the
screen `jaxenvs.games.human.play_game` asks for the person's moves, and `open_screen` picks the
window where a display exists, else the terminal, with one line saying why.

The window shows the game's own frame (``render``, scaled up) with each legal move's number on it,
and under it whose move it is, the other side's last move, a note after a refused click, and the
legal moves. A click on the board plays the move under it (the game's ``move_at(x, y)``: the
Tic-Tac-Toe cell, the Connect Four column); a game without ``move_at`` (Kuhn poker) gets one
button per legal move under the picture, named by the game's ``ACTION_NAMES``. A number key plays
that move too. A click on a move that is not legal is refused: the note says so and lists the
legal moves. At the end the result is shown until a click, a key or closing the window.
Closing the window (or Escape) during a game gives it up: `jaxenvs.games.human.GameGivenUp`, as
``q`` does at the terminal.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Sequence

import numpy as np

from jaxenvs.games.human import GameGivenUp, Terminal, legal_text, parse_move
from jaxenvs.rendering.pygame_window import HEADLESS_DRIVERS, Window, import_pygame

__all__ = ["BoardWindow", "open_screen", "SCREENS"]

SCREENS = ("auto", "window", "terminal")
MIN_SIDE = 480  # the board is scaled up to at least this many pixels on its longer side
FONT_PX, LINE_PX, PAD = 18, 22, 8
BUTTON = (120, 36)  # width, height of a move button (games without move_at)
INK, NOTE, FAINT, PAPER = (0, 0, 0), (200, 30, 30), (120, 120, 120), (255, 255, 255)


class BoardWindow:
    """A pygame window where a person plays a turn-based game by clicking (see the module
    docstring). Opened by `open` (OSError when no display can show it, ImportError without pygame:
    `jaxenvs.rendering.pygame_window.Window`'s rules). The transcript (the moves, the result) is
    `play_game`'s ``write``."""

    def __init__(self, title: str = "jaxenvs", header: str = ""):
        self.title, self.header = title, header
        self.window = Window(title, fps=30, require_display=True)
        self.pygame = self.font = self.small = None
        self.last = ""  # the other side's last move
        self.legal = None  # bool[n] while a move is awaited (tests read it)
        self.buttons: list[tuple[int, object]] = []
        self.scale = 1
        self.size = None
        self.base = None  # the game being played (its move_at)

    # ---- opening ---------------------------------------------------------------------------------
    def open(self, env, params=None) -> "BoardWindow":
        """Size the window for ``env``'s frames and open it (before the game: a missing display is
        known before anyone moves)."""
        import jax

        base = env.unwrapped
        params = env.default_params if params is None else params
        _, state = jax.jit(env.reset)(jax.random.key(0), params)
        frame = np.asarray(env.render(state, params))
        h, w = frame.shape[:2]
        self.scale = max(1, -(-MIN_SIDE // max(h, w)))
        self.board_hw = (h * self.scale, w * self.scale)
        self.has_clicks = base.move_at is not None
        width = max(self.board_hw[1], 420)
        self.offset = (width - self.board_hw[1]) // 2
        lines = 8 + (0 if self.has_clicks else 2)  # text lines (some wrap), the buttons
        self.size = (width, self.board_hw[0] + PAD + lines * LINE_PX + PAD)
        self.window.open(*self.size)
        self.pygame = self.window.pygame
        self.pygame.font.init()
        self.font = self.pygame.font.Font(None, FONT_PX + 6)
        self.small = self.pygame.font.Font(None, 32)
        if self.has_clicks:  # where each move's number goes: the top-left of the pixels that select it
            ys, xs = np.mgrid[0:h, 0:w]
            at = np.asarray(base.move_at(xs, ys))
            self.label_at = {}
            for m in range(int(env.action_space(params).n)):
                hit = np.argwhere(at == m)
                if len(hit):
                    self.label_at[m] = (int(hit[:, 1].min()), int(hit[:, 0].min()))
        return self

    # ---- drawing ---------------------------------------------------------------------------------
    def _text(self, text: str, x: int, y: int, color=INK, font=None):
        surface = (font or self.font).render(text, True, color)
        self.window.screen.blit(surface, (x, y))
        return surface.get_width()

    def _wrap(self, text: str) -> list[str]:
        """``text`` split at spaces into lines that fit the window."""
        lines: list[str] = []
        for word in text.split(" ") if text else []:
            if lines and self.font.size(lines[-1] + " " + word)[0] <= self.size[0] - 2 * PAD:
                lines[-1] += " " + word
            else:
                lines.append(word)
        return lines

    def _draw(self, env, state, params, status: str, note: str = "", legal=None, footer: str = "") -> None:
        pygame, screen = self.pygame, self.window.screen
        screen.fill(PAPER)
        frame = np.asarray(env.render(state, params))
        big = np.repeat(np.repeat(frame, self.scale, axis=0), self.scale, axis=1)
        surface = pygame.surfarray.make_surface(np.ascontiguousarray(big.transpose(1, 0, 2)))
        screen.blit(surface, (self.offset, 0))
        if legal is not None and self.has_clicks:  # each legal move's number on the board
            for m in np.flatnonzero(legal):
                if int(m) in self.label_at:
                    x, y = self.label_at[int(m)]
                    self._text(str(int(m)), self.offset + x * self.scale + 10, y * self.scale + 8, FAINT, self.small)
        y = self.board_hw[0] + PAD
        for text, color in ((self.header, INK), (status, INK), (self.last, INK), (note, NOTE)):
            for line in self._wrap(text):
                self._text(line, PAD, y, color)
                y += LINE_PX
        self.buttons = []
        if legal is not None and not self.has_clicks:  # one button per legal move
            names = env.unwrapped.ACTION_NAMES
            x = PAD
            for m in np.flatnonzero(legal):
                rect = pygame.Rect(x, y + 2, *BUTTON)
                pygame.draw.rect(screen, (225, 225, 225), rect)
                pygame.draw.rect(screen, INK, rect, 2)
                label = f"{int(m)}: {names[int(m)]}" if names else str(int(m))
                self._text(label, x + 10, y + 10)
                self.buttons.append((int(m), rect))
                x += BUTTON[0] + PAD
            y += 2 * LINE_PX
        self._text(footer, PAD, y, FAINT)
        pygame.display.flip()

    # ---- the screen play_game asks -----------------------------------------------------------
    def _events(self):
        """The next events, waiting for at least one."""
        pygame = self.pygame
        first = pygame.event.wait(100)
        return ([first] if first.type != pygame.NOEVENT else []) + pygame.event.get()

    def _closing(self, ev) -> bool:
        pygame = self.pygame
        return ev.type == pygame.QUIT or (ev.type == pygame.KEYDOWN and ev.key == pygame.K_ESCAPE)

    def _move_of(self, ev) -> int | None:
        """The move an event asks for (None: not a move)."""
        pygame = self.pygame
        if ev.type == pygame.MOUSEBUTTONDOWN and getattr(ev, "button", 1) == 1:
            x, y = ev.pos
            for m, rect in self.buttons:
                if rect.collidepoint(x, y):
                    return m
            if self.has_clicks:
                fx, fy = (x - self.offset) // self.scale, y // self.scale
                return int(self.base.move_at(fx, fy)) if 0 <= y < self.board_hw[0] else -1
            return None
        if ev.type == pygame.KEYDOWN and getattr(ev, "unicode", "").isdigit():
            return int(ev.unicode)
        return None

    def ask(self, env, state, params, player: int, legal: np.ndarray) -> int:
        """The person's move: waits for a click on a legal move (or its number key)."""
        self.base, self.legal = env.unwrapped, legal
        status = env.render_text(state, params).splitlines()[-1]
        how = "click the board where you move" if self.has_clicks else "click a button"
        footer = f"{how} (or press the move's number); Esc or close the window to quit"
        note = ""
        try:
            while True:
                self._draw(env, state, params, f"agent {player}, your move: {status}", note, legal, footer)
                for ev in self._events():
                    if self._closing(ev):
                        raise GameGivenUp("the window was closed before the game ended")
                    move = self._move_of(ev)
                    if move is None:
                        continue
                    if move < 0:
                        note = f"that is off the board; legal moves: {legal_text(env, legal)}"
                        break
                    move, why = parse_move(env, str(move), legal)
                    if move is not None:
                        self.last = ""
                        return move
                    note = why
                    break
        finally:
            self.legal = None

    def note(self, text: str) -> None:
        self.last = text

    def update(self, env, state, params, status: str) -> None:
        """Show ``state`` while a policy thinks (the person's move on the board at once)."""
        self.base = env.unwrapped
        self._draw(env, state, params, status)
        self.pygame.event.pump()

    def end(self, env, state, params, result: Sequence[str]) -> None:
        """The final board and the result, until a click, a key or the window is closed."""
        self.base = env.unwrapped
        self._draw(env, state, params, "game over: " + "; ".join(result), footer="click or press a key to close")
        pygame = self.pygame
        while True:
            for ev in self._events():
                if self._closing(ev) or ev.type in (pygame.MOUSEBUTTONDOWN, pygame.KEYDOWN):
                    return

    def close(self) -> None:
        if self.window.screen is not None:
            self.pygame.event.clear()  # events left in SDL's queue must not outlive the display
        self.window.close()


def open_screen(env, mode: str = "auto", title: str = "jaxenvs", header: str = "",
                read: Callable[[str], str] = input, write: Callable[[str], None] = print,
                note: Callable[[str], None] | None = None):
    """The screen a person plays ``env`` on: ``mode`` ``"window"`` (a `BoardWindow`: OSError or
    ImportError when it cannot open), ``"terminal"`` (`jaxenvs.games.human.Terminal`) or
    ``"auto"``: the window where a display exists (not SDL's headless ``dummy`` or ``offscreen``
    driver) and moves are not piped in (stdin a terminal), else the terminal, ``note`` (default:
    stderr) getting one line saying why."""
    if mode not in SCREENS:
        raise ValueError(f"screen mode must be one of {', '.join(SCREENS)}, got {mode!r}")
    if mode == "terminal":
        return Terminal(read, write)
    if mode == "window":
        return BoardWindow(title, header).open(env)
    say = note or (lambda line: print(line, file=sys.stderr))
    driver = os.environ.get("SDL_VIDEODRIVER", "")
    try:
        import_pygame()
    except ImportError:
        say("no window: pygame is not installed (pip install 'jaxenvs[render]'); playing in the terminal")
        return Terminal(read, write)
    if driver in HEADLESS_DRIVERS:
        say(f"no window: SDL_VIDEODRIVER={driver} shows nothing (--render human to use it anyway); playing in the "
            "terminal")
        return Terminal(read, write)
    if sys.platform.startswith("linux") and not driver and not any(
            os.environ.get(v) for v in ("DISPLAY", "WAYLAND_DISPLAY")):
        say("no window: no display (DISPLAY and WAYLAND_DISPLAY are not set); playing in the terminal")
        return Terminal(read, write)
    if not sys.stdin.isatty():
        say("no window: moves come from a pipe, not a terminal; playing in the terminal")
        return Terminal(read, write)
    try:
        return BoardWindow(title, header).open(env)
    except OSError as e:
        say(f"no window: {str(e).split(';')[0]}; playing in the terminal")
        return Terminal(read, write)
