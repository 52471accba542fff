"""train/plotting.py: the trainer's policy GIF carries the legend that ``jaxenvs play`` draws; the
learning curve is the same file whether a helper process (train/curve_drawing.py) draws it or this one."""

import jax
import numpy as np
import pytest

import jaxenvs
from jaxenvs.rendering import render_frames
from jaxenvs.rendering.legend import legend_strip
from jaxenvs.train.configs import get_config
from jaxenvs.train.app.plotting import policy_gif
from jaxenvs.train.trainers import make_trainer


def test_policy_gif_appends_the_env_legend_below_each_frame(tmp_path):
    from PIL import Image, ImageSequence

    env_id = "Lottery-v0"  # its colours need a key (as Rock-Paper-Scissors'); GridWorld's frames stay as drawn
    trainer = make_trainer(get_config(env_id, num_envs=2, num_steps=4, total_timesteps=8, hidden_sizes=(8,)))
    obs, _ = trainer.env.reset(jax.random.key(0), trainer.env_params)
    params = trainer.network.init(jax.random.key(1), trainer.flat_obs(jax.tree.map(lambda x: x[None], obs)))
    path = policy_gif(trainer, params, tmp_path / "policy.gif", jax.random.key(2), num_episodes=1, max_frames=4)
    frames = np.stack([np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(Image.open(path))])
    env = jaxenvs.make(env_id, autoreset=False)
    _, state = env.reset(jax.random.key(0))
    height, width = np.asarray(render_frames(env, jax.tree.map(lambda x: x[None], state))).shape[1:3]
    strip = legend_strip(env, width)  # the same strip under every frame
    assert frames.shape[1] > height + strip.shape[0] and frames.shape[2] == width  # the caption strip below it
    below = frames[:, height : height + strip.shape[0]]
    np.testing.assert_array_equal(below, np.broadcast_to(strip, (len(frames),) + strip.shape))


def test_a_single_agent_gif_says_which_episode_and_step_each_frame_shows():
    """GridWorld's GIF plays several episodes one after another: without a caption the target seems
    to jump at each new episode. Each frame says its episode and step; the first of an episode that
    it starts anew, the last how it ended."""
    from jaxenvs.rendering.legend import add_captions
    from jaxenvs.train.app.plotting import _episode_captions, gif_frames

    assert _episode_captions([3, 2], ["reached its end (terminated)", "cut by the time limit (truncated)"]) == [
        "episode 1 of 2: start (a new initial state)", "episode 1 of 2: step 1",
        "episode 1 of 2: step 2: reached its end (terminated)",
        "episode 2 of 2: start (a new initial state)", "episode 2 of 2: step 1: cut by the time limit (truncated)",
    ]
    trainer = make_trainer(get_config("GridWorld-v0", num_envs=2, num_steps=4, total_timesteps=8, hidden_sizes=(8,)))
    obs, _ = trainer.env.reset(jax.random.key(0), trainer.env_params)
    params = trainer.network.init(jax.random.key(1), trainer.flat_obs(jax.tree.map(lambda x: x[None], obs)))
    frames = gif_frames(trainer, params, jax.random.key(2), num_episodes=2, max_frames=12)
    env = jaxenvs.make("GridWorld-v0", autoreset=False)
    _, state = env.reset(jax.random.key(0))
    height = np.asarray(render_frames(env, jax.tree.map(lambda x: x[None], state))).shape[1]
    # the caption strip under each frame is the one add_captions draws for that frame's text: find
    # the episode starts by matching the strips of the two "start" captions
    strips = frames[:, height:]
    start1, start2 = (add_captions(frames[:1, :height], [f"episode {i} of 2: start (a new initial state)"])[0, height:] for i in (1, 2))
    assert (strips[0] == start1).all()
    starts2 = [t for t in range(len(frames)) if (strips[t] == start2).all()]
    assert len(starts2) <= 1 and all((strips[t] != start1).any() for t in range(1, len(frames)))
    # a second GIF of the same trainer (the main job's, after its warm-up) compiles nothing more
    from jaxenvs.train.app import plotting

    def sizes():
        return {k: f.jitted._cache_size() for k, (_, f) in plotting._GIF_FNS.items() if k[0] == id(trainer)}

    before = sizes()
    again = gif_frames(trainer, params, jax.random.key(2), num_episodes=2, max_frames=12)
    assert sizes() == before and len(before) == 2  # the rollouts and the render, each traced once
    np.testing.assert_array_equal(again, frames)


def test_the_gif_programs_compile_cheaply_to_the_same_frames_and_compile_ahead(monkeypatch):
    """The GIF's programs (run once, for milliseconds) take XLA's cheapest compile: the frames are
    those of the optimised compile (forced per program, whatever XLA_FLAGS says); and
    `compile_gif_programs` (the main job's warm-up) compiles what a later `gif_frames` runs, which
    then traces and compiles nothing."""
    import jax._src.compiler as compiler

    from jaxenvs import _fast_compile
    from jaxenvs.train.app import plotting

    cfg = get_config("GridWorld-v0", num_envs=2, num_steps=4, total_timesteps=8, hidden_sizes=(8,))
    fast, optimised = make_trainer(cfg), make_trainer(cfg)
    obs, _ = fast.env.reset(jax.random.key(0), fast.env_params)
    params = fast.network.init(jax.random.key(1), fast.flat_obs(jax.tree.map(lambda x: x[None], obs)))
    assert _fast_compile.compiler_options(jax.default_backend()) == {"xla_backend_optimization_level": 0}
    monkeypatch.setattr(_fast_compile, "compiler_options", lambda backend: {"xla_backend_optimization_level": 3})
    reference = plotting.gif_frames(optimised, params, jax.random.key(2), num_episodes=3, max_frames=20)
    monkeypatch.undo()
    names, real = [], compiler.compile_or_get_cached
    monkeypatch.setattr(compiler, "compile_or_get_cached", lambda b, c, *a, **k: (names.append(1), real(b, c, *a, **k))[1])
    plotting.compile_gif_programs(fast, params, jax.random.key(2), num_episodes=3, max_frames=20)
    assert len(names) == 2  # the rollouts and the render
    frames = plotting.gif_frames(fast, params, jax.random.key(2), num_episodes=3, max_frames=20)
    assert len(names) == 2
    np.testing.assert_array_equal(frames, reference)


def test_a_wide_positive_range_gets_a_log_axis(tmp_path):
    """GridWorld's length ratio from an untrained 76 down to 1.05: a log y axis (a linear one flattens
    everything after the first point); a fraction and a series holding 0 stay linear."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from jaxenvs.train.app import plotting

    ratio = [[76.0, 70.0], [3.0, 2.0], [1.05, 1.1]]
    progress = [{"env_steps": 100 * (i + 1), "success_rate": [0.01 * (i + 1)] * 2, "length_ratio": r} for i, r in enumerate(ratio)]
    steps, ret, length = np.array([100, 200, 300]), np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0]]), np.array([[300.0] * 2, [9.0] * 2, [4.0] * 2])
    panels = plotting.curve_panels(steps, ret, length, progress, env_id="GridWorld-v0")
    logs = {p["label"]: p["log"] for p in panels}
    assert logs["length / optimal length (evaluation)"] and not logs["mean episodic return (training)"]
    assert logs["mean episode length (training)"]  # 300 / 4 = 75 >= 20
    assert not logs["success rate (evaluation)"]  # a fraction on [0, 1] (and 0.01 .. 0.03 spans only 3x)
    # the figure draws what curve_panels says
    scales = {}
    real_savefig = plt.Figure.savefig

    def savefig(fig, *a, **k):
        scales.update({ax.get_ylabel(): ax.get_yscale() for ax in fig.axes})
        return real_savefig(fig, *a, **k)

    plt.Figure.savefig = savefig
    try:
        plotting.plot_learning_curve(steps, ret, length, tmp_path / "curve.png", "GridWorld-v0", progress=progress, env_id="GridWorld-v0")
    finally:
        plt.Figure.savefig = real_savefig
    assert scales["length / optimal length (evaluation) (log scale)"] == "log"
    assert scales["mean episodic return (training)"] == "linear"
    assert (tmp_path / "curve.png").stat().st_size > 0


# ---- the learning curve drawn by a helper process (train.app.curve_drawing) ---------------------------

def _figure():
    from jaxenvs.train.app.plotting import curve_figure

    steps = np.array([100, 200, 300])
    ret = np.array([[1.0, np.nan], [0.5, 1.0], [1.0, 0.0]])
    length = np.array([[300.0, 250.0], [9.0, 12.0], [4.0, 3.0]])
    progress = [{"env_steps": s, "success_rate": [0.1 * i, 0.2 * i], "length_ratio": [76.0 / (i + 1)] * 2}
                for i, s in enumerate(steps)]
    return curve_figure(steps, ret, length, "GridWorld-v0", progress=progress, env_id="GridWorld-v0")


def test_the_helper_process_draws_the_same_png_as_this_process(tmp_path):
    """``jaxenvs-train`` draws its learning curve in a helper process that imported matplotlib while
    the run started; the file is the one this process draws from the same figure, byte for byte."""
    from jaxenvs.train.app.curve_drawing import CurveProcess, draw_learning_curve

    figure = _figure()
    helper = CurveProcess.start()
    drawing = helper.draw(figure, tmp_path / "helper.png")
    assert drawing.result() == tmp_path / "helper.png" and drawing.duration > 0
    assert helper.proc.returncode == 0
    draw_learning_curve(figure, tmp_path / "here.png")
    assert (tmp_path / "helper.png").read_bytes() == (tmp_path / "here.png").read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left
    with pytest.raises(RuntimeError, match="one figure"):
        helper.draw(figure, tmp_path / "again.png")


def test_the_helper_imports_no_jax_runs_at_a_lower_priority_and_ends_when_its_input_closes():
    import os
    import subprocess
    import sys

    from jaxenvs.train.app import curve_drawing

    boot = curve_drawing._BOOT.replace("m.serve()", "m.serve(); print(sorted(n for n in ('jax', 'jaxenvs', 'flax') if n in sys.modules), 'matplotlib.pyplot' in sys.modules, os.nice(0) if hasattr(os, 'nice') else None)")
    out = subprocess.run([sys.executable, "-c", boot, curve_drawing.__file__], input=b"", capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    modules, pyplot, nice = out.stdout.decode().split()
    assert modules == "[]" and pyplot == "True"
    assert nice == "None" or int(nice) == min(19, os.nice(0) + curve_drawing.NICE)  # below this process's priority


def test_an_unused_helper_is_ended_and_a_dead_one_is_replaced_by_drawing_here(tmp_path, capsys):
    from jaxenvs.train.app.curve_drawing import CurveProcess, draw_learning_curve

    unused = CurveProcess.start()
    unused.close()
    assert unused.proc.returncode is not None  # killed (or ended): nothing left running
    figure = _figure()
    dead = CurveProcess.start()
    dead.proc.kill()
    dead.proc.wait()
    assert dead.draw(figure, tmp_path / "curve.png").result() == tmp_path / "curve.png"
    assert "the learning-curve process failed" in capsys.readouterr().err
    draw_learning_curve(figure, tmp_path / "here.png")
    assert (tmp_path / "curve.png").read_bytes() == (tmp_path / "here.png").read_bytes()
    # a figure the helper cannot write is drawn here too, and fails here the same way (a missing folder)
    failing = CurveProcess.start()
    with pytest.raises(FileNotFoundError):
        failing.draw(figure, tmp_path / "no" / "such" / "curve.png").result()
    assert "No such file or directory" in capsys.readouterr().err


def test_a_per_update_series_that_never_moves_is_a_note_not_a_flat_panel():
    from jaxenvs.train.app.plotting import curve_figure

    steps = np.array([100, 200, 300])
    ret = np.zeros((3, 2))
    length = np.array([[9.0, 8.0], [7.0, 6.0], [5.0, 6.0]])
    progress = [{"env_steps": s, "loss_vs_perfect_seat0": [0.5 - 0.1 * i] * 2} for i, s in enumerate(steps)]
    training = {"illegal_rate": np.zeros((3, 2)), "win_seat0": np.array([[0.2, 0.3], [0.5, 0.6], [0.8, 0.9]])}
    figure = curve_figure(steps, ret, length, "TicTacToe-v0", progress=progress, env_id="TicTacToe-v0", training=training)
    names = [name for *_, name in figure["series"]]
    assert "illegal_rate" not in names and "win_seat0" in names  # the masked policy's rate is 0 by construction
    assert "illegal-move rate of the training updates: 0 throughout (not shown)" in figure["notes"]
