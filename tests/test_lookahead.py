"""Exact look-ahead at play time (`jaxenvs.games.search.lookahead_values` / `lookahead_policy`):
the values over the game's own step equal Tic-Tac-Toe's exact minimax values wherever the horizon
reaches the end of the game, and an independent host-side negamax on Connect Four boards; the
guard keeps the wins and drops the losses it sees and leaves the rest to the policy; bad depths and
games it cannot play are clear errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs.games import random_legal
from jaxenvs.games import tic_tac_toe as ttt
from jaxenvs.games.search import lookahead_policy, lookahead_values
from turn_based import c4_obs


def _ttt_obs(code: int):
    digits = [(code // 3**i) % 3 for i in range(9)]
    planes = np.zeros((9, 2), np.int32)
    for i, d in enumerate(digits):
        if d:
            planes[i, d - 1] = 1
    return {"observation": planes.reshape(3, 3, 2), "action_mask": (planes.sum(-1) == 0).astype(np.uint8)}


def test_tic_tac_toe_values_equal_minimax_where_the_horizon_reaches_the_end():
    env = jaxenvs.make("TicTacToe-v0", autoreset=False).unwrapped
    codes = [c for c in ttt.decision_positions() if sum((c // 3**i) % 3 == 0 for i in range(9)) <= 3]
    assert len(codes) > 500
    obs = jax.tree.map(lambda *xs: np.stack(xs), *[_ttt_obs(int(c)) for c in codes])

    @jax.jit
    @jax.vmap
    def values(o):
        return lookahead_values(env, env.state_from_observation(o), 3)

    got = np.asarray(values(obs))
    np.testing.assert_array_equal(got, ttt.move_values()[np.asarray(codes)])


def _c4_negamax(mine: np.ndarray, theirs: np.ndarray, depth: int) -> np.ndarray:
    """Host-side reference: each column's win/loss value for the mover over ``depth`` plies."""
    def wins(b):
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            for r in range(6):
                for c in range(7):
                    cells = [(r + k * dr, c + k * dc) for k in range(4)]
                    if all(0 <= y < 6 and 0 <= x < 7 and b[y, x] for y, x in cells):
                        return True
        return False

    out = np.full(7, -np.inf)
    for col in range(7):
        free = np.flatnonzero(~(mine[:, col] | theirs[:, col]))
        if len(free) == 0:
            continue
        nxt = mine.copy()
        nxt[free[-1], col] = True
        if wins(nxt):
            out[col] = 1.0
        elif (nxt | theirs).all() or depth == 1:
            out[col] = 0.0
        else:
            out[col] = -np.max(_c4_negamax(theirs, nxt, depth - 1))
    return out


def test_connect_four_values_equal_a_host_negamax():
    env = jaxenvs.make("ConnectFour-v0", autoreset=False).unwrapped
    values = jax.jit(lambda o: lookahead_values(env, env.state_from_observation(o), 3))
    key = jax.random.key(5)
    checked = decided = 0
    for game in range(6):
        key, k = jax.random.split(key)
        obs, state = env.reset_env(k, env.default_params)
        for ply in range(42):
            p = int(state.current_player)
            o = jax.tree.map(lambda x: x[p], obs)
            if ply % 3 == 0:
                board = np.asarray(o["observation"]) != 0
                want = _c4_negamax(board[..., 0], board[..., 1], 3)
                got = np.asarray(values(o))
                np.testing.assert_array_equal(got, want)
                checked += 1
                decided += int(np.any(np.isfinite(want) & (want != 0)))
            key, k = jax.random.split(key)
            joint = jnp.zeros(2, jnp.int32).at[p].set(random_legal(k, o))
            obs, state, _, done, _, _ = env.step_env(k, state, joint, env.default_params)
            if bool(done):
                break
    assert checked > 30 and decided > 5  # random games reach positions with wins and losses in sight


def _random_positions(env, num_games: int, seed: int = 1):
    """The mover's observations of ``num_games`` random-legal games of ``env`` (every ply)."""
    def game(key):
        obs, state = env.reset_env(key, env.default_params)

        def ply(carry, k):
            obs, state = carry
            p = state.current_player
            o = jax.tree.map(lambda x: x[p], obs)
            joint = jnp.zeros(2, jnp.int32).at[p].set(random_legal(k, o))
            obs2, state2, _, _, _, _ = env.step_env(k, state, joint, env.default_params)
            keep = lambda new, old: jnp.where(state.terminated, old, new)  # noqa: E731
            return (jax.tree.map(keep, obs2, obs), jax.tree.map(keep, state2, state)), o

        return jax.lax.scan(ply, (obs, state), jax.random.split(key, 42))[1]

    o = jax.jit(jax.vmap(game))(jax.random.split(jax.random.key(seed), num_games))
    o = jax.tree.map(lambda x: np.asarray(x).reshape((-1,) + x.shape[2:]), o)
    live = o["action_mask"].any(-1)
    return jax.tree.map(lambda x: x[live], o)


def test_connect_four_declared_lookahead_equals_the_generic_one():
    from jaxenvs.games import connect_four as c4

    env = jaxenvs.make("ConnectFour-v0", autoreset=False).unwrapped
    assert env.LOOKAHEAD is c4.lookahead_values  # the declared hook, no binding to the env
    obs = _random_positions(env, 12)
    legal = obs["action_mask"] != 0
    assert len(legal) > 200
    for depth in (1, 2, 4):
        generic = jax.jit(jax.vmap(lambda o: lookahead_values(env, env.state_from_observation(o), depth)))(obs)
        fast = jax.jit(jax.vmap(lambda o: c4.lookahead_values(o, depth)))(obs)
        np.testing.assert_array_equal(np.where(legal, np.asarray(fast), 9), np.where(legal, np.asarray(generic), 9))
        assert np.all(np.isneginf(np.asarray(fast)[~legal]))
        # positions with a decided move: wins and losses in sight
        assert np.sum(np.any(np.isfinite(np.asarray(fast)) & (np.asarray(fast) != 0), -1)) > 20
    with pytest.raises(ValueError, match="depth must be a positive int"):
        c4.lookahead_values(jax.tree.map(lambda x: x[0], obs), 0)


def test_guard_takes_wins_avoids_losses_and_leaves_the_rest_to_the_policy():
    env = jaxenvs.make("ConnectFour-v0", autoreset=False)
    leftmost = lambda key, obs: jnp.argmax(jnp.asarray(obs["action_mask"]) != 0).astype(jnp.int32)  # noqa: E731
    guarded = jax.jit(lookahead_policy(env, leftmost, 2))
    key = jax.random.key(0)
    # the mover (3 pieces, to move second) wins in column 3; leftmost alone plays column 0
    win = c4_obs(mine=[(5, 3), (4, 3), (3, 3)], theirs=[(5, 0), (5, 1), (5, 5), (4, 0)])
    assert int(guarded(key, win)) == 3
    # the opponent threatens column 6 (three in row 5, column 2 taken): only the block avoids a loss
    block = c4_obs(mine=[(5, 2), (4, 2)], theirs=[(5, 3), (5, 4), (5, 5)])
    assert int(leftmost(key, block)) == 0 and int(guarded(key, block)) == 6
    # nothing in sight within 2 plies: the policy's own move
    quiet = c4_obs(mine=[(5, 3)], theirs=[(5, 4)])
    assert int(guarded(key, quiet)) == 0
    # depth 0: the policy itself; the guard carries its depth
    assert lookahead_policy(env, leftmost, 0) is leftmost
    assert lookahead_policy(env, leftmost, 2).lookahead == 2
    # vmappable
    batch = jax.tree.map(lambda *xs: np.stack(xs), win, block, quiet)
    moves = jax.jit(jax.vmap(lookahead_policy(env, leftmost, 2)))(jax.random.split(key, 3), batch)
    assert np.asarray(moves).tolist() == [3, 6, 0]


def test_guard_on_the_generic_search_tic_tac_toe():
    env = jaxenvs.make("TicTacToe-v0", autoreset=False)
    assert env.LOOKAHEAD is None and env.unwrapped.LOOKAHEAD is None  # the generic look-ahead over step_env
    first_free = lambda key, obs: jnp.argmax(jnp.asarray(obs["action_mask"]) != 0).astype(jnp.int32)  # noqa: E731
    guarded = jax.jit(lookahead_policy(env, first_free, 2))
    # X (cells 0, 8) to move against O (3, 4): O threatens 3-4-5, only cell 5 avoids the loss
    obs = _ttt_obs(3**0 * 1 + 3**8 * 1 + 3**3 * 2 + 3**4 * 2)
    assert int(first_free(jax.random.key(0), obs)) == 1 and int(guarded(jax.random.key(0), obs)) == 5


def test_guard_around_tree_search_searches_among_the_moves_it_keeps():
    pytest.importorskip("mctx")
    from jaxenvs.games.search import search_policy

    env = jaxenvs.make("ConnectFour-v0", autoreset=False)
    # a network that wants column 0 only: 4 simulations alone follow it, the guard leaves it the block only
    wants_left = lambda obs: (jnp.asarray([9.0, 0, 0, 0, 0, 0, 0]), jnp.zeros(()))  # noqa: E731
    block = c4_obs(mine=[(5, 2), (4, 2)], theirs=[(5, 3), (5, 4), (5, 5)])
    searching = search_policy(env, wants_left, 2)
    assert int(jax.jit(searching)(jax.random.key(0), block)) == 0
    assert int(jax.jit(lookahead_policy(env, searching, 2))(jax.random.key(0), block)) == 6


def test_bad_depths_and_games_it_cannot_play():
    env = jaxenvs.make("ConnectFour-v0", autoreset=False)
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="depth must be a non-negative int"):
            lookahead_policy(env, random_legal, bad)
    with pytest.raises(ValueError, match="depth must be a positive int"):
        lookahead_values(env, None, 0)
    with pytest.raises(ValueError, match="look-ahead plays two-player zero-sum"):
        lookahead_policy(jaxenvs.make("KuhnPoker-v0"), random_legal, 2)


# ---- budgets: depths and simulations the game and this machine can hold --------------------------
def test_check_budget_refuses_what_the_game_or_the_machine_cannot_hold():
    from jaxenvs.games.search import MAX_SIMULATIONS, check_budget

    t = jaxenvs.make("TicTacToe-v0", autoreset=False)
    c = jaxenvs.make("ConnectFour-v0", autoreset=False)
    gb = 10**9
    cases = [
        (t, dict(lookahead=10), "lookahead 10 is deeper than TicTacToe-v0 can last (9 plies); allowed: 0 to 9"),
        (c, dict(lookahead=43), "lookahead 43 is deeper than ConnectFour-v0 can last (42 plies); allowed: 0 to 42"),
        (c, dict(lookahead=1000), "lookahead 1000 is deeper than ConnectFour-v0 can last (42 plies)"),
        # 9^9 lines of 4 x 13 bytes (the state) = 20.1 GB; 9^7 * 52 = 249 MB fits in 1 GB, 9^8 does not
        (t, dict(lookahead=9, available=gb), "lookahead 9 on TicTacToe-v0 needs about 20.1 GB per move (look-ahead 9 "
                                             "plies: 9^9 = 387,420,489 lines of play per move), more than the 1 GB "
                                             "available; at most 7 plies fit"),
        # Connect Four's declared look-ahead: 16 bytes a line; 7^12 * 16 = 221 GB, 7^10 * 16 = 4.5 GB
        (c, dict(lookahead=12, available=8 * gb), "lookahead 12 on ConnectFour-v0 needs about 221 GB per move"),
        (c, dict(lookahead=12, available=8 * gb), "at most 10 plies fit"),
        (t, dict(search=10**20), f"search 100000000000000000000 simulations per move is more than the "
                                 f"{MAX_SIMULATIONS:,} allowed"),
        # (4096 + 1) nodes of 2 * 13 + 32 * 9 + 64 = 378 bytes
        (t, dict(search=4096, available=10**6), "search 4096 on TicTacToe-v0 needs about 1.55 MB per move, more than "
                                               "the 1 MB available; at most 2,644 simulations fit"),
    ]
    for env, kw, says in cases:
        with pytest.raises(ValueError) as e:
            check_budget(env, **kw)
        assert says in str(e.value) and "\n" not in str(e.value), (kw, str(e.value))
    # what fits: None when quick, one line with the estimate when it takes more than a few seconds
    assert check_budget(t, lookahead=9, available=64 * gb).startswith("TicTacToe-v0, look-ahead 9 plies")
    assert check_budget(c, lookahead=4, moves=84) is None and check_budget(t, search=64, moves=18) is None
    line = check_budget(t, search=4096, moves=18, available=gb)
    assert line == ("TicTacToe-v0, search 4096 simulations per move: about 1.55 MB and 0.41 s per move, 7.37 s for 18 "
                    "moves (compiling not included)"), line
    assert check_budget(t, lookahead=9, available=64 * gb) == check_budget(t, lookahead=9, available=64 * gb, moves=1)


@pytest.fixture(scope="module")
def ttt_run(tmp_path_factory):
    from helpers import tiny_run_dir
    from jaxenvs.train.configs import get_config

    config = get_config("TicTacToe-v0", total_timesteps=64, num_envs=4, num_steps=16, hidden_sizes=(16,),
                        update_epochs=1, num_minibatches=1)
    return tiny_run_dir(tmp_path_factory.mktemp("runs"), "TicTacToe-v0-tiny", config)


def test_play_and_load_policy_refuse_bad_budgets_in_one_line_before_tracing(ttt_run, monkeypatch, capsys):
    from jaxenvs.cli import main as jaxenvs_main
    from jaxenvs.games import search
    from jaxenvs.train import load_policy

    def never(*args, **kwargs):
        raise AssertionError("a refused budget reached the search or the look-ahead")

    monkeypatch.setattr(search, "lookahead_policy", never)
    monkeypatch.setattr(search, "search_policy", never)
    monkeypatch.setattr(search, "_available_memory", lambda: 2 * 10**9)
    cases = [
        (["--lookahead", "10"], dict(lookahead=10), "lookahead 10 is deeper than TicTacToe-v0 can last (9 plies)"),
        (["--lookahead", "9"], dict(lookahead=9), "lookahead 9 on TicTacToe-v0 needs about 20.1 GB per move"),
        (["--search", "99999999999999999999"], dict(search=99999999999999999999),
         "search 99999999999999999999 simulations per move is more than the 1,048,576 allowed"),
    ]
    for argv, kw, says in cases:
        assert jaxenvs_main(["play", str(ttt_run), *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0] and err[0].count(argv[0]) == 1, err
        with pytest.raises(ValueError) as e:
            load_policy(ttt_run, **kw)
        assert says in str(e.value) and f"{argv[0]}: {e.value}" in err[0]
        code = jaxenvs_main(["evaluate", str(ttt_run), *argv, "--opponent", "random"])  # its head-to-head games too
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and err[-1].endswith(f"{argv[0]}: {e.value}") and "Traceback" not in "".join(err)


def test_play_says_the_cost_of_a_slow_budget_and_stops_at_the_games_end(capsys):
    from jaxenvs.cli.players import episode_horizon, say_cost

    env = jaxenvs.make("TicTacToe-v0")
    assert episode_horizon(env, 1000) == 9 and episode_horizon(env, 5) == 5
    assert episode_horizon(jaxenvs.make("GridWorld-v0"), 1000) == 300  # its time limit
    say_cost(env, 4096, 0, episodes=1, horizon=9)  # 9 steps x 2 agents asked
    err = capsys.readouterr().err
    assert err.startswith("estimate: TicTacToe-v0, search 4096 simulations per move: about 1.55 MB and 0.41 s per move,"
                          " 7.37 s for 18 moves") and err.count("\n") == 1, err
    say_cost(env, 16, 0, episodes=1, horizon=9)
    assert capsys.readouterr().err == ""  # quick: nothing said
