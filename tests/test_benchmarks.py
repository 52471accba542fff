"""The benchmark scripts' own arithmetic: what they print must be what they claim to measure."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _script(name: str, file: str):
    """The benchmark script ``benchmarks/<file>`` loaded as the module ``name``."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "benchmarks", file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def train_speed():
    return _script("train_speed", "train_speed.py")


def test_chunk_length_is_the_largest_divisor_within_the_chunk_count(train_speed):
    assert train_speed.chunk_length(196, 20) == 7  # one length for every chunk: a divisor of 196, at most ceil(196 / 20)
    assert train_speed.chunk_length(200, 20) == 10 and train_speed.chunk_length(59, 20) == 1


def test_ppo_flops_per_env_step_matches_the_network_shapes(train_speed):
    """XLA's FLOP counts against the multiply-adds of the layers: GridWorld's 4 observation
    features (agent and target cells), hidden (16, 8), 4 logits and 1 value."""
    from jaxenvs.train.configs import get_config
    from jaxenvs.train.trainers import make_trainer

    cfg = get_config("GridWorld-v0", num_envs=4, num_steps=8, num_minibatches=2, update_epochs=3, hidden_sizes=(16, 8))
    out = train_speed.ppo_flops_per_env_step(make_trainer(cfg))
    macs = (4 * 16 + 16 * 8 + 8 * 4) + (4 * 16 + 16 * 8 + 8 * 1)  # actor + critic, per row
    rows, mb_rows = 4, 4 * 8 // 2
    # Forward: 2 FLOPs per multiply-add, plus biases, tanh and the softmax (at most 35% more here).
    assert 2 * macs * rows <= out["forward_flops"] <= 1.35 * 2 * macs * rows
    # A gradient step: forward, weight gradients and input gradients (all but the first layer's),
    # so between 2.5x and 4x the forward pass over a minibatch (Adam adds ~10 FLOPs per weight).
    per_row_forward = out["forward_flops"] / rows
    assert 2.5 * per_row_forward * mb_rows <= out["grad_step_flops"] <= 4 * per_row_forward * mb_rows
    # Bookkeeping: 8 forward passes and 3 epochs x 2 minibatches of gradient steps per 32 env steps.
    expected = (8 * out["forward_flops"] + 3 * 2 * out["grad_step_flops"]) / 32
    assert out["flops_per_env_step"] == pytest.approx(expected, rel=1e-12)



@pytest.fixture(scope="module")
def steps_per_sec():
    return _script("steps_per_sec_games", "steps_per_sec.py")


def test_games_rows_carry_the_paired_ratio_against_pgx(steps_per_sec):
    rows = [
        {"env": "TicTacToe-v0", "method": "jaxenvs vmap", "num_envs": 1024, "steps_per_sec": 2e6, "compile_s": 1.0, "vs_pgx": 2.5},
        {"env": "TicTacToe-v0", "method": "pgx", "num_envs": 1024, "steps_per_sec": 8e5, "compile_s": 1.0},
        {"env": "TicTacToe-v0", "method": "openspiel loop", "num_envs": 1, "steps_per_sec": 2e4, "compile_s": None},
    ]
    table = steps_per_sec.summary(rows).splitlines()
    assert table[0].endswith("| vs Pgx |") and table[1].count("|") == 8
    assert table[2].endswith("| 2.50x |") and table[3].endswith("| - |") and table[4].endswith("| - |")
    # without games the table keeps its six columns
    assert "Pgx" not in steps_per_sec.summary([{**rows[2], "env": "GridWorld-v0", "method": "python loop"}])


def test_only_the_games_run_replaces_the_committed_games_results(steps_per_sec, capsys):
    games = os.path.join(ROOT, steps_per_sec.COMMITTED_GAMES)
    with pytest.raises(SystemExit) as e:
        steps_per_sec.main(["--envs", "TicTacToe-v0", "--num-envs", "1024", "--out", games])
    assert e.value.code == 2 and "may replace the committed games' results" in capsys.readouterr().err
    p = steps_per_sec.build_parser()
    args = p.parse_args(["--envs", *steps_per_sec.GAME_ENVS, "--num-envs", "1024", "4096", "--out", games])
    assert steps_per_sec.check_out(p, args) == games


def test_games_mode_bars_and_report(train_speed, capsys):
    """The games mode's "solved" bar per seat and its printed comparison (a hand-made result: the
    runs themselves take minutes; `python benchmarks/train_speed.py --games --quick` is the smoke run)."""
    assert train_speed.game_bar("TicTacToe-v0") == (0.92, 0.74) and train_speed.game_bar("ConnectFour-v0") == (0.95, 0.95)
    assert train_speed.meets_bar("TicTacToe-v0", (0.92, 0.74))
    assert not train_speed.meets_bar("TicTacToe-v0", (0.99, 0.73))  # every seat must reach its bar
    assert not train_speed.meets_bar("ConnectFour-v0", (0.94, 1.0))

    def run(rate, solved_s):
        curve = [{"win_seat0": 0.95, "win_seat1": 0.80}]
        return {"decisions_per_sec": rate, "time_to_solve_s": solved_s, "steps_to_solve": 1000, "env_steps": 1000,
                "solved_by": "win-rate bar", "curve": curve}

    train_speed.print_game("TicTacToe-v0", {"jaxenvs": {**run(50_000.0, 2.0), "compile_s": 9.0}, "sb3": run(500.0, 30.0)})
    out = capsys.readouterr().out
    assert ">= 0.92 as first mover and >= 0.74 as second" in out
    assert "jaxenvs vs MaskablePPO: 100.0x decisions/s, 15.0x sooner solved" in out
    assert "last win rate 0.950 / 0.800 (seat 0 / seat 1)" in out and "jaxenvs PPO (self-play)" in out
    mixed = {**run(50_000.0, 2.0), "config": {"random_opponents": 1.0}}
    train_speed.print_game("ConnectFour-v0", {"jaxenvs": mixed, "sb3": run(500.0, 30.0)})
    assert "jaxenvs PPO (100% vs rnd)" in capsys.readouterr().out


def test_pgx_baseline_plays_zero_sum_games():
    """The Pgx side of steps_per_sec's games rows (the bench extra's pgx) runs: tic-tac-toe's rewards
    sum to 0 over the players at every step, so the rollout's total is exactly 0."""
    pytest.importorskip("pgx")
    import sys

    import jax

    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import baselines
    finally:
        sys.path.remove(os.path.join(ROOT, "benchmarks"))
    run = baselines.make_pgx_rollout("TicTacToe-v0", num_envs=4, num_steps=64)
    assert float(jax.jit(run)(jax.random.key(0))) == 0.0


def test_permutation_speed_times_both_shuffles_and_they_agree(capsys):
    """benchmarks/permutation_speed.py: a ratio per size, printed; what it times are equal shuffles."""
    import jax
    import numpy as np

    bench = _script("permutation_speed", "permutation_speed.py")
    ratios = bench.main(["--sizes", "64", "--rounds", "1", "--calls", "2"])
    assert list(ratios) == [64] and ratios[64] > 0
    assert "64 indices" in capsys.readouterr().out
    from jaxenvs.train.permutation import minibatch_permutation

    key = jax.random.key(3)
    np.testing.assert_array_equal(minibatch_permutation(key, 64), jax.random.permutation(key, 64))


def test_the_default_run_is_the_quick_one_and_only_full_replaces_the_committed_results(steps_per_sec, capsys):
    p = steps_per_sec.build_parser()
    quick, full = p.parse_args([]), p.parse_args(["--full"])
    steps_per_sec.fill_defaults(quick)
    steps_per_sec.fill_defaults(full)
    assert (quick.envs, quick.num_envs, quick.repeats, quick.target_steps) == (["GridWorld-v0", "PointEnv-v0"], [1, 4096],
                                                                              3, 1_000_000)
    assert full.envs == steps_per_sec.FULL_ENVS and full.num_envs == [1, 64, 1024, 4096, 16384] and full.repeats == 5
    given = p.parse_args(["--full", "--repeats", "7"])
    steps_per_sec.fill_defaults(given)
    assert given.repeats == 7 and given.target_steps == 4_000_000  # a flag given wins over the sweep's value
    committed = os.path.join(ROOT, steps_per_sec.COMMITTED)
    with pytest.raises(SystemExit) as e:
        steps_per_sec.main(["--out", committed])  # the default (quick) run
    assert e.value.code == 2 and "only --full (with its own --envs and --num-envs" in capsys.readouterr().err
    assert steps_per_sec.check_out(p, p.parse_args(["--full", "--out", committed])) == committed


def test_the_printed_table_has_a_line_per_env_and_batch_and_a_column_per_method(steps_per_sec):
    rows = [
        {"env": "GridWorld-v0", "method": "lean JAX", "num_envs": 1, "steps_per_sec": 4.5e6, "compile_s": 0.5},
        {"env": "GridWorld-v0", "method": "jaxenvs vmap", "num_envs": 1, "steps_per_sec": 5.55e6, "compile_s": 1.0,
         "vs_lean": 1.21},
        {"env": "GridWorld-v0", "method": "python loop", "num_envs": 1, "steps_per_sec": 112_000, "compile_s": None},
        {"env": "PointEnv-v0", "method": "jaxenvs vmap", "num_envs": 4096, "steps_per_sec": 2.1e7, "compile_s": 1.0},
    ]
    lines = steps_per_sec.text_table(rows).splitlines()
    assert lines[0] == "steps/s of a random policy; (Nx): the paired ratio against lean JAX"
    assert lines[1].split() == ["env", "envs", "jaxenvs", "vmap", "lean", "JAX", "python", "loop"]
    assert lines[2].split() == ["GridWorld-v0", "1", "5.55M", "(1.21x)", "4.50M", "112k"]
    assert lines[3].split() == ["PointEnv-v0", "4096", "21.00M", "-", "-"] and len(lines) == 4
    assert len({len(line) for line in lines[1:]}) == 1  # aligned columns


def test_the_per_measurement_lines_keep_their_columns_with_the_reset_pool(steps_per_sec, capsys):
    rows = [
        {"env": "GridWorld-v0", "method": "jaxenvs VectorEnv", "num_envs": 64, "steps_per_sec": 4.5e7, "compile_s": 0.5},
        {"env": "GridWorld-v0", "method": "jaxenvs VectorEnv, reset pool", "num_envs": 64, "steps_per_sec": 5.1e7,
         "compile_s": 0.6},
        {"env": "GridWorld-v0", "method": "python loop", "num_envs": 1, "steps_per_sec": 112_000, "compile_s": None},
    ]
    steps_per_sec.print_rows(rows)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and len({line.index(" envs ") for line in lines}) == 1  # the envs column lines up
    assert len({line.index(" steps/s") for line in lines}) == 1  # and the steps/s column
    assert lines[1].split()[:5] == ["GridWorld-v0", "jaxenvs", "VectorEnv,", "reset", "pool"]


def test_curricula_intervals_and_target_follow_their_definitions():
    """benchmarks/curricula.py: the Student-t interval of 3 seeds (t_{0.975, 2} = 4.3027) and the
    target's three conditions, each failing on its own."""
    bench = _script("curricula_bench", "curricula.py")
    mean, low, high = bench.interval([0.2, 0.4, 0.6])
    half = 4.302652729911275 * 0.2 / 3 ** 0.5
    assert mean == pytest.approx(0.4) and low == pytest.approx(0.4 - half) and high == pytest.approx(0.4 + half)
    with pytest.raises(ValueError, match="at least 2"):
        bench.interval([0.5])
    rows = lambda plr, ratio: {"dr": {"cvar": (0.10, 0.05, 0.15), "ratio": 1.0},  # noqa: E731
                               "plr": {"cvar": plr, "ratio": ratio}, "accel": {"cvar": (0.1, 0.0, 0.2), "ratio": 1.0}}
    assert bench.target(rows((0.30, 0.25, 0.35), 0.95))["met"]
    assert not bench.target(rows((0.30, 0.25, 0.35), 0.85))["met"]  # 15% slower than none
    assert not bench.target(rows((0.30, 0.12, 0.48), 0.95))["met"]  # intervals overlap
    assert not bench.target(rows((0.18, 0.16, 0.20), 0.95))["met"]  # apart, but only 8 points
