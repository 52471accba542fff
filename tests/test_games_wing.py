"""The `jaxenvs.games` wing: it needs jax and numpy only (a subprocess with flax, optax and
mctx made unimportable plays named opponents), and a person plays at the terminal (stdin driven
in a subprocess: malformed and illegal moves are refused and re-prompted with the legal moves,
the game ends with the result; end of input ends it cleanly), Kuhn poker included (the other
card hidden). The window is tested in tests/test_human_window.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

BLOCKER = textwrap.dedent("""
    import sys
    class _Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("flax", "optax", "mctx"):
                raise ImportError(f"No module named {name!r} (blocked by the test)")
            return None
    sys.meta_path.insert(0, _Block())
    from jaxenvs.cli import main
    status = main(sys.argv[1:])
    assert not any(m.split(".")[0] in ("flax", "optax", "mctx") for m in sys.modules)
    sys.exit(status)
""")


def jaxenvs_cli(args, tmp_path, stdin=None, block=False):
    env = {**os.environ, "JAXENVS_CACHE_DIR": "off"}
    cmd = [sys.executable, "-c", BLOCKER, *args] if block else [sys.executable, "-m", "jaxenvs", *args]
    return subprocess.run(cmd, cwd=tmp_path, input=stdin, capture_output=True, text=True, timeout=300, env=env)


def test_named_opponents_play_without_flax(tmp_path):
    p = jaxenvs_cli(["play", "TicTacToe-v0", "--opponent", "random", "--episodes", "3"], tmp_path, block=True)
    assert p.returncode == 0, p.stderr
    assert "vs random (uniformly random among the legal moves)" in p.stdout and "3 episodes" in p.stdout
    p = jaxenvs_cli(["play", "ConnectFour-v0", "--opponent", "heuristic", "--episodes", "2"], tmp_path, block=True)
    assert p.returncode == 0, p.stderr
    assert "the policy in seat 0:" in p.stdout
    # a run directory as opponent is what needs the train extra: a one-line error, no traceback
    (tmp_path / "run").mkdir()
    p = jaxenvs_cli(["play", "TicTacToe-v0", "--opponent", "./run"], tmp_path, block=True)
    assert p.returncode == 1 and "needs the train extra" in p.stderr and "Traceback" not in p.stderr


def test_a_person_plays_tic_tac_toe_at_the_terminal(tmp_path):
    # the person (X, seat 0) against the perfect player: 'x' is malformed, the 2nd '4' is taken
    moves = "x\n4\n4\n0\n1\n2\n3\n5\n6\n7\n8\n"
    p = jaxenvs_cli(["play", "TicTacToe-v0", "--human", "--opponent", "perfect"], tmp_path, stdin=moves)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "cells, column-major as in PettingZoo:" in out and "0 3 6" in out and "2 5 8" in out
    assert "'x' is not a move number; type one of 0, 1, 2, 3, 4, 5, 6, 7, 8 (or q to quit)" in out
    assert "4 is not a legal move here; legal moves:" in out
    assert "agent 1 (perfect) wins" in out or "draws" in out  # the perfect player never loses
    assert "agent 0 (you) wins" not in out
    # end of input in the middle of the game: a one-line error, exit status 1, no traceback
    p = jaxenvs_cli(["play", "TicTacToe-v0", "--human"], tmp_path, stdin="4\n")
    assert p.returncode == 1 and "game stopped: input ended before the game did" in p.stderr
    assert "Traceback" not in p.stderr
    # q gives the game up: asked for, so a plain line and exit status 0, no "error"
    p = jaxenvs_cli(["play", "TicTacToe-v0", "--human"], tmp_path, stdin="4\nq\n")
    assert p.returncode == 0 and "game stopped: the game was given up" in p.stdout and "error" not in p.stderr
    # human against human: both seats typed
    p = jaxenvs_cli(["play", "TicTacToe-v0", "--human", "--opponent", "human"], tmp_path, stdin="0\n1\n3\n2\n6\n")
    assert p.returncode == 0, p.stderr
    assert "agent 0 (person) wins" in p.stdout and "agent 1 (person) loses" in p.stdout


def test_a_person_plays_kuhn_poker_seeing_only_their_own_card(tmp_path):
    # the person (seat 0) bets, by name and by a unique beginning; 'x' is neither a number nor a name
    p = jaxenvs_cli(["play", "KuhnPoker-v0", "--human", "--opponent", "random"], tmp_path, stdin="x\nb\nbet\n")
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert "'x' is not a move; type one of 0 (Pass), 1 (Bet) (or q to quit)" in p.stdout
    acting = [line for line in out if line.startswith("KuhnPoker: cards") and "to act" in line]
    assert acting and all(line.split("cards ")[1][:4] in ("J ?,", "Q ?,", "K ?,") for line in acting)
    assert "agent 0 (you) " in p.stdout and "agent 1 (random) " in p.stdout and "agent 0 (you) plays" not in p.stdout
    # no display here: one line says why the game is in the terminal
    assert p.stderr.startswith("no window: ") and p.stderr.count("\n") == 1


def test_one_person_a_game_of_hidden_cards_and_nobody_at_a_simultaneous_game(capsys):
    from jaxenvs.cli import main

    assert main(["play", "KuhnPoker-v0", "--human", "--opponent", "human"]) == 2
    assert "hides each player's cards, so one person plays against a policy" in capsys.readouterr().err
    assert main(["play", "RockPaperScissors-v0", "--human"]) == 2
    assert "a person cannot play RockPaperScissors-v0" in capsys.readouterr().err


def test_describe_lists_action_meanings_numbering_and_opponents(tmp_path):
    from jaxenvs.cli import describe_env

    text = describe_env("TicTacToe-v0")
    assert "    3 = mark cell 3 (column 1, row 0)" in text and "column-major" in text
    assert "    perfect: minimax" in text
    text = describe_env("ConnectFour-v0")
    assert "    6 = drop a piece in column 6" in text and "    heuristic: win, else block" in text
