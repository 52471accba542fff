"""Rendering: jittable drawing primitives (``draw``), saving rollouts (``io``) and legends for
frames whose colours carry meaning (``legend``)."""

from jaxenvs.rendering import draw, legend
from jaxenvs.rendering.io import (
    VIDEO_SUFFIXES,
    check_video_path,
    play_human,
    render_frames,
    save_gif,
    save_mp4,
    save_video,
)
from jaxenvs.rendering.legend import add_legend

__all__ = [
    "draw",
    "legend",
    "add_legend",
    "render_frames",
    "save_gif",
    "save_mp4",
    "save_video",
    "check_video_path",
    "play_human",
    "VIDEO_SUFFIXES",
]
