"""Jittable drawing primitives shared by every environment's ``render``.

Frames are uint8[H, W, 3] arrays. Shapes are drawn by building a boolean mask over pixel centres
and selecting a colour with ``jnp.where``, so positions and sizes may be traced values and the
functions vmap over a batch of states. Coordinates are pixels: x to the right, y downwards.
"""

from __future__ import annotations

import jax.numpy as jnp

__all__ = [
    "WHITE", "BLACK", "RED", "BLUE", "GREEN", "BROWN", "GREY", "YELLOW",
    "canvas", "paint", "rect_mask", "circle_mask", "hline_mask", "vline_mask", "fill_rect", "fill_circle",
    "pixel_grid",
]

WHITE = (255, 255, 255)
BLACK = (0, 0, 0)
RED = (255, 0, 0)
BLUE = (0, 0, 255)
GREEN = (0, 160, 0)
BROWN = (139, 69, 19)
GREY = (128, 128, 128)
YELLOW = (230, 200, 0)


def canvas(height: int, width: int, color=WHITE):
    """A uint8[height, width, 3] frame filled with ``color``."""
    return jnp.broadcast_to(jnp.asarray(color, jnp.uint8), (height, width, 3))


def pixel_grid(height: int, width: int):
    """(ys, xs): float32[H, W] pixel-centre coordinates."""
    ys = jnp.arange(height, dtype=jnp.float32)[:, None] + 0.5
    xs = jnp.arange(width, dtype=jnp.float32)[None, :] + 0.5
    return jnp.broadcast_to(ys, (height, width)), jnp.broadcast_to(xs, (height, width))


def rect_mask(shape, x0, y0, x1, y1):
    """Pixels whose centres lie in ``[x0, x1) x [y0, y1)``."""
    ys, xs = pixel_grid(*shape)
    return (xs >= x0) & (xs < x1) & (ys >= y0) & (ys < y1)


def circle_mask(shape, cx, cy, r):
    """Pixels whose centres lie within distance ``r`` of ``(cx, cy)``."""
    ys, xs = pixel_grid(*shape)
    return (xs - cx) ** 2 + (ys - cy) ** 2 <= r**2


def hline_mask(shape, y, width=1.0):
    """A horizontal band of ``width`` pixels centred on row coordinate ``y``."""
    ys, _ = pixel_grid(*shape)
    return jnp.abs(ys - y) <= width / 2


def vline_mask(shape, x, width=1.0):
    """A vertical band of ``width`` pixels centred on column coordinate ``x``."""
    _, xs = pixel_grid(*shape)
    return jnp.abs(xs - x) <= width / 2


def paint(frame, mask, color):
    """``frame`` with the pixels of ``mask`` set to ``color``."""
    return jnp.where(mask[..., None], jnp.asarray(color, jnp.uint8), frame).astype(jnp.uint8)


def fill_rect(frame, x0, y0, x1, y1, color):
    return paint(frame, rect_mask(frame.shape[:2], x0, y0, x1, y1), color)


def fill_circle(frame, cx, cy, r, color):
    return paint(frame, circle_mask(frame.shape[:2], cx, cy, r), color)
