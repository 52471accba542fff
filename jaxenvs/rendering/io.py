"""Turning rollouts into pictures: batched rendering, GIF/MP4 files and a pygame window.

    traj = jaxenvs.rollout.rollout(env, key, policy, num_steps=100)
    frames = render_frames(env, traj.state)           # uint8[T, H, W, 3] numpy array
    save_video(frames, "episode.gif", fps=env.render_fps)

GIFs need only ``imageio`` (its Pillow writer); MP4 needs ``imageio-ffmpeg`` as well; the window
needs ``pygame`` (``pip install jaxenvs[render]``).
"""

from __future__ import annotations

import os
import warnings
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs._optional import require
from jaxenvs.rendering.pygame_window import Window

__all__ = ["render_frames", "save_gif", "save_mp4", "save_video", "check_video_path", "play_human", "VIDEO_SUFFIXES"]



@partial(jax.jit, static_argnums=0)
def _render_batch(env, states, params):
    return jax.vmap(env.render, in_axes=(0, None))(states, params)


def render_frames(env, states: Any, params: Any = None) -> np.ndarray:
    """uint8[*batch, H, W, 3] frames of a batch of ``states`` in one jitted, vmapped call.

    ``states`` is any stack of the env's states (e.g. ``Trajectory.state``, ``[T]`` or
    ``[T, num_envs]``); the batch axes are found by comparing with the shape of one state, so a
    single unbatched state gives one ``[H, W, 3]`` frame. For a wrapped env, ``env.render`` reaches
    the base state through each wrapper's ``inner_state``.
    """
    one = jax.eval_shape(env.reset, jax.random.key(0), params)[1]
    leaves, one_leaves = jax.tree.leaves(states), jax.tree.leaves(one)
    if len(leaves) != len(one_leaves) or not leaves:
        raise ValueError(f"states do not have the structure of {env.name}'s state {jax.tree.structure(one)}")
    nbatch = np.ndim(leaves[0]) - len(one_leaves[0].shape)
    batch = tuple(np.shape(leaves[0])[:nbatch])
    for leaf, ref in zip(leaves, one_leaves):
        if nbatch < 0 or tuple(np.shape(leaf)) != batch + tuple(ref.shape):
            raise ValueError(
                f"state leaf of shape {np.shape(leaf)} does not fit {env.name}'s state leaf shape "
                f"{tuple(ref.shape)} with common batch axes {batch}"
            )
    flat = jax.tree.map(lambda x: jnp.reshape(x, (-1, *np.shape(x)[nbatch:])), states)
    frames = np.asarray(_render_batch(env, flat, params))
    return frames.reshape(batch + frames.shape[1:])


def _check_frames(frames) -> np.ndarray:
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or frames.shape[0] == 0:
        raise ValueError(
            f"frames must be a non-empty uint8[T, H, W, 3] array, got {frames.dtype}{list(frames.shape)}"
        )
    return frames


def _check_fps(fps) -> float:
    if isinstance(fps, bool) or not isinstance(fps, (int, float, np.integer, np.floating)) or not fps > 0:
        raise ValueError(f"fps must be a positive number, got {fps!r}")
    return float(fps)


def save_gif(frames, path: str | os.PathLike, fps: float = 4) -> Path:
    """Write uint8[T, H, W, 3] ``frames`` as a looping GIF (imageio's Pillow writer, no ffmpeg).

    GIF stores frame durations in hundredths of a second, so ``1 / fps`` is rounded to 10 ms.
    Identical consecutive frames are stored once with their durations added: playback time is
    exact while the stored frame count may be lower than ``T``. Frames with at most 256 distinct
    colours in all (rendered envs draw a few flat colours) are stored exactly, with one palette
    built from those colours and handed to Pillow as they are (no quantising: about half of
    imageio's time); more colours than that are quantised to a 256-colour palette by imageio.
    """
    frames, fps = _check_frames(frames), _check_fps(fps)
    iio = require("imageio.v3", extra="render", purpose="saving a GIF")

    path = Path(path)
    paletted = _exact_palette(frames)
    if paletted is None:
        iio.imwrite(path, frames, extension=".gif", duration=1000.0 / fps, loop=0)
        return path
    from PIL import Image  # imageio's own GIF writer, a dependency of imageio

    index, palette = paletted
    images = []
    for f in index:
        im = Image.fromarray(f, mode="P")
        im.putpalette(palette)
        images.append(im)
    images[0].save(path, format="GIF", save_all=True, append_images=images[1:], duration=1000.0 / fps, loop=0)
    return path


def _exact_palette(frames: np.ndarray) -> tuple[np.ndarray, list[int]] | None:
    """``(uint8[T, H, W] palette indices, flat RGB palette)`` of ``frames`` when they hold at most
    256 distinct colours, else None."""
    packed = (frames[..., 0].astype(np.uint32) << 16) | (frames[..., 1].astype(np.uint32) << 8) | frames[..., 2]
    # the colours present, ascending, and each pixel's rank among them (what np.unique(...,
    # return_inverse=True) gives) from a table over all 2**24 colours: no sort of every pixel,
    # about 20x faster on a GIF's frames
    seen = np.zeros(1 << 24, np.bool_)
    seen[packed] = True
    colours = np.flatnonzero(seen).astype(np.uint32)
    if len(colours) > 256:
        return None
    rank = np.zeros(1 << 24, np.uint8)
    rank[colours] = np.arange(len(colours), dtype=np.uint8)
    rgb = np.stack([colours >> 16, (colours >> 8) & 255, colours & 255], axis=-1).astype(np.uint8)
    return rank[packed], rgb.reshape(-1).tolist()


def _require_ffmpeg():
    require("imageio_ffmpeg", extra="render", purpose="saving an MP4 (or save a .gif)")


def save_mp4(frames, path: str | os.PathLike, fps: float = 4) -> Path:
    """Write uint8[T, H, W, 3] ``frames`` as an H.264 MP4 (needs ``imageio-ffmpeg``).

    Frames whose height or width is not a multiple of 16 are resized up by imageio, as most
    players require. Raises ImportError naming the package to install when ffmpeg is missing.
    """
    frames, fps = _check_frames(frames), _check_fps(fps)
    _require_ffmpeg()
    iio2 = require("imageio.v2", extra="render", purpose="saving an MP4")

    path = Path(path)
    with warnings.catch_warnings():
        # the ffmpeg subprocess is forked and exec'd at once, which is safe next to JAX's threads
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
        with iio2.get_writer(path, format="FFMPEG", mode="I", fps=fps, codec="libx264") as writer:
            for frame in frames:
                writer.append_data(frame)
    return path


VIDEO_SUFFIXES = {".gif": save_gif, ".mp4": save_mp4}


def check_video_path(path: str | os.PathLike) -> Path:
    """``path`` as a Path if a video can be written there, checked before any frame is rendered.

    Raises ValueError for an unknown suffix, ImportError when the writer's package is missing and
    OSError when the folder does not exist or is not writable (or ``path`` is a folder).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in VIDEO_SUFFIXES:
        raise ValueError(
            f"cannot save a video as {str(path)!r}: unknown suffix {suffix or '(none)'!r}; "
            f"use one of {', '.join(VIDEO_SUFFIXES)}"
        )
    if suffix == ".mp4":
        _require_ffmpeg()
    folder = path.parent
    if path.is_dir():
        raise IsADirectoryError(f"cannot save a video as {str(path)!r}: it is a folder")
    if not folder.is_dir():
        raise FileNotFoundError(f"cannot save a video as {str(path)!r}: folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK):
        raise PermissionError(f"cannot save a video as {str(path)!r}: folder {str(folder)!r} is not writable")
    existed = path.exists()
    try:  # the real test (permissions can lie, e.g. for root or on special file systems)
        with open(path, "ab"):
            pass
    except OSError as e:
        raise PermissionError(f"cannot save a video as {str(path)!r}: {e.strerror or e}") from None
    if not existed:
        path.unlink()
    return path


def save_video(frames, path: str | os.PathLike, fps: float = 4) -> Path:
    """`save_gif` or `save_mp4`, chosen by the suffix of ``path`` (checked first by
    `check_video_path`)."""
    path = check_video_path(path)
    return VIDEO_SUFFIXES[path.suffix.lower()](frames, path, fps)


def play_human(env, frames_or_states, fps: float | None = None, params: Any = None) -> int:
    """Show frames in a pygame window at ``fps`` (default ``env.render_fps``); returns frames shown.

    ``frames_or_states`` is uint8[T, H, W, 3] frames or a ``[T]`` stack of the env's states
    (rendered first with `render_frames`). Closing the window or pressing Escape stops early.
    The window is closed on return. Raises OSError when there is no display, unless
    ``SDL_VIDEODRIVER`` names a driver explicitly (``dummy`` for tests).
    """
    if isinstance(frames_or_states, (np.ndarray, jax.Array)):
        frames = _check_frames(frames_or_states)
    else:
        frames = _check_frames(render_frames(env, frames_or_states, params))
    fps = _check_fps(env.render_fps if fps is None else fps)
    window = Window(getattr(env, "name", "jaxenvs"), fps, require_display=True)
    shown = 0
    try:
        for frame in frames:
            if not window.show(frame):
                break
            shown += 1
        return shown
    finally:
        window.close()
