"""Legends for frames whose colours and shapes carry meaning (declared by the environment's class
attribute ``legend``: Lottery and Rock-Paper-Scissors have one).

A legend is a strip of text with colour swatches, drawn on the host once per environment (with
Pillow, which GIF writing already needs) and appended below every frame::

    frames = add_legend(env, render_frames(env, traj.state))   # uint8[T, H + h, W, 3]

Environments without a ``legend`` get their frames back unchanged.
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from jaxenvs._optional import require
from jaxenvs.rendering import draw

__all__ = ["legend_rows", "legend_strip", "add_legend", "add_captions", "status_captions"]

Entry = tuple  # (rgb colour or None, text)


def legend_rows(env) -> list[list[Entry]] | None:
    """The legend of ``env`` (wrappers are looked through) as rows of ``(colour, text)``, or None.

    An environment declares its legend as a class attribute ``legend``: a sequence of rows, each a
    sequence of ``(rgb or None, text)`` entries (an entry without a colour is plain text)."""
    rows = getattr(getattr(env, "unwrapped", env), "legend", None)
    return None if rows is None else [list(row) for row in rows]


def _pil():
    purpose = "drawing a legend (or leave the legend out)"
    require("PIL", extra="render", purpose=purpose)
    from PIL import Image, ImageDraw, ImageFont

    return Image, ImageDraw, ImageFont


@functools.lru_cache(maxsize=8)
def _font(width: int):
    """Pillow's bundled font at a size that reads on a frame ``width`` pixels wide (about 1/32 of it,
    at least 11 px: 16 px on a 512-pixel frame). Pillow before 10.1 has only its small bitmap font."""
    _, _, ImageFont = _pil()
    try:
        return ImageFont.load_default(size=max(11, width // 32))
    except TypeError:  # Pillow < 10.1: load_default() takes no size
        return ImageFont.load_default()


@functools.lru_cache(maxsize=32)
def _strip(rows: tuple, width: int) -> np.ndarray:
    Image, ImageDraw, _ = _pil()
    font = _font(width)
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    ascent, descent = font.getmetrics() if hasattr(font, "getmetrics") else (10, 2)
    line_h = ascent + descent + 3
    swatch, gap, pad = line_h - 5, 4, 4
    # lay the entries out left to right, wrapping onto a new line where one does not fit
    placed, x, y = [], pad, pad
    for row in rows:
        for color, text in row:
            w = int(np.ceil(probe.textlength(text, font=font))) + (swatch + 2 if color is not None else 0)
            if x > pad and x + w > width - pad:
                x, y = pad, y + line_h
            placed.append((x, y, color, text))
            x += w + 2 * gap
        x, y = pad, y + line_h
    image = Image.new("RGB", (width, y + pad - 3), draw.WHITE)
    pen = ImageDraw.Draw(image)
    for x, y, color, text in placed:
        if color is not None:
            pen.rectangle([x, y + 2, x + swatch - 1, y + 1 + swatch], fill=tuple(int(c) for c in color),
                          outline=draw.BLACK)
            x += swatch + 2
        pen.text((x, y), text, fill=draw.BLACK, font=font)
    strip = np.asarray(image, dtype=np.uint8).copy()
    strip[0] = draw.BLACK  # a rule between the picture and its legend
    strip.setflags(write=False)
    return strip


def legend_strip(env, width: int) -> np.ndarray | None:
    """uint8[h, width, 3]: ``env``'s legend drawn for frames ``width`` pixels wide (None if none)."""
    rows = legend_rows(env)
    if rows is None:
        return None
    return _strip(tuple(tuple((None if c is None else tuple(c), t) for c, t in r) for r in rows), int(width))


def add_legend(env, frames: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
    """``frames`` (uint8[..., H, W, 3]) with ``env``'s legend appended below each; unchanged when
    ``env`` has no legend."""
    frames = np.asarray(frames)
    strip = legend_strip(env, frames.shape[-2])
    if strip is None:
        return frames
    strips = np.broadcast_to(strip, frames.shape[:-3] + strip.shape)
    return np.concatenate([frames, strips], axis=-3)


def _wrap(text: str, width: int, frame_width: int) -> list[str]:
    """``text`` split at spaces into lines at most ``width`` pixels wide in the font of frames
    ``frame_width`` pixels wide (a single longer word keeps a line of its own)."""
    Image, ImageDraw, _ = _pil()
    font, probe = _font(frame_width), ImageDraw.Draw(Image.new("RGB", (1, 1)))
    lines: list[str] = []
    for word in text.split(" "):
        if lines and probe.textlength(lines[-1] + " " + word, font=font) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def add_captions(frames: Sequence[np.ndarray] | np.ndarray, captions: Sequence[str]) -> np.ndarray:
    """``frames`` (uint8[T, H, W, 3]) with ``captions[t]`` (one line of text each, e.g. whose move
    it is, or how the game ended) written in a strip below frame ``t``; all strips get the height
    of the tallest (a caption wider than the frame wraps at its spaces)."""
    frames = np.asarray(frames)
    if len(captions) != len(frames):
        raise ValueError(f"add_captions needs one caption per frame: {len(frames)} frames, {len(captions)} captions")
    width = int(frames.shape[-2])
    strips = {c: _strip(tuple(((None, line),) for line in _wrap(c, width - 8, width)), width) for c in set(captions)}
    height = max(s.shape[0] for s in strips.values())
    padded = {c: np.concatenate([s, np.full((height - s.shape[0], width, 3), draw.WHITE, np.uint8)]) for c, s in strips.items()}
    return np.concatenate([frames, np.stack([padded[c] for c in captions])], axis=-3)


def status_captions(env, episodes: Sequence) -> list[str] | None:
    """For a turn-based game (``traits.dynamics == "sequential"``) with a ``render_text``: one
    caption per state of every episode (``episodes``: per episode, its states stacked on a leading
    time axis), ``"episode i: "`` and the last line of ``render_text`` (whose move it is, or how the
    game ended). None for other environments."""
    import jax

    if getattr(getattr(env, "traits", None), "dynamics", None) != "sequential":
        return None
    out = []
    try:
        for i, states in enumerate(episodes, 1):
            for t in range(len(jax.tree.leaves(states)[0])):
                text = env.render_text(jax.tree.map(lambda x: x[t], states), env.default_params)
                out.append(f"episode {i}: " + text.strip().splitlines()[-1])
    except NotImplementedError:
        return None
    return out
