"""Trained policies as objects (`jaxenvs.train.load_policy`), opponents on the command lines
(`jaxenvs evaluate RUN --opponent ...`, `jaxenvs play RUN --opponent ...`) and
replays of turn-based games that say whose move it is and how each game ended.

One run directory serves every test: PPO on Tic-Tac-Toe for one update (compiled with XLA's cheap
backend settings), i.e. an untrained network whose greedy policy is still a fixed, arbitrary
function of the board: good enough to check that it is read, masked and seated correctly.

Exact: the greedy policy's move on all 4,520 decision positions is the most probable legal move
of the network's own logits; the outcome probabilities of that policy against random-legal play
follow by enumerating the game (`jaxenvs.games.tic_tac_toe.outcome_probabilities`), and the jitted
head-to-head (`train.policy.versus`) must match them within 4.5 binomial standard deviations
(`sqrt(p (1 - p) / N)`; a false alarm about once in 150,000 checks).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import jaxenvs
from jaxenvs.games import tic_tac_toe as gv
from jaxenvs.train.checkpoint import CheckpointError
from helpers import CHEAP_XLA, tiny_run_dir

N = 1000  # games per seat against random-legal play in an evaluation
# the programs here are tiny: XLA's cheap backend settings halve their compile time
CHEAP = CHEAP_XLA


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from jaxenvs.train.configs import get_config

    config = get_config("TicTacToe-v0", total_timesteps=64, num_envs=4, num_steps=16, hidden_sizes=(16,),
                        update_epochs=1, num_minibatches=1)
    return tiny_run_dir(tmp_path_factory.mktemp("runs"), "TicTacToe-v0-tiny", config)


@pytest.fixture(scope="module")
def policy(run_dir):
    from jaxenvs.train import load_policy

    return load_policy(run_dir)


def decision_observations():
    """Every reachable Tic-Tac-Toe decision position as the mover's observation (its codes too)."""
    codes = gv.decision_positions()
    digits = (codes[:, None] // 3 ** np.arange(9)) % 3
    planes = np.stack([digits == 1, digits == 2], axis=-1).reshape(-1, 3, 3, 2).astype(np.int32)
    return codes, {"observation": planes, "action_mask": (digits == 0).astype(np.uint8)}


SAMPLES = 4000


@pytest.fixture(scope="module")
def greedy_moves(run_dir, policy):
    """One compiled program: the loaded greedy policy's moves and the network's own logits on every
    decision position, and `SAMPLES` draws of the sampling policy in one position with 5 legal moves
    and in the same position with an all-zero mask (a non-mover)."""
    from jaxenvs.train import load_policy
    from jaxenvs.train.checkpoint import load_run

    codes, obs = decision_observations()
    trainer = policy.trainer
    sampler = load_policy(run_dir, greedy=False)
    params = jax.tree.map(lambda x: x[0], load_run(policy.run_dir)[1].params)
    i = int(np.flatnonzero(obs["action_mask"].sum(-1) == 5)[0])
    one = jax.tree.map(lambda x: x[i], obs)
    idle = {"observation": one["observation"], "action_mask": np.zeros(9, np.uint8)}

    def run(key, obs, one, idle):
        k1, k2, k3 = jax.random.split(key, 3)
        moves = jax.vmap(policy)(jax.random.split(k1, len(codes)), obs)
        logits, _ = trainer.network.apply(params, jax.vmap(trainer.preprocess)(obs))
        draws = jax.vmap(sampler, in_axes=(0, None))(jax.random.split(k2, SAMPLES), one)
        idle_draws = jax.vmap(sampler, in_axes=(0, None))(jax.random.split(k3, 100), idle)
        return moves, logits, draws, idle_draws, jax.vmap(policy, in_axes=(0, None))(jax.random.split(k3, 2), idle)

    args = (jax.random.key(0), obs, one, idle)
    out = jax.device_get(jax.jit(run).lower(*args).compile(compiler_options=CHEAP)(*args))
    return dict(codes=codes, obs=obs, i=i, one=one, **dict(zip(("moves", "logits", "draws", "idle_draws", "idle_greedy"), out)))


def test_greedy_policy_plays_the_most_probable_legal_move_everywhere(greedy_moves):
    g = greedy_moves
    codes, moves, logits = g["codes"], g["moves"], g["logits"]
    legal = g["obs"]["action_mask"] == 1
    assert moves.dtype == np.int32 and moves.shape == (len(codes),)
    assert legal[np.arange(len(codes)), moves].all()  # never an illegal move
    best = np.argmax(np.where(legal, logits, -np.inf), axis=-1)  # the network's own preference
    np.testing.assert_array_equal(moves, best)
    # masking matters: without it the network's favourite cell is often taken
    assert (~legal[np.arange(len(codes)), np.argmax(logits, axis=-1)]).sum() > 100


def test_sampled_policy_draws_from_the_legal_softmax(greedy_moves):
    g = greedy_moves
    mask, logits = g["one"]["action_mask"], g["logits"][g["i"]].astype(np.float64)
    legal = np.flatnonzero(mask)
    counts = np.bincount(g["draws"], minlength=9)
    assert counts[mask == 0].sum() == 0 and counts.sum() == SAMPLES
    p = np.exp(logits[legal] - logits[legal].max())
    assert stats.chisquare(counts[legal], SAMPLES * p / p.sum()).pvalue > 1e-4
    # a non-mover (all-zero mask) gets action 0, sampled or greedy
    assert (g["idle_draws"] == 0).all() and (g["idle_greedy"] == 0).all()


def exact_versus_random(greedy_moves) -> dict:
    """The greedy policy's exact win / draw / loss per seat against random-legal play, by
    enumerating the game with its move table."""
    table = np.zeros((gv.NUM_CODES, 9))
    table[greedy_moves["codes"], greedy_moves["moves"]] = 1.0
    rand = gv.random_table()
    first = gv.outcome_probabilities(table, rand)  # (first mover wins, second wins, draw)
    second = gv.outcome_probabilities(rand, table)
    return {0: dict(win=first[0], loss=first[1], draw=first[2]), 1: dict(win=second[1], loss=second[0], draw=second[2])}


def test_load_policy_checks_its_input(run_dir, tmp_path, policy):
    from jaxenvs.train import load_policy

    with pytest.raises(CheckpointError, match=f"run directory {str(tmp_path / 'nope')!r} does not exist"):
        load_policy(tmp_path / "nope")
    with pytest.raises(CheckpointError, match=f"{str(tmp_path)!r} is not a run directory .* no config.json"):
        load_policy(tmp_path)
    with pytest.raises(ValueError, match="seed 1: the run in .* has 1 seed"):
        load_policy(run_dir, seed=1)
    for bad in (0.5, "0", True, None):  # never rounded or read as seed 0
        with pytest.raises(ValueError, match=r"seed must be an int \(the index of one of the run's seeds\), got"):
            load_policy(run_dir, seed=bad)
    for bad in ("no", "yes", 1, None):  # a non-empty string is not True
        with pytest.raises(ValueError, match=r"greedy must be True .* or False .*, got"):
            load_policy(run_dir, greedy=bad)
    for bad in (-1, 1.5, "8", True):
        with pytest.raises(ValueError, match="search must be a non-negative int"):
            load_policy(run_dir, search=bad)
    env = jaxenvs.make("TicTacToe-v0")
    obs, _ = env.reset(jax.random.key(0))
    with pytest.raises(ValueError, match=r"takes one agent's observation .* index one agent's row"):
        jax.eval_shape(policy, jax.random.key(0), obs)  # the joint observation of both agents
    assert policy.env_id == "TicTacToe-v0" and policy.seed == 0 and policy.greedy


def test_a_searching_policy_is_jittable_vmappable_and_legal(run_dir):
    """load_policy(run, search=8): one compiled program plays a batch of positions, every move legal."""
    pytest.importorskip("mctx")
    from jaxenvs.train import load_policy

    searching = load_policy(run_dir, search=8)
    assert searching.search == 8 and searching.greedy
    _, obs = decision_observations()
    pick = np.random.default_rng(0).choice(len(obs["action_mask"]), 64, replace=False)
    batch = jax.tree.map(lambda x: x[pick], obs)
    moves = np.asarray(jax.jit(jax.vmap(searching))(jax.random.split(jax.random.key(0), 64), batch))
    assert (batch["action_mask"][np.arange(64), moves] == 1).all()


def test_a_run_plays_with_its_own_play_search(run_dir, tmp_path):
    """A run whose config records play_search N: load_policy(run) searches N simulations per move,
    search=0 plays the network alone, search=M overrides; a run without it plays the network alone."""
    from jaxenvs.train import load_policy
    from jaxenvs.train.configs import get_config

    assert load_policy(run_dir).search == 0
    config = get_config("TicTacToe-v0", total_timesteps=64, num_envs=4, num_steps=16, hidden_sizes=(16,),
                        update_epochs=1, num_minibatches=1, play_search=8)
    searching = tiny_run_dir(tmp_path, "TicTacToe-v0-search", config)
    assert load_policy(searching).search == 8
    assert load_policy(searching, search=0).search == 0 and load_policy(searching, search=3).search == 3


def test_a_run_plays_with_its_own_play_lookahead(run_dir, tmp_path):
    """A run whose config records play_lookahead N: load_policy(run) plays among the moves N plies of
    exact look-ahead score best (it takes the win it sees, which the untrained network does not),
    lookahead=0 plays the network alone, lookahead=M overrides; bad values are clear errors."""
    from jaxenvs.train import load_policy
    from jaxenvs.train.configs import get_config

    plain = load_policy(run_dir)
    assert plain.lookahead == 0
    config = get_config("TicTacToe-v0", total_timesteps=64, num_envs=4, num_steps=16, hidden_sizes=(16,),
                        update_epochs=1, num_minibatches=1, play_lookahead=2)
    looking = tiny_run_dir(tmp_path, "TicTacToe-v0-lookahead", config)
    guarded = load_policy(looking)
    assert guarded.lookahead == 2
    assert load_policy(looking, lookahead=0).lookahead == 0 and load_policy(looking, lookahead=3).lookahead == 3
    network = load_policy(looking, lookahead=0)
    # positions where the mover (X, to move) wins at once in one cell: the guard always takes it
    planes = np.zeros((3, 9, 2), np.int32)
    for i, (mine, theirs, win) in enumerate([([0, 1], [3, 4], 2), ([0, 4], [1, 2], 8), ([2, 4], [0, 1], 6)]):
        planes[i, mine, 0] = 1
        planes[i, theirs, 1] = 1
    batch = {"observation": planes.reshape(3, 3, 3, 2), "action_mask": (planes.sum(-1) == 0).astype(np.uint8)}
    keys = jax.random.split(jax.random.key(0), 3)
    assert np.asarray(jax.jit(jax.vmap(guarded))(keys, batch)).tolist() == [2, 8, 6]
    assert np.asarray(jax.jit(jax.vmap(network))(keys, batch)).tolist() != [2, 8, 6]  # the network alone misses one
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="lookahead must be a non-negative int"):
            load_policy(looking, lookahead=bad)


def test_opponents_by_name_and_their_mistakes(run_dir):
    from jaxenvs.cli.args import UsageError
    from jaxenvs.cli.players import named_opponent
    from jaxenvs.games import OpponentError, make_opponent, random_legal
    from jaxenvs.train import load_policy
    from jaxenvs.games.tic_tac_toe import perfect

    ttt = jaxenvs.make("TicTacToe-v0", autoreset=False)
    assert make_opponent("random", ttt)[1] is random_legal
    assert make_opponent("perfect", ttt)[1] is perfect
    policy = load_policy(run_dir)
    assert make_opponent(policy, ttt, label="mine") == ("mine", policy)
    assert make_opponent(policy, ttt) == ("policy", policy)
    with pytest.raises(OpponentError, match=r"is a path, not an opponent's name: a trained run plays as the policy "
                                            r"jaxenvs\.train\.load_policy\("):
        make_opponent(str(run_dir), ttt)  # the library loads no run: the command lines do (named_opponent)
    label, other = named_opponent(ttt, str(run_dir))
    assert label == f"run {run_dir}" and other.env_id == "TicTacToe-v0" and other.search == 0
    with pytest.raises(OpponentError, match="'heuristic' plays ConnectFour-v0 only, not TicTacToe-v0; for TicTacToe-v0 "
                                            "choose 'random' .*, 'perfect' .*, or a run directory"):
        make_opponent("heuristic", ttt)
    with pytest.raises(OpponentError, match="unknown opponent 'minimax'"):
        make_opponent("minimax", ttt)
    c4 = jaxenvs.make("ConnectFour-v0", autoreset=False)
    with pytest.raises(UsageError, match="was trained on TicTacToe-v0, not ConnectFour-v0"):
        named_opponent(c4, str(run_dir))
    with pytest.raises(OpponentError, match="two-player zero-sum games; GridWorld-v0 has 1 agent"):
        make_opponent("random", jaxenvs.make("GridWorld-v0"))


# ---- the command lines ------------------------------------------------------------------------

def run_cli(args, cwd, cache):
    flags = " ".join([os.environ.get("XLA_FLAGS", ""), "--xla_backend_optimization_level=0"]).strip()
    env = {**os.environ, "JAXENVS_CACHE_DIR": str(cache), "XLA_FLAGS": flags}
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def test_evaluate_reports_win_draw_loss_per_seat(run_dir, tmp_path, greedy_moves):
    # from another directory, the run given relative to it
    rel = os.path.relpath(run_dir, tmp_path)
    p = run_cli(["jaxenvs", "evaluate", rel, "--opponent", "perfect", "--games", "300", "--json"], tmp_path,
                os.environ["JAXENVS_TEST_CACHE_DIR"])
    result = json.loads(p.stdout)
    # TicTacToe-v0's tuned entry judges the run (a 64-step run is far from its bar: exit 1)
    assert p.returncode == (0 if result["solved"] else 1), p.stderr
    assert result["solved"] is False and result["num_episodes"] == N
    seed = result["seeds"][0]
    # its games against random-legal play per seat match the exact enumeration of the same policy
    for s, exact in exact_versus_random(greedy_moves).items():
        for k, p in exact.items():
            tol = 4.5 * np.sqrt(p * (1 - p) / N)
            assert abs(seed[f"{k}_vs_random_seat{s}"] - p) <= tol, (s, k, seed[f"{k}_vs_random_seat{s}"], p, tol)
    assert seed["illegal_vs_random"] == 0.0
    (label, h2h), = result["head_to_head"].items()
    assert label.startswith("perfect")
    for s in ("seat0", "seat1"):
        st = h2h[0][s]
        assert st["win"] == 0.0 and st["games"] == 300  # nobody beats the perfect player
        assert st["draw"] + st["loss"] == pytest.approx(1.0) and st["illegal_a"] == st["illegal_b"] == 0.0


def test_a_game_without_a_tuned_entry_is_measured_against_random_play(run_dir, policy, greedy_moves):
    """A two-player game with no evaluation of its own is judged against random-legal play per seat
    (never by its self-play mean return of 0), with no verdict."""
    from jaxenvs.train.checkpoint import load_run
    from jaxenvs.train.grading import evaluate_game_vs_random

    params = jax.tree.map(lambda x: x[0], load_run(run_dir)[1].params)
    out = evaluate_game_vs_random(policy.trainer, params, jax.random.key(3), num_episodes=N)
    assert out["solved"] is None and out["illegal_per_game"] == 0.0
    for s, exact in exact_versus_random(greedy_moves).items():
        for k, p in exact.items():
            tol = 4.5 * np.sqrt(p * (1 - p) / N)
            assert abs(out[f"{k}_seat{s}"] - p) <= tol, (s, k, out[f"{k}_seat{s}"], p, tol)


def test_command_line_opponent_mistakes_are_one_line(run_dir, capsys):
    from jaxenvs.cli import main as jaxenvs_main

    assert jaxenvs_main(["evaluate", str(run_dir), "--opponent", "heuristic"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "opponent 'heuristic' plays ConnectFour-v0 only" in err[0] and "choose 'random'" in err[0]
    assert jaxenvs_main(["play", str(run_dir), "--opponent", "minimax"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown opponent 'minimax'; for TicTacToe-v0 choose 'random'" in err[0]
    assert jaxenvs_main(["play", "GridWorld-v0", "--opponent", "random"]) == 2
    assert "two-player zero-sum games" in capsys.readouterr().err
    assert jaxenvs_main(["play", str(run_dir), "--seat", "1"]) == 2
    assert "--seat is the policy's seat against an --opponent" in capsys.readouterr().err
    assert jaxenvs_main(["play", str(run_dir), "--opponent", "random", "--seat", "2"]) == 2
    assert "--seat: expected 0 or 1, got '2'" in capsys.readouterr().err
    assert jaxenvs_main(["play", "TicTacToe-v0", "--lookahead", "2"]) == 2
    assert "--lookahead N is for a trained policy" in capsys.readouterr().err
    for args, says in ((["--lookahead", "-1", "--opponent", "random"], "--lookahead: expected an integer >= 0, got '-1'"),
                       (["--lookahead", "2"], "give --opponent too")):
        assert jaxenvs_main(["evaluate", str(run_dir), *args]) == 2 and says in capsys.readouterr().err


def test_play_against_an_opponent_replays_whose_move_and_the_result(run_dir, tmp_path, monkeypatch, capsys):
    from jaxenvs.cli import main as jaxenvs_main

    monkeypatch.chdir(tmp_path)  # the run given relative to another directory
    rel = os.path.relpath(run_dir, tmp_path)
    assert jaxenvs_main(["play", rel, "--opponent", "perfect", "--seat", "1", "--episodes", "2", "--render", "text"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"TicTacToe-v0: greedy policy of {rel} (seed 0) in seat 1 (agent 1, second to move) vs perfect")
    # the perfect player in seat 0 never loses
    results = [line.split()[-1] for line in out.splitlines() if line.startswith("episode ")]
    assert len(results) == 2 and set(results) <= {"draw", "loss"}
    for i in (1, 2):
        block = out.split(f"--- episode {i}, t=0\n")[1].split(f"--- episode {i} ends")[0]
        status = [line for line in block.splitlines() if "to move" in line or line.startswith("game over")]
        # one status line per ply, alternating X and O from X, then the result
        plies = [s for s in status if "to move" in s]
        assert plies == [f"agent {t % 2} ({'XO'[t % 2]}) to move" for t in range(len(plies))]
        assert len(status) == len(plies) + 1 and status[-1] in ("game over: draw", "game over: agent 0 (X) wins")
    assert out.count("--- episode 1 ends after") == 1
    assert f"the policy in seat 1: 0 win, {results.count('draw')} draw, {results.count('loss')} loss" in out


# ---- replays of every game: whose move, and how it ended -----------------------------------------

def states_after(env_id, actions):
    env = jaxenvs.make(env_id, autoreset=False)
    _, state = env.reset(jax.random.key(0))
    texts = [env.render_text(state)]
    step = jax.jit(env.step)
    for a in actions:
        _, state, *_ = step(jax.random.key(1), state, jnp.array([a, a], jnp.int32))
        texts.append(env.render_text(state))
    return [t.splitlines()[-1] for t in texts]


def test_tictactoe_status_lines():
    assert states_after("TicTacToe-v0", [0, 3, 1, 4, 2]) == [
        "agent 0 (X) to move", "agent 1 (O) to move", "agent 0 (X) to move", "agent 1 (O) to move",
        "agent 0 (X) to move", "game over: agent 0 (X) wins"]
    assert states_after("TicTacToe-v0", [0, 0])[-1] == "game over: agent 1 (O) made an illegal move: agent 0 (X) wins"
    assert states_after("TicTacToe-v0", [0, 1, 2, 4, 3, 5, 7, 6, 8])[-1] == "game over: draw"


def test_connect_four_status_lines():
    lines = states_after("ConnectFour-v0", [0, 1, 0, 1, 0, 1, 0])
    assert lines[:3] == ["agent 0 (X) to move", "agent 1 (O) to move", "agent 0 (X) to move"]
    assert lines[-1] == "game over: agent 0 (X) wins"
    assert states_after("ConnectFour-v0", [3, 9])[-1] == "game over: agent 1 (O) made an illegal move: agent 0 (X) wins"


def test_kuhn_poker_status_lines():
    # two chance deals (the step's key draws the cards), then the betting
    fold = states_after("KuhnPoker-v0", [0, 0, 1, 0])
    assert fold[0].endswith("chance deals") and fold[2].endswith("player 0 to act") and fold[3].endswith("player 1 to act")
    assert fold[-1].endswith("'bp', returns [1.0, -1.0]: player 1 folds, player 0 wins 1")
    showdown = states_after("KuhnPoker-v0", [0, 0, 0, 1, 1])[-1]
    assert "bets 'pbb'" in showdown and ": showdown " in showdown and showdown.endswith(" wins 2")
    assert states_after("KuhnPoker-v0", [0, 0, 5])[-1].endswith(": player 0 made an illegal move, player 1 wins 1")


def test_gif_frames_get_a_caption_per_ply(tmp_path):
    from jaxenvs.rendering.legend import add_captions, status_captions

    env = jaxenvs.make("TicTacToe-v0", autoreset=False)
    _, s0 = env.reset(jax.random.key(0))
    _, s1, *_ = env.step(jax.random.key(0), s0, jnp.array([4, 0], jnp.int32))
    states = [jax.tree.map(lambda *x: np.stack(x), s0, s1)]
    captions = status_captions(env, states)
    assert captions == ["episode 1: agent 0 (X) to move", "episode 1: agent 1 (O) to move"]
    frames = np.zeros((2, 192, 192, 3), np.uint8)
    out = add_captions(frames, captions)
    assert out.shape[:3] == (2, out.shape[1], 192) and out.shape[1] > 192
    np.testing.assert_array_equal(out[:, :192], frames)  # the picture is untouched
    assert (out[0, 192:] != out[1, 192:]).any()  # the captions differ as the texts do
    with pytest.raises(ValueError, match="one caption per frame: 2 frames, 1 captions"):
        add_captions(frames, captions[:1])
    assert status_captions(jaxenvs.make("GridWorld-v0"), states) is None  # not a turn-based game


def test_the_runs_policy_gif_has_a_caption_per_frame(policy, tmp_path):
    import imageio.v3 as iio

    from jaxenvs.train.checkpoint import load_run
    from jaxenvs.train.app.plotting import policy_gif

    params = jax.tree.map(lambda x: x[0], load_run(policy.run_dir)[1].params)
    path = policy_gif(policy.trainer, params, tmp_path / "policy.gif", jax.random.key(0), num_episodes=2)
    frames = iio.imread(path, index=None)
    assert frames.shape[1] > 192 and frames.shape[2] == 192  # the 192 x 192 board with a caption strip below
    assert 2 * 6 <= len(frames) <= 2 * 10  # two games of 5 to 9 plies, their first and last states included


def test_a_single_agent_policy_takes_the_observation_without_agent_axis():
    from jaxenvs.train.configs import get_config
    from jaxenvs.train.policy import make_policy
    from jaxenvs.train.trainers import make_trainer

    trainer = make_trainer(get_config("GridWorld-v0", num_envs=2, num_steps=2, hidden_sizes=(8,)))
    cells = np.random.default_rng(0).integers(0, 5, (2, 64, 2)).astype(np.int32)
    obs = {"agent": cells[0], "target": cells[1]}  # 64 GridWorld observations (5 x 5 grid)
    init_args = (jax.random.key(1), jnp.zeros((1, 4)))
    params = jax.jit(trainer.network.init).lower(*init_args).compile(compiler_options=CHEAP)(*init_args)
    policy = make_policy(trainer, params)
    def both(keys, obs):
        return jax.vmap(policy)(keys, obs), trainer.act(params, obs)

    args = (jax.random.split(jax.random.key(2), 64), obs)
    got, want = jax.jit(both).lower(*args).compile(compiler_options=CHEAP)(*args)
    np.testing.assert_array_equal(got, want)  # the trainer's own greedy actions
    with pytest.raises(ValueError, match=r"takes one observation .*\(for a batch, jax.vmap the policy\)"):
        jax.eval_shape(policy, jax.random.key(0), obs)


def test_the_evaluation_header_says_what_it_counted():
    """Kuhn poker's evaluation is exact (no episodes played); the games count games per seat."""
    from jaxenvs.train.grading import format_table

    def header(env_id, metrics):
        return format_table({"env_id": env_id, "num_episodes": 1000, "solved": True,
                             "seeds": [dict(metrics, solved=True)]}).splitlines()[0]

    assert header("KuhnPoker-v0", {"exploitability": 0.05}) == (
        "evaluation: KuhnPoker-v0, exact (enumerated, no episodes played), stochastic policy (1 seed)")
    assert header("ConnectFour-v0", {"win_vs_random_seat0": 1.0}) == (
        "evaluation: ConnectFour-v0, 1000 games per seat per seed, greedy policy among the moves its play_lookahead "
        "plies of exact look-ahead score best; the rows *_search: with the run's play_search simulations of tree search "
        "per move (1 seed)")
    assert header("TicTacToe-v0", {"win_vs_random_seat0": 1.0}) == (
        "evaluation: TicTacToe-v0, 1000 games per seat per seed, greedy policy (1 seed)")


def test_the_evaluation_table_says_each_meaning_once():
    """Rows whose meanings differ in a few words (win/draw/loss, first/second mover) show only those
    words after the first; a meaning of its own stays whole."""
    from jaxenvs.train import tuned
    from jaxenvs.train.grading import format_table

    names = ["win_vs_random_seat0", "win_vs_random_seat1", "draw_vs_random_seat0", "illegal_vs_random"]
    table = format_table({"env_id": "TicTacToe-v0", "num_episodes": 1000, "solved": True,
                          "seeds": [dict({k: 0.5 for k in names}, solved=True)]})
    meaning = {line.split()[0]: line.split("0.5", 1)[1].strip() for line in table.splitlines() if line.split()[0] in names}
    full = tuned.entry("TicTacToe-v0").metrics
    assert meaning["win_vs_random_seat0"] == full["win_vs_random_seat0"].meaning
    assert meaning["win_vs_random_seat1"] == "... second ..."
    assert meaning["draw_vs_random_seat0"] == "... draws as first ..."
    assert meaning["illegal_vs_random"] == full["illegal_vs_random"].meaning
    # the shorthand stands for the full sentence: the words around it are the row above's
    assert full["win_vs_random_seat1"].meaning == full["win_vs_random_seat0"].meaning.replace("first mover", "second mover")
    assert table.count("against random-legal play") == 2  # once for the win/draw rows, once for the illegal one


def test_connect_four_evaluation_judges_the_policy_as_played(monkeypatch):
    """The ConnectFour evaluation's rows and verdict, with the games replaced by fixed results: the
    progress evaluation plays the network alone against random and the heuristic; the full one (the
    run's look-ahead) adds the heuristic's
    orders, heuristic-soft and no-blunder (all five with the bar), and, for a run with play_search,
    the searched rows against the five, which then decide the verdict."""
    from types import SimpleNamespace

    from jaxenvs.games import connect_four as c4
    from jaxenvs.games.opponents import random_legal
    from jaxenvs.train import evaluations, tuned

    names = {random_legal: "random", c4.heuristic: "heuristic", c4.heuristic_left: "left",
             c4.heuristic_right: "right", c4.heuristic_soft: "soft", c4.no_blunder: "no_blunder"}
    calls, wins, lookaheads = [], {}, []

    def fake(trainer, params, key, opponent, num_games, search=0, lookahead=None):
        calls.append((names[opponent], num_games, search))
        lookaheads.append(lookahead)
        w = wins.get((names[opponent], search), [1.0, 1.0])
        return {"win": w, "draw": [0.0, 0.0], "loss": [1 - w[0], 1 - w[1]], "illegal": [0.0, 0.0]}

    monkeypatch.setattr(evaluations, "versus_opponent", fake)
    greedy = SimpleNamespace(config=SimpleNamespace(play_search=0))
    searching = SimpleNamespace(config=SimpleNamespace(play_search=16))
    key = jax.random.key(0)

    out = evaluations.evaluate_connect_four(greedy, None, key, 64)
    assert calls == [("random", 64, 0), ("heuristic", 64, 0)] and out["solved"]
    assert lookaheads == [0, 0] and out["lookahead"] == 0  # progress: the network alone
    assert "win_vs_heuristic_left_seat0" not in out
    calls.clear()
    out = evaluations.evaluate_connect_four(greedy, None, key, 1000)
    assert calls == [("random", 1000, 0), ("heuristic", 1000, 0), ("left", 1000, 0), ("right", 1000, 0),
                     ("soft", 1000, 0), ("no_blunder", 1000, 0)]
    assert out["solved"] and "search" not in out and out["lookahead"] == 0
    assert set(lookaheads[2:]) == {None}  # the full evaluation: the run's own play_lookahead
    wins[("right", 0)] = [1.0, 0.7]  # a greedy order below the bar as second mover: not solved
    assert not evaluations.evaluate_connect_four(greedy, None, key, 1000)["solved"]
    del wins[("right", 0)]
    for name in ("soft", "no_blunder"):  # the stochastic players have the bar too
        wins[(name, 0)] = [0.89, 0.9]
        assert not evaluations.evaluate_connect_four(greedy, None, key, 1000)["solved"]
        wins[(name, 0)] = [0.9, 0.74]
        assert not evaluations.evaluate_connect_four(greedy, None, key, 1000)["solved"]
        wins[(name, 0)] = [0.9, 0.75]
        assert evaluations.evaluate_connect_four(greedy, None, key, 1000)["solved"]
    wins[("right", 0)] = [1.0, 0.7]
    wins[("soft", 0)] = [0.1, 0.1]
    calls.clear()
    out = evaluations.evaluate_connect_four(searching, None, key, 1000)
    g = tuned.SEARCH_GAMES
    assert calls[6:] == [("heuristic", g, 16), ("left", g, 16), ("right", g, 16), ("soft", g, 16),
                         ("no_blunder", g, 16)]
    assert out["search"] == 16 and out["win_vs_heuristic_right_search_seat1"] == 1.0
    assert out["solved"]  # the searched rows decide, the greedy rows' 0.7 and 0.1 do not
    wins[("heuristic", 16)] = [0.95, 0.74]
    assert not evaluations.evaluate_connect_four(searching, None, key, 1000)["solved"]
    wins[("heuristic", 16)] = [0.95, 0.75]
    wins[("random", 0)] = [0.95, 0.89]
    assert not evaluations.evaluate_connect_four(searching, None, key, 1000)["solved"]
    assert evaluations.evaluate_connect_four(SimpleNamespace(config=SimpleNamespace(play_lookahead=4)), None, key,
                                             1000)["lookahead"] == 4
    for name in ("heuristic_left_search", "heuristic_right_search", "heuristic_soft", "no_blunder",
                 "heuristic_soft_search", "no_blunder_search"):
        assert f"win_vs_{name}_seat0" in tuned.entry("ConnectFour-v0").metrics
