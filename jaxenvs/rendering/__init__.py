"""Rendering: jittable drawing primitives (``draw``) and saving rollouts."""

from jaxenvs.rendering import draw

__all__ = ["draw"]
