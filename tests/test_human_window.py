"""A person's game in a pygame window (`jaxenvs.games.window`), headless: SDL's ``dummy`` video
driver, the person's clicks synthetic pygame events handed to the window whenever it waits for one.
Also the fallback to the terminal, with its one line, where no window can open."""

from __future__ import annotations

import sys

import jax
import numpy as np
import pytest

import jaxenvs
from jaxenvs.games import make_opponent, random_legal
from jaxenvs.games.human import GameGivenUp, InputEnded, Terminal, play_game
from jaxenvs.games.window import BoardWindow, open_screen

pygame = pytest.importorskip("pygame")


@pytest.fixture
def dummy(monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")


def centre_of(window, move):
    """The window pixel at the centre of the board pixels that select ``move`` (`move_at`)."""
    h, w = (s // window.scale for s in window.board_hw)
    ys, xs = np.nonzero(np.asarray(window.base.move_at(*np.mgrid[0:h, 0:w][::-1])) == move)
    return (window.offset + int(xs.mean() * window.scale), int(ys.mean() * window.scale))


def script(monkeypatch, window, person):
    """Whenever ``window`` waits for an event, it gets the one ``person(window)`` makes (events
    SDL queued itself follow through ``pygame.event.get``); the texts it draws are collected in the
    list returned. (Events are handed over rather than posted to SDL's queue: pygame 2.6 corrupts
    the attributes of posted events once the display has been shut and opened again in one
    process, as these tests do.)"""
    drawn = []
    real_text = window._text

    def wait(timeout=0):
        return person(window)

    def text(s, *a, **k):
        drawn.append(s)
        return real_text(s, *a, **k)

    monkeypatch.setattr(pygame.event, "wait", wait)
    monkeypatch.setattr(window, "_text", text)
    return drawn


def click(pos):
    return pygame.event.Event(pygame.MOUSEBUTTONDOWN, pos=pos, button=1)


def test_a_person_plays_tic_tac_toe_by_clicking_and_an_illegal_click_is_refused(dummy, monkeypatch):
    env = jaxenvs.make("TicTacToe-v0", autoreset=False)
    window = BoardWindow("test", "you vs perfect").open(env)
    asked = []

    def person(w):
        if w.legal is None:  # the game is over: a click closes the result
            return click((1, 1))
        asked.append(np.flatnonzero(w.legal).tolist())
        if len(asked) == 2:  # the second ask: click the centre, taken by the first move
            return click(centre_of(w, 4))
        return click(centre_of(w, 4 if len(asked) == 1 else int(np.flatnonzero(w.legal)[0])))

    drawn = script(monkeypatch, window, person)
    lines = []
    returns = play_game(env, [None, make_opponent("perfect", env)[1]], jax.random.key(0), write=lines.append,
                        labels=["you", "perfect"], screen=window)
    window.close()
    assert returns[0] <= 0 and returns.sum() == 0  # the perfect player never loses
    assert lines[0].startswith("agent 1 (perfect) plays")  # it answered the click on the centre
    refusals = [t for t in drawn if t.startswith("4 is not a legal move here; legal moves:")]
    assert refusals and "4" not in refusals[0].split(":", 1)[1].split(", ")
    assert asked[1] == asked[2]  # the refused click played nothing: the same legal moves asked again
    assert any(t.startswith("game over: agent 0 (you)") for t in drawn)
    assert any("(you)" in line for line in lines[-2:])


def test_kuhn_poker_buttons_hide_the_other_card_and_closing_the_window_stops(dummy, monkeypatch):
    env = jaxenvs.make("KuhnPoker-v0", autoreset=False)
    window = BoardWindow("test").open(env)
    frames = []
    real_draw = window._draw

    def draw(env_, state, params, *a, **k):
        frames.append(np.asarray(state.cards).tolist())
        return real_draw(env_, state, params, *a, **k)

    monkeypatch.setattr(window, "_draw", draw)
    # the Bet button, then (if asked again) Pass; a click closes the result
    script(monkeypatch, window, lambda w: click((1, 1)) if w.legal is None else click(w.buttons[-1][1].center))
    returns = play_game(env, [None, random_legal], jax.random.key(2), write=lambda s: None, screen=window)
    assert returns.sum() == 0 and abs(returns[0]) in (1, 2)
    assert all(cards[1] == -2 for cards in frames[:-1])  # the other card hidden while betting
    # closing the window in the middle of a game: GameGivenUp (an InputEnded), as q at the terminal
    script(monkeypatch, window, lambda w: pygame.event.Event(pygame.QUIT))
    with pytest.raises(GameGivenUp, match="the window was closed") as stopped:
        play_game(env, [None, random_legal], jax.random.key(3), write=lambda s: None, screen=window)
    assert isinstance(stopped.value, InputEnded)  # callers catching InputEnded still see it
    window.close()


def test_the_command_line_plays_in_the_window(dummy, monkeypatch, capsys):
    from jaxenvs.cli import main

    opened = []
    real_open = BoardWindow.open

    def open_(self, env, params=None):
        opened.append(self)
        person = lambda w: click((1, 1)) if w.legal is None else click(centre_of(w, int(np.flatnonzero(w.legal)[-1])))
        script(monkeypatch, self, person)
        return real_open(self, env, params)

    monkeypatch.setattr(BoardWindow, "open", open_)
    assert main(["play", "ConnectFour-v0", "--human", "--opponent", "heuristic", "--render", "human"]) == 0
    out = capsys.readouterr().out
    assert opened and "agent 1 (heuristic) plays" in out and "agent 0 (you)" in out
    # two people at one window, each clicking their lowest legal cell: X takes 0, 2, 4, 6 (the anti-diagonal)
    monkeypatch.setattr(BoardWindow, "open", lambda self, env, params=None: (script(
        monkeypatch, self, lambda w: click((1, 1)) if w.legal is None else click(
            centre_of(w, int(np.flatnonzero(w.legal)[0])))), real_open(self, env, params))[1])
    assert main(["play", "TicTacToe-v0", "--human", "--opponent", "human", "--render", "human"]) == 0
    assert "agent 0 (person) wins (return +1)" in capsys.readouterr().out
    # the window closed mid-game: given up, as q at the terminal (a plain line, exit status 0)
    monkeypatch.setattr(BoardWindow, "open", lambda self, env, params=None: (
        script(monkeypatch, self, lambda w: pygame.event.Event(pygame.QUIT)), real_open(self, env, params))[1])
    assert main(["play", "TicTacToe-v0", "--human", "--render", "human"]) == 0
    captured = capsys.readouterr()
    assert "game stopped: the window was closed before the game ended" in captured.out and not captured.err


def test_without_a_display_the_terminal_with_one_line(monkeypatch, capsys):
    from jaxenvs.cli import main

    env = jaxenvs.make("TicTacToe-v0", autoreset=False)
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    # the window asked for on the command line: one line, exit status 1, before anyone moves
    assert main(["play", "TicTacToe-v0", "--human", "--render", "human"]) == 1
    err = capsys.readouterr().err
    assert err.endswith("--render human: no display to open a window on (DISPLAY is not set); --render text plays "
                        "in the terminal\n")
    assert "Traceback" not in err and err.count("\n") == 1
    said = []
    screen = open_screen(env, "auto", note=said.append)
    assert isinstance(screen, Terminal)
    assert said == ["no window: no display (DISPLAY and WAYLAND_DISPLAY are not set); playing in the terminal"]
    with pytest.raises(OSError, match="no display"):  # the window asked for: no fallback
        open_screen(env, "window")
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")  # a driver that shows nothing: the window only when asked for
    said.clear()
    assert isinstance(open_screen(env, "auto", note=said.append), Terminal) and said[0].startswith(
        "no window: SDL_VIDEODRIVER=dummy shows nothing")
    window = open_screen(env, "window")
    assert isinstance(window, BoardWindow)
    window.close()
    monkeypatch.setitem(sys.modules, "pygame", None)  # as if pygame were not installed
    said.clear()
    assert isinstance(open_screen(env, "auto", note=said.append), Terminal)
    assert said == ["no window: pygame is not installed (pip install 'jaxenvs[render]'); playing in the terminal"]
