"""Rendering: jittable drawing primitives (``draw``) and saving rollouts (``io``)."""

from jaxenvs.rendering import draw
from jaxenvs.rendering.io import (
    VIDEO_SUFFIXES,
    check_video_path,
    play_human,
    render_frames,
    save_gif,
    save_mp4,
    save_video,
)

__all__ = [
    "draw",
    "render_frames",
    "save_gif",
    "save_mp4",
    "save_video",
    "check_video_path",
    "play_human",
    "VIDEO_SUFFIXES",
]
