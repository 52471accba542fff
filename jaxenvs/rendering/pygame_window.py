"""One pygame window for every place that shows frames on screen: `jaxenvs.rendering.io.play_human`
and the adapters' ``render_mode="human"``. Needs ``pygame`` (``pip install 'jaxenvs[render]'``)."""

from __future__ import annotations

import os
import sys

import numpy as np

from jaxenvs._optional import require

__all__ = ["Window", "import_pygame", "HEADLESS_DRIVERS"]

HEADLESS_DRIVERS = ("offscreen", "dummy")  # SDL video drivers that show nothing


def import_pygame():
    """The ``pygame`` module (its support banner hidden); ImportError naming the extra otherwise."""
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    return require("pygame", extra="render", purpose="showing frames in a window")


class Window:
    """A pygame window showing uint8[H, W, 3] frames at ``fps``, opened (at the first frame's size)
    by the first `show`.

    ``require_display``: raise OSError, before anything is drawn, when no display can show the
    window (no ``DISPLAY``/``WAYLAND_DISPLAY`` on Linux, or SDL falling back to a headless driver),
    unless ``SDL_VIDEODRIVER`` names a driver explicitly (``dummy`` for tests).
    """

    def __init__(self, title: str, fps: float, require_display: bool = False):
        self.title, self.fps, self.require_display = title, fps, require_display
        self.screen = self.clock = self.pygame = None

    def open(self, width: int, height: int) -> None:
        """Open the window at ``width`` x ``height`` pixels (`show` does at its first frame); OSError
        as the class says."""
        pygame = self.pygame = import_pygame()
        explicit = "SDL_VIDEODRIVER" in os.environ
        if self.require_display and sys.platform.startswith("linux") and not explicit and not any(
            os.environ.get(v) for v in ("DISPLAY", "WAYLAND_DISPLAY")
        ):
            raise OSError("no display to open a window on (DISPLAY is not set); save a file instead, e.g. as a .gif")
        pygame.display.init()
        try:
            self.screen = pygame.display.set_mode((width, height))
        except pygame.error as e:
            pygame.display.quit()
            raise OSError(f"cannot open a window ({e}); save a file instead, e.g. as a .gif") from e
        driver = pygame.display.get_driver()
        if self.require_display and driver in HEADLESS_DRIVERS and not explicit:
            self.close()
            raise OSError(
                f"no display to open a window on (SDL fell back to its {driver!r} video driver); "
                "save a file instead, e.g. as a .gif"
            )
        pygame.display.set_caption(self.title)
        self.clock = pygame.time.Clock()

    def show(self, frame: np.ndarray) -> bool:
        """Draw ``frame`` and wait for the frame rate; False (nothing drawn) once the user closed the
        window or pressed Escape."""
        frame = np.asarray(frame)
        if self.screen is None:
            self.open(frame.shape[1], frame.shape[0])
        pygame = self.pygame
        if any(
            ev.type == pygame.QUIT or (ev.type == pygame.KEYDOWN and ev.key == pygame.K_ESCAPE)
            for ev in pygame.event.get()
        ):
            return False
        pygame.surfarray.blit_array(self.screen, np.ascontiguousarray(frame.transpose(1, 0, 2)))
        pygame.display.flip()
        self.clock.tick(self.fps)
        return True

    def close(self) -> None:
        if self.screen is not None:
            self.pygame.display.quit()
            self.screen = None
