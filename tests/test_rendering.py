"""Rendering and saving rollouts: GridWorld's exact pixels, batched rendering, GIF/MP4 round trips,
the pygame window (dummy video driver), text pictures, every registered env's render under
jit + vmap (the rollout utility that feeds them is tested in test_rollout.py)."""

import importlib.util
import sys

import imageio.v3 as iio
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import require

import jaxenvs
from jaxenvs.envs.grid_world import EnvParams, EnvState, GridWorld
from jaxenvs.rendering import check_video_path, play_human, render_frames, save_gif, save_mp4, save_video

WHITE, BLACK, RED, BLUE = (255, 255, 255), (0, 0, 0), (255, 0, 0), (0, 0, 255)
HAS_FFMPEG = importlib.util.find_spec("imageio_ffmpeg") is not None


@pytest.fixture(scope="module")
def grid():
    return GridWorld()


def gw_state(agent, target):
    return EnvState(agent=jnp.asarray(agent, jnp.int32), target=jnp.asarray(target, jnp.int32))


def cell_centre(cell, size, window=512):
    """(row, col) of the pixel at the centre of grid cell (x, y)."""
    pix = window / size
    return int((cell[1] + 0.5) * pix), int((cell[0] + 0.5) * pix)


# ---- GridWorld's picture ---------------------------------------------------------------------
@pytest.mark.parametrize("size", [5, 7])
def test_grid_world_pixels(grid, size):
    params = EnvParams(size=size)
    agent, target = (1, size - 2), (size - 1, 0)
    frame = np.asarray(jax.jit(grid.render)(gw_state(agent, target), params))
    assert frame.shape == (512, 512, 3) and frame.dtype == np.uint8
    pix = 512 / size
    assert tuple(frame[cell_centre(agent, size)]) == BLUE
    assert tuple(frame[cell_centre(target, size)]) == RED
    # the target square fills its cell up to the grid lines; the agent is a circle of radius pix/3
    assert tuple(frame[int(target[1] * pix + 4), int(target[0] * pix + 4)]) == RED
    ay, ax = cell_centre(agent, size)
    assert tuple(frame[ay, int(ax + pix / 3 - 2)]) == BLUE
    assert tuple(frame[ay, int(ax + pix / 3 + 2)]) == WHITE
    assert tuple(frame[int(agent[1] * pix + 4), int(agent[0] * pix + 4)]) == WHITE  # cell corner
    # an empty cell is white; every grid line (at multiples of pix) is black over the whole board
    assert tuple(frame[cell_centre((size // 2, size // 2 + 1), size)]) == WHITE
    for k in range(1, size):
        line = int(k * pix)
        assert (frame[:, line] == 0).all() and (frame[line, :] == 0).all(), k
    colours = {tuple(c) for c in frame.reshape(-1, 3)}
    assert colours == {WHITE, BLACK, RED, BLUE}


def test_render_1024_states_in_one_call(grid):
    keys = jax.random.split(jax.random.key(0), 1024)
    _, states = jax.vmap(grid.reset, in_axes=(0, None))(keys, grid.default_params)
    frames = render_frames(grid, states)
    assert frames.shape == (1024, 512, 512, 3) and frames.dtype == np.uint8
    agent, target = np.asarray(states.agent), np.asarray(states.target)
    idx = np.arange(1024)
    a_rc = np.array([cell_centre(a, 5) for a in agent])
    t_rc = np.array([cell_centre(t, 5) for t in target])
    np.testing.assert_array_equal(frames[idx, a_rc[:, 0], a_rc[:, 1]], np.broadcast_to(BLUE, (1024, 3)))
    np.testing.assert_array_equal(frames[idx, t_rc[:, 0], t_rc[:, 1]], np.broadcast_to(RED, (1024, 3)))
    render_one = jax.jit(grid.render)
    for i in (0, 511, 1023):  # whole frames equal one-at-a-time (jitted) renders
        np.testing.assert_array_equal(frames[i], np.asarray(render_one(jax.tree.map(lambda x: x[i], states))))


def test_render_frames_batch_axes_and_wrapped_states(grid_rollout):
    env, traj, frames = grid_rollout
    assert frames.shape == (24, 512, 512, 3)
    # a wrapped env's states render through inner_state: same picture as the base env's state
    base_states = env.unwrapped_state(traj.state)
    np.testing.assert_array_equal(frames, render_frames(env.unwrapped, base_states, env.default_params))
    # no batch axis -> one frame; two batch axes -> [T, B, H, W, 3]
    one = jax.tree.map(lambda x: x[5], traj.state)
    np.testing.assert_array_equal(render_frames(env, one), frames[5])
    two = jax.tree.map(lambda x: x[:6].reshape(2, 3, *x.shape[1:]), traj.state)
    np.testing.assert_array_equal(render_frames(env, two), frames[:6].reshape(2, 3, 512, 512, 3))
    with pytest.raises(ValueError, match="does not fit GridWorld's state leaf shape"):
        render_frames(env.unwrapped, gw_state(np.zeros((4, 2)), np.zeros((3, 2))))


# ---- files -----------------------------------------------------------------------------------
def test_gif_round_trip(grid_rollout, tmp_path):
    _, _, frames = grid_rollout
    path = save_video(frames, tmp_path / "run.gif", fps=4)
    back = iio.imread(path, index=None)
    durations = [iio.immeta(path, index=i)["duration"] for i in range(len(back))]
    assert back.shape[1:] == (512, 512, 3) and back.dtype == np.uint8
    # pure colours survive the palette exactly; identical consecutive frames are stored once with
    # their durations added (250 ms per frame at 4 fps), so expanding by duration gives all frames
    np.testing.assert_array_equal(back[0], frames[0])
    assert all(d % 250 == 0 for d in durations), durations
    np.testing.assert_array_equal(np.repeat(back, np.array(durations) // 250, axis=0), frames)
    assert iio.immeta(path)["loop"] == 0


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # imageio-ffmpeg reading back
def test_mp4_or_clear_error(grid_rollout, tmp_path):
    _, _, frames = grid_rollout
    if not HAS_FFMPEG:
        for call in (lambda: save_mp4(frames, tmp_path / "a.mp4"), lambda: check_video_path(tmp_path / "a.mp4")):
            with pytest.raises(ImportError, match="pip install imageio-ffmpeg"):
                call()
        assert not (tmp_path / "a.mp4").exists()
        return
    path = save_video(frames[:8], tmp_path / "a.mp4", fps=4)
    back = iio.imread(path, index=None, plugin="FFMPEG")
    assert back.shape == (8, 512, 512, 3)
    assert np.abs(back.astype(int) - frames[:8].astype(int)).mean() < 8  # lossy H.264


def test_video_argument_errors(tmp_path):
    frames = np.zeros((2, 8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match=r"unknown suffix '\.avi'; use one of \.gif, \.mp4"):
        save_video(frames, tmp_path / "x.avi")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        save_video(frames, tmp_path / "missing" / "x.gif")
    (tmp_path / "dir.gif").mkdir()
    with pytest.raises(IsADirectoryError, match="is a folder"):
        check_video_path(tmp_path / "dir.gif")
    with pytest.raises(ValueError, match=r"uint8\[T, H, W, 3\].*float32\[2, 8, 8, 3\]"):
        save_gif(frames.astype(np.float32), tmp_path / "x.gif")
    with pytest.raises(ValueError, match=r"uint8\[T, H, W, 3\].*uint8\[8, 8, 3\]"):
        save_gif(frames[0], tmp_path / "x.gif")
    with pytest.raises(ValueError, match="fps must be a positive number, got 0"):
        save_gif(frames, tmp_path / "x.gif", fps=0)
    assert not (tmp_path / "x.gif").exists()


# ---- window ----------------------------------------------------------------------------------
def test_play_human_shows_every_frame(grid, monkeypatch):
    pygame = require("pygame")
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    shown = []
    flip = pygame.display.flip
    monkeypatch.setattr(
        pygame.display, "flip", lambda: (shown.append(pygame.surfarray.array3d(pygame.display.get_surface())), flip())
    )
    # a non-square picture catches a row/column mix-up
    frames = np.zeros((3, 20, 30, 3), np.uint8)
    frames[0, 2, 25] = RED
    frames[1, 15, 3] = BLUE
    frames[2] = 200
    assert play_human(grid, frames, fps=1000) == 3
    np.testing.assert_array_equal(np.stack(shown).transpose(0, 2, 1, 3), frames)
    # states are rendered first
    shown.clear()
    states = jax.tree.map(lambda *x: jnp.stack(x), gw_state((0, 0), (4, 4)), gw_state((1, 0), (4, 4)))
    assert play_human(grid, states, fps=1000) == 2
    np.testing.assert_array_equal(np.stack(shown).transpose(0, 2, 1, 3), render_frames(grid, states))


def test_play_human_errors(grid, monkeypatch):
    frames = np.zeros((1, 4, 4, 3), np.uint8)
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    with pytest.raises(OSError, match="no display to open a window on"):
        play_human(grid, frames)
    monkeypatch.setitem(sys.modules, "pygame", None)  # as if pygame were not installed
    with pytest.raises(ImportError, match=r"showing frames in a window needs 'pygame', which is not installed: pip install \"jaxenvs\[render\]\""):
        play_human(grid, frames)


# ---- text ------------------------------------------------------------------------------------
def test_render_text_grid_world(grid):
    assert grid.render_text(gw_state((1, 2), (3, 0)), EnvParams(size=4)) == "...T\n....\n.A..\n...."
    env = jaxenvs.make("GridWorld-v0", size=4)  # through WithParams, TimeLimit and AutoReset
    obs, state = env.reset(jax.random.key(0))
    rows = env.render_text(state, env.default_params).split("\n")
    (ax, ay), (tx, ty) = np.asarray(obs["agent"]), np.asarray(obs["target"])
    assert len(rows) == 4 and rows[ay][ax] == "A" and rows[ty][tx] == "T"
    assert "".join(rows).count(".") == 14


# ---- every registered environment ------------------------------------------------------------
@pytest.mark.parametrize("env_id", sorted(jaxenvs.registry))
def test_every_env_renders_under_jit_and_vmap(env_id):
    env = jaxenvs.make(env_id)
    params = env.default_params
    _, states = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.key(1), 3), params)
    one = jax.tree.map(lambda x: x[0], states)
    frame = np.asarray(jax.jit(env.render)(one, params))
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3, frame.shape
    frames = np.asarray(jax.jit(jax.vmap(env.render, in_axes=(0, None)))(states, params))
    assert frames.shape == (3, *frame.shape)
    np.testing.assert_array_equal(frames[0], frame)
    for i in (1, 2):
        one_i = jax.tree.map(lambda x: x[i], states)
        np.testing.assert_array_equal(frames[i], np.asarray(jax.jit(env.render)(one_i, params)))
    assert frame.min() < frame.max()  # not a blank picture
    text = env.render_text(one, params)
    assert isinstance(text, str) and text.strip()


# ---- legends -----------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id", ["Lottery-v0", "RockPaperScissors-v0"])
def test_legend_is_appended_below_the_frames(env_id):
    from jaxenvs.rendering.legend import add_legend, legend_rows, legend_strip

    env = jaxenvs.make(env_id, autoreset=False)
    _, state = env.reset(jax.random.key(0))
    frames = render_frames(env, jax.tree.map(lambda x: jnp.stack([x, x]), state))
    with_legend = add_legend(env, frames)
    strip = legend_strip(env, frames.shape[2])
    t, h, w, _ = frames.shape
    assert with_legend.shape == (t, h + strip.shape[0], w, 3) and with_legend.dtype == np.uint8
    np.testing.assert_array_equal(with_legend[:, :h], frames)  # the picture itself is untouched
    np.testing.assert_array_equal(with_legend[:, h:], np.broadcast_to(strip, (t, *strip.shape)))
    assert (strip[0] == 0).all()  # a black rule separates picture and legend
    # every colour the legend explains has a swatch, and the text is the action names
    rows = legend_rows(env)
    names = [text for row in rows for color, text in row if color is not None]
    base = env.unwrapped
    assert set(base.ACTION_NAMES) <= set(names)
    pixels = {tuple(p) for p in strip.reshape(-1, 3).tolist()}
    for row in rows:
        for color, _ in row:
            if color is not None:
                assert tuple(int(c) for c in color) in pixels
    assert strip.shape[0] >= 3 * 10  # three rows of text at least


def test_envs_without_a_legend_keep_their_frames(grid_rollout):
    from jaxenvs.rendering.legend import add_legend, legend_strip

    env, _, frames = grid_rollout
    assert legend_strip(env, frames.shape[-2]) is None
    assert add_legend(env, frames) is frames or np.array_equal(add_legend(env, frames), frames)


def test_cli_gif_of_lottery_has_the_legend(tmp_path):
    from jaxenvs.cli import main
    from jaxenvs.rendering.legend import legend_strip

    env = jaxenvs.make("Lottery-v0", autoreset=False)
    strip = legend_strip(env, 192)
    path = tmp_path / "lottery.gif"
    assert main(["play", "Lottery-v0", "--render", "gif", "--out", str(path)]) == 0
    frames = iio.imread(path, index=None)
    # the frame, the legend, then a caption strip (which episode, which step; how each episode ended)
    assert frames.shape[1] > 96 + strip.shape[0] and frames.shape[2:] == (192, 3)
    legend = frames[:, 96:96 + strip.shape[0]]
    np.testing.assert_array_equal(legend, np.broadcast_to(strip, (len(frames), *strip.shape)))
    assert len(frames) > 2  # several episodes by default, not one


def test_legend_without_pillow_says_what_to_install(monkeypatch):
    from jaxenvs.rendering.legend import legend_strip

    monkeypatch.setitem(sys.modules, "PIL", None)  # as if not installed
    env = jaxenvs.make("RockPaperScissors-v0")
    with pytest.raises(ImportError, match=r"drawing a legend \(or leave the legend out\) needs 'PIL', which is not installed: pip install \"jaxenvs\[render\]\""):
        legend_strip(env, 257)  # a width not drawn before (legends are cached per width)


def test_gif_of_many_colours_is_quantised_and_few_colours_exact(tmp_path):
    """At most 256 colours in all: stored exactly through one palette (with a colour that appears in
    one frame only); more: quantised by imageio, close but not exact, and still written."""
    rng = np.random.default_rng(0)
    few = rng.choice(np.arange(200), size=(3, 16, 16))  # 200 grey levels
    few_frames = np.repeat(few[..., None], 3, axis=-1).astype(np.uint8)
    few_frames[2, 0, 0] = (255, 0, 7)
    back = iio.imread(save_gif(few_frames, tmp_path / "few.gif"), index=None)[..., :3]
    np.testing.assert_array_equal(back, few_frames)
    many = rng.integers(0, 256, size=(2, 32, 32, 3), dtype=np.uint8)  # ~2,000 colours
    back = iio.imread(save_gif(many, tmp_path / "many.gif"), index=None)[..., :3]
    assert back.shape == many.shape and not np.array_equal(back, many)
    assert np.abs(back.astype(int) - many).mean() < 40


@pytest.mark.parametrize("count", [1, 2, 256, 257])
def test_exact_palette_is_numpys_sorted_unique_colours_and_their_ranks(count):
    """The palette of a GIF's frames: the distinct colours ascending (packed as 0xRRGGBB) and each
    pixel's index among them, as ``np.unique(..., return_inverse=True)`` gives them, with the
    extreme colours; None beyond 256 colours."""
    from jaxenvs.rendering.io import _exact_palette

    rng = np.random.default_rng(count)
    packed = np.unique(np.concatenate([[0, 0xFFFFFF], rng.integers(1, 0xFFFFFF, 4 * count)]))[:count]
    frames = packed[rng.integers(0, count, size=(3, 9, 11))]
    frames.flat[: count] = packed  # every colour present
    rgb = np.stack([frames >> 16, (frames >> 8) & 255, frames & 255], axis=-1).astype(np.uint8)
    got = _exact_palette(rgb)
    if count > 256:
        assert got is None
        return
    colours, index = np.unique(frames.ravel(), return_inverse=True)
    np.testing.assert_array_equal(got[0], index.reshape(frames.shape).astype(np.uint8))
    assert got[0].dtype == np.uint8
    assert got[1] == np.stack([colours >> 16, (colours >> 8) & 255, colours & 255], axis=-1).reshape(-1).tolist()


def test_captions_are_sized_to_the_frame():
    PIL = pytest.importorskip("PIL")
    from jaxenvs.rendering.legend import add_captions

    def strip_height(width, caption="step 7"):  # one line at every width
        frames = np.zeros((1, 8, width, 3), np.uint8)
        return add_captions(frames, [caption]).shape[1] - 8

    if tuple(int(x) for x in PIL.__version__.split(".")[:2]) >= (10, 1):  # a scalable bundled font
        # 16 px type on a 512-pixel GridWorld frame (1/32 of its width), 11 px at least on small ones
        assert strip_height(512) >= 20 and strip_height(512) > strip_height(160)
        assert strip_height(160) == strip_height(96)  # both at the 11 px floor
        # a long caption wraps at its spaces on a narrow frame, into more lines of the same type
        assert strip_height(96, "episode 1 of 3: step 7: reached its end (terminated)") > strip_height(96)
    else:
        assert strip_height(512) > 0
