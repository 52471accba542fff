"""Fixed opponents (`jaxenvs.games`: `opponents`, `connect_four`) and the exact Tic-Tac-Toe
solution (`jaxenvs.games.tic_tac_toe`).

Exact: the game-tree enumerator's outcome probabilities (random vs random is 737/1260, 121/420,
8/63), the perfect player's move sets on all 4520 decision positions against the solved table, the
Connect Four heuristic's winning-move detection against a brute-force check on random boards.
Statistical, with stated tolerances: the JAX policies played through `jaxenvs.games.matches` on a
contract-shaped Tic-Tac-Toe (tests/turn_based_toys.py) reproduce the exact outcome probabilities
within 4.5 binomial standard deviations; samplers are uniform by a chi-square test (p > 1e-4).
"""

import jax
import numpy as np
import pytest
from scipy import stats

import jaxenvs
from jaxenvs.games import OpponentError, make_opponent, named_opponents
from jaxenvs.games import tic_tac_toe as gv
from jaxenvs.games.connect_four import heuristic as strong_heuristic
from jaxenvs.games.connect_four import landing_cells as connect_four_landing_cells
from jaxenvs.games.connect_four import lines as connect_four_lines
from jaxenvs.games.connect_four import win_block as connect_four_heuristic
from jaxenvs.games.connect_four import winning_moves as connect_four_winning_moves
from jaxenvs.games.matches import head_to_head
from jaxenvs.games.opponents import random_legal
from jaxenvs.games.tic_tac_toe import code_of as tictactoe_code
from jaxenvs.games.tic_tac_toe import perfect as tictactoe_perfect
from jaxenvs.games.tic_tac_toe import perfect_moves as tictactoe_perfect_moves
from turn_based_toys import TicTacToe

RANDOM_VS_RANDOM = (737 / 1260, 121 / 420, 8 / 63)  # first wins, second wins, draw


# ---- the exact enumerator ---------------------------------------------------------------------

def test_enumerator_gives_the_known_tictactoe_values():
    rand, perfect = gv.random_table(), gv.minimax_table()
    np.testing.assert_allclose(gv.outcome_probabilities(rand, rand), RANDOM_VS_RANDOM, rtol=0, atol=1e-12)
    assert np.round(gv.outcome_probabilities(rand, rand), 4).tolist() == [0.5849, 0.2881, 0.1270]
    first = gv.outcome_probabilities(perfect, rand)
    assert round(first[0], 4) == 0.9678 and first[1] == 0.0  # never loses
    second = gv.outcome_probabilities(rand, perfect)
    assert second[0] == 0.0 and round(second[1], 4) == 0.7775
    both = gv.outcome_probabilities(perfect, perfect)
    assert both[0] == both[1] == 0.0 and both[2] == pytest.approx(1.0, abs=1e-12)  # always a draw


def test_solution_counts_and_values():
    assert len(gv.decision_positions()) == 4520  # 5478 reachable positions, 958 of them terminal
    q = gv.move_values()
    assert np.all(q[0] == 0)  # every first move draws under perfect play
    # X in the centre, O on an edge, X to move: X wins by force; O in a corner: a draw
    assert _value(gv.board_code(_obs_from_cells(mine=[4], theirs=[1]))) == 1
    assert _value(gv.board_code(_obs_from_cells(mine=[4], theirs=[0]))) == 0
    # X to move with two in a line open: a win; O (to move) facing it must block
    assert _value(gv.board_code(_obs_from_cells(mine=[0, 1], theirs=[4, 8]))) == 1
    assert set(np.flatnonzero(gv.optimal_moves()[gv.board_code(_obs_from_cells(mine=[4], theirs=[0, 1]))])) == {2}


def test_enumerator_refuses_a_table_that_is_not_a_policy():
    bad = gv.random_table().copy()
    bad[0] = 0.0
    bad[0, 4] = 0.5
    with pytest.raises(ValueError, match="row 0 .* is not a probability vector"):
        gv.outcome_probabilities(bad, gv.random_table())
    with pytest.raises(ValueError, match="must be a"):
        gv.outcome_probabilities(np.zeros((9, 9)), gv.random_table())


def _obs_from_cells(mine, theirs):
    obs = np.zeros((3, 3, 2), np.int32)
    for c in mine:
        obs[c // 3, c % 3, 0] = 1
    for c in theirs:
        obs[c // 3, c % 3, 1] = 1
    return obs


def _value(code):
    return gv.move_values()[code].max()


# ---- Tic-Tac-Toe perfect player ---------------------------------------------------------------

def _decision_observations():
    codes = gv.decision_positions()
    digits = (codes[:, None] // 3 ** np.arange(9)) % 3
    planes = np.stack([digits == 1, digits == 2], axis=-1).reshape(-1, 3, 3, 2).astype(np.int32)
    return codes, {"observation": planes, "action_mask": (digits == 0).astype(np.uint8)}


@jax.jit
def perfect_many(key, obs):
    """The perfect player's move sets and one move each for a batch of observations."""
    keys = jax.random.split(key, obs["action_mask"].shape[0])
    return jax.vmap(tictactoe_perfect_moves)(obs), jax.vmap(tictactoe_perfect)(keys, obs)


def test_perfect_player_plays_exactly_the_optimal_moves_everywhere():
    codes, obs = _decision_observations()
    np.testing.assert_array_equal(jax.jit(jax.vmap(tictactoe_code))(obs["observation"]), codes)
    np.testing.assert_array_equal(gv.board_code(obs["observation"]), codes)
    best, moves = jax.device_get(perfect_many(jax.random.key(0), obs))
    np.testing.assert_array_equal(best, gv.optimal_moves()[codes])
    assert best[np.arange(len(codes)), moves].all()


def test_perfect_player_is_uniform_among_optimal_moves_and_a_non_mover_gets_zero():
    n = len(gv.decision_positions())  # the batch size perfect_many already compiled for
    obs = {"observation": np.zeros((n, 3, 3, 2), np.int32), "action_mask": np.ones((n, 9), np.uint8)}
    obs["action_mask"][-1] = 0  # the last one is not to move
    _, moves = jax.device_get(perfect_many(jax.random.key(1), obs))
    assert stats.chisquare(np.bincount(moves[:-1], minlength=9)).pvalue > 1e-4  # all 9 first moves draw
    assert moves[-1] == 0
    with pytest.raises(ValueError, match=r"must have shape \[3, 3, 2\]"):
        jax.eval_shape(tictactoe_perfect, jax.random.key(0), {"observation": np.zeros((2, 3, 3, 2)), "action_mask": np.ones(9)})


@pytest.fixture(scope="module")
def tictactoe():
    return TicTacToe()


N = 1500


def rbg_key(seed):
    """A key of the `unsafe_rbg` implementation: programs drawing from it compile about twice as
    fast as with the default threefry keys (the matches tests cover those)."""
    return jax.random.key(seed, impl="unsafe_rbg")


def _close(got, p, n=N):
    return abs(got - p) <= 4.5 * np.sqrt(p * (1 - p) / n)


def test_jax_policies_reproduce_the_exact_values_in_play(tictactoe):
    rr = head_to_head(tictactoe, random_legal, random_legal, rbg_key(2), N)
    first, second, draw = RANDOM_VS_RANDOM
    for seat, (win, loss) in (("seat0", (first, second)), ("seat1", (second, first))):
        s = rr[seat]
        assert _close(s["win"], win) and _close(s["loss"], loss) and _close(s["draw"], draw), (seat, s)
    exact_first = gv.outcome_probabilities(gv.minimax_table(), gv.random_table())
    exact_second = gv.outcome_probabilities(gv.random_table(), gv.minimax_table())
    pr = head_to_head(tictactoe, tictactoe_perfect, random_legal, rbg_key(3), N)
    assert pr["seat0"]["loss"] == 0.0 and pr["seat1"]["loss"] == 0.0  # the perfect player never loses
    assert _close(pr["seat0"]["win"], exact_first[0]), pr["seat0"]
    assert _close(pr["seat1"]["win"], exact_second[1]), pr["seat1"]
    for s in (rr["seat0"], rr["seat1"], pr["seat0"], pr["seat1"]):
        assert s["illegal_a"] == s["illegal_b"] == 0.0


def test_perfect_against_perfect_always_draws(tictactoe):
    pp = head_to_head(tictactoe, tictactoe_perfect, tictactoe_perfect, rbg_key(4), 200)
    assert pp["seat0"]["draw"] == pp["seat1"]["draw"] == 1.0


# ---- random legal -----------------------------------------------------------------------------

def test_random_legal_is_uniform_over_legal_actions():
    masks = np.tile(np.array([0, 1, 1, 0, 1, 0, 0], np.uint8), (6000, 1))
    masks[-1] = 0  # not to move
    keys = jax.random.split(jax.random.key(5), len(masks))
    acts = np.asarray(jax.jit(jax.vmap(random_legal))(keys, {"action_mask": masks}))
    assert acts[-1] == 0
    counts = np.bincount(acts[:-1], minlength=7)
    assert counts[masks[0] == 0].sum() == 0
    assert stats.chisquare(counts[masks[0] == 1]).pvalue > 1e-4
    with pytest.raises(TypeError, match="observation dict"):
        jax.eval_shape(random_legal, jax.random.key(0), np.ones(7))
    with pytest.raises(ValueError, match="one agent, no batch axis"):
        jax.eval_shape(random_legal, jax.random.key(0), {"action_mask": np.ones((2, 7))})
    c4 = jaxenvs.make("ConnectFour-v0")
    assert make_opponent("random", c4)[1] is random_legal
    assert list(named_opponents(c4)) == ["random", "heuristic", "no-blunder", "win-block", "heuristic-left",
                                         "heuristic-right", "heuristic-soft", "heuristic-noisy"]
    assert list(named_opponents(jaxenvs.make("TicTacToe-v0"))) == ["random", "perfect"]
    with pytest.raises(OpponentError, match="unknown opponent 'minimax'; for ConnectFour-v0 choose 'random'"):
        make_opponent("minimax", c4)


# ---- Connect Four heuristic -------------------------------------------------------------------

def _board(mine=(), theirs=()):
    """int32[6, 7, 2] from (row, col) cells; row 0 is the top."""
    b = np.zeros((6, 7, 2), np.int32)
    for r, c in mine:
        b[r, c, 0] = 1
    for r, c in theirs:
        b[r, c, 1] = 1
    return b


def _obs(board):
    return {"observation": board, "action_mask": (board[0].sum(-1) == 0).astype(np.uint8)}


heuristic_many = jax.jit(jax.vmap(connect_four_heuristic, in_axes=(0, None)))


def _choices(board, n=2000, seed=0):
    return np.asarray(heuristic_many(jax.random.split(jax.random.key(seed), n), _obs(board)))


def test_lines_and_landing_cells():
    lines = connect_four_lines()
    assert lines.shape == (69, 4) and len({tuple(sorted(line)) for line in lines.tolist()}) == 69
    b = _board(mine=[(5, 0), (4, 0)], theirs=[(r, 3) for r in range(6)])
    np.testing.assert_array_equal(jax.jit(connect_four_landing_cells)(b), [3 * 7 + 0, 36, 37, -1, 39, 40, 41])


def test_heuristic_wins_blocks_or_plays_random():
    # horizontal win at column 3 (bottom row)
    win = _board(mine=[(5, 0), (5, 1), (5, 2)], theirs=[(4, 0), (4, 1)])
    assert set(_choices(win)) == {3}
    # block a vertical threat at column 4 (no win of its own)
    block = _board(mine=[(5, 0), (5, 1)], theirs=[(5, 4), (4, 4), (3, 4)])
    assert set(_choices(block)) == {4}
    # a win beats a block
    both = _board(mine=[(5, 0), (5, 1), (5, 2)], theirs=[(5, 6), (4, 6), (3, 6)])
    assert set(_choices(both)) == {3}
    # diagonal win: (5,0) (4,1) (3,2) + (2,3), supported by column 3 holding 3 pieces
    diag = _board(mine=[(5, 0), (4, 1), (3, 2), (5, 3)], theirs=[(5, 1), (5, 2), (4, 2), (4, 3), (3, 3)])
    assert set(_choices(diag)) == {3}
    # a floating gap is no win: three in row 4 but column 3 is empty, so a piece lands on row 5
    floating = _board(mine=[(4, 0), (4, 1), (4, 2), (5, 2)], theirs=[(5, 0), (5, 1), (5, 5), (4, 5)])
    assert set(_choices(floating)) == set(range(7))  # no win, no block: all 7 columns at random
    # two winning columns: both chosen, uniformly
    two = _board(mine=[(5, 1), (5, 2), (5, 3)], theirs=[(4, 1), (4, 2)])
    counts = np.bincount(_choices(two), minlength=7)
    assert set(np.flatnonzero(counts)) == {0, 4}
    assert stats.binomtest(int(counts[0]), 2000, 0.5).pvalue > 1e-4
    # no threats: uniform among legal columns; a full column is never chosen
    full = _board(mine=[(r, 2) for r in range(0, 6, 2)], theirs=[(r, 2) for r in range(1, 6, 2)])
    counts = np.bincount(_choices(full), minlength=7)
    assert counts[2] == 0 and stats.chisquare(np.delete(counts, 2)).pvalue > 1e-4
    # a non-mover gets 0
    idle = {"observation": full, "action_mask": np.zeros(7, np.uint8)}
    assert set(np.asarray(heuristic_many(jax.random.split(jax.random.key(0), 2000), idle))) == {0}


def _brute_force_wins(plane, filled):
    out = np.zeros(7, bool)
    for c in range(7):
        empty = np.flatnonzero(~filled[:, c])
        if len(empty) == 0:
            continue
        b = plane.copy()
        b[empty[-1], c] = True
        r0 = empty[-1]
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            run = 1
            for sgn in (1, -1):
                r, cc = r0 + sgn * dr, c + sgn * dc
                while 0 <= r < 6 and 0 <= cc < 7 and b[r, cc]:
                    run, r, cc = run + 1, r + sgn * dr, cc + sgn * dc
            out[c] |= run >= 4
    return out


def test_winning_moves_match_a_brute_force_check_on_random_boards():
    rng = np.random.default_rng(0)
    boards = []
    for _ in range(300):
        b = np.zeros((6, 7, 2), np.int32)
        for ply in range(rng.integers(0, 30)):
            cols = np.flatnonzero(b[0].sum(-1) == 0)
            c = rng.choice(cols)
            r = np.flatnonzero(b[:, c].sum(-1) == 0)[-1]
            b[r, c, ply % 2] = 1
        boards.append(b)
    boards = np.stack(boards)
    f = jax.jit(jax.vmap(lambda b, p: connect_four_winning_moves(b[..., p], connect_four_landing_cells(b)), in_axes=(0, None)))
    for p in (0, 1):
        got = np.asarray(f(boards, p))
        want = np.stack([_brute_force_wins(b[..., p] == 1, b.sum(-1) > 0) for b in boards])
        np.testing.assert_array_equal(got, want)
    assert want.any()  # the sample holds winning moves to find


strong_many = jax.jit(jax.vmap(strong_heuristic, in_axes=(0, None)))


def _strong(board, n=500, seed=0):
    return set(np.asarray(strong_many(jax.random.split(jax.random.key(seed), n), _obs(board))).tolist())


def test_strong_heuristic_wins_blocks_avoids_blunders_and_prefers_the_centre():
    assert _strong(_board()) == {3}  # empty board: the centre
    assert _strong(_board(mine=[(5, 0), (5, 1), (5, 2)], theirs=[(4, 0), (4, 1)])) == {3}  # win
    assert _strong(_board(mine=[(5, 0), (5, 1)], theirs=[(5, 4), (4, 4), (3, 4)])) == {4}  # block
    # the opponent has three in row 4 (columns 4-6) and needs (4, 3); column 3 is empty, so a piece there
    # lands on row 5 and lets them win next move: the heuristic avoids it (the centre otherwise)
    b = _board(mine=[(5, 0), (5, 1), (5, 4), (5, 5)], theirs=[(4, 4), (4, 5), (4, 6), (5, 6)])
    assert _strong(b) == {2, 4}
    # ties at equal distance from the centre are drawn uniformly
    sides = _board(mine=[(r, 3) for r in range(0, 6, 2)], theirs=[(r, 3) for r in range(1, 6, 2)])
    assert _strong(sides) == {2, 4}


# ---- the heuristic's variants: the same candidates, chosen otherwise ------------------------------

from jaxenvs.games import connect_four as c4_players  # noqa: E402

_VARIANTS = {name: jax.jit(jax.vmap(getattr(c4_players, name), in_axes=(0, None)))
             for name in ("heuristic_left", "heuristic_right", "heuristic_soft", "heuristic_noisy")}


def _variant(name, board, n=4000, seed=0):
    return np.asarray(_VARIANTS[name](jax.random.split(jax.random.key(seed), n), _obs(board)))


# a blunder to avoid: the opponent needs (4, 3) and column 3 is empty (the candidates are 0 1 2 4 5 6)
_BLUNDER = _board(mine=[(5, 0), (5, 1), (5, 4), (5, 5)], theirs=[(4, 4), (4, 5), (4, 6), (5, 6)])
_SIDES = _board(mine=[(r, 3) for r in range(0, 6, 2)], theirs=[(r, 3) for r in range(1, 6, 2)])  # column 3 full
_WIN = _board(mine=[(5, 0), (5, 1), (5, 2)], theirs=[(4, 0), (4, 1)])
_BLOCK = _board(mine=[(5, 0), (5, 1)], theirs=[(5, 4), (4, 4), (3, 4)])


def test_heuristic_candidates_are_win_else_block_else_safe():
    cand = jax.jit(c4_players.candidates)
    np.testing.assert_array_equal(cand(_obs(_board())), [True] * 7)
    np.testing.assert_array_equal(cand(_obs(_WIN)), np.arange(7) == 3)
    np.testing.assert_array_equal(cand(_obs(_BLOCK)), np.arange(7) == 4)
    np.testing.assert_array_equal(cand(_obs(_BLUNDER)), np.arange(7) != 3)
    np.testing.assert_array_equal(cand(_obs(_SIDES)), np.arange(7) != 3)
    # no safe move at all: every legal column (the opponent wins above each of 0 and 6, the rest are full)
    cols = [1, 2, 3, 4, 5]
    full = _board(mine=[(r, c) for c in cols for r in range(6) if (r + c) % 2 == 0],
                  theirs=[(r, c) for c in cols for r in range(6) if (r + c) % 2 == 1])
    trap = full.copy()
    trap[1:, 0] = 0
    trap[1:, 6] = 0
    np.testing.assert_array_equal(cand(_obs(trap)), np.isin(np.arange(7), [0, 6]))


def test_left_and_right_heuristics_follow_their_centre_orders_deterministically():
    for name, sides, blunder in (("heuristic_left", 2, 2), ("heuristic_right", 4, 4)):
        assert set(_variant(name, _board(), 50)) == {3}
        assert set(_variant(name, _WIN, 50)) == {3} and set(_variant(name, _BLOCK, 50)) == {4}
        assert set(_variant(name, _SIDES, 50)) == {sides}
        assert set(_variant(name, _BLUNDER, 50)) == {blunder}
    # with 2, 3 and 4 full, the left order goes on to 1, the right to 5
    wide = _board(mine=[(r, c) for c in (2, 3, 4) for r in range(6) if (r + c) % 2 == 0],
                  theirs=[(r, c) for c in (2, 3, 4) for r in range(6) if (r + c) % 2 == 1])
    assert set(_variant("heuristic_left", wide, 50)) == {1} and set(_variant("heuristic_right", wide, 50)) == {5}


def test_soft_heuristic_draws_its_candidates_with_centre_weights():
    n = 20000
    counts = np.bincount(_variant("heuristic_soft", _board(), n), minlength=7)
    w = np.array([1, 2, 3, 4, 3, 2, 1], float)
    assert stats.chisquare(counts, n * w / w.sum()).pvalue > 1e-4
    counts = np.bincount(_variant("heuristic_soft", _BLUNDER, n, seed=1), minlength=7)
    assert counts[3] == 0
    w[3] = 0
    keep = w > 0
    assert stats.chisquare(counts[keep], n * w[keep] / w.sum()).pvalue > 1e-4
    assert set(_variant("heuristic_soft", _WIN, 200)) == {3} and set(_variant("heuristic_soft", _BLOCK, 200)) == {4}
    idle = {"observation": _board(), "action_mask": np.zeros(7, np.uint8)}
    assert set(np.asarray(_VARIANTS["heuristic_soft"](jax.random.split(jax.random.key(0), 50), idle))) == {0}


def test_noisy_heuristic_plays_a_random_legal_move_a_fifth_of_the_time():
    n = 20000
    counts = np.bincount(_variant("heuristic_noisy", _WIN, n), minlength=7)
    noise = c4_players.NOISE
    p = np.full(7, noise / 7)
    p[3] += 1 - noise
    assert stats.chisquare(counts, n * p).pvalue > 1e-4
    counts = np.bincount(_variant("heuristic_noisy", _SIDES, n, seed=2), minlength=7)
    assert counts[3] == 0  # never an illegal move, noise or not


def test_game_hooks_are_declared_with_defaults_and_wrappers_forward_them():
    """The games' hooks are attributes `Environment` declares (None or empty by default), hold
    objects (no "module:function" strings) and read the same through the wrappers `make` adds."""
    from jaxenvs.core import GAME_HOOKS, Environment
    from jaxenvs.games import connect_four as c4

    assert {h: getattr(Environment, h) for h in GAME_HOOKS if h != "OPPONENTS"} == dict.fromkeys(
        set(GAME_HOOKS) - {"OPPONENTS"})
    assert dict(Environment.OPPONENTS) == {}
    for env_id in ("TicTacToe-v0", "ConnectFour-v0", "KuhnPoker-v0", "GridWorld-v0"):
        env = jaxenvs.make(env_id)
        assert env is not env.unwrapped  # TimeLimit / AutoReset
        for hook in GAME_HOOKS:
            assert getattr(env, hook) == getattr(env.unwrapped, hook), (env_id, hook)
        for name, (policy, meaning) in env.unwrapped.OPPONENTS.items():
            assert callable(policy) and not isinstance(policy, str) and meaning, (env_id, name)
    ttt, cf, kuhn = (jaxenvs.make(i) for i in ("TicTacToe-v0", "ConnectFour-v0", "KuhnPoker-v0"))
    assert ttt.OPPONENTS["perfect"][0] is tictactoe_perfect and cf.OPPONENTS["heuristic"][0] is strong_heuristic
    assert cf.LOOKAHEAD is c4.lookahead_values and ttt.LOOKAHEAD is None and cf.MAX_PLIES == 42
    assert kuhn.state_from_observation is None and kuhn.move_at is None and kuhn.observer_view is not None
    assert ttt.observer_view is None and ttt.move_at is not None and ttt.MOVE_KEY.startswith("cells")
    assert named_opponents(cf)["no-blunder"].policy is c4.no_blunder
