"""How ``jaxenvs-train`` shows and overlaps its phases: `Say` (process 0's printing, each phase
announced and timed) and `Background` (work in a daemon thread while the main thread goes on)."""

from __future__ import annotations

import sys
import threading
import time

__all__ = ["Say", "Background"]


class Say:
    """Printing of process 0, with phases: ``with say.phase("compiling"):`` prints what runs
    and, when it ends, how long it took (so no phase longer than a second is silent)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.times: dict[str, float] = {}
        self._open = False  # a terminal line "label ... " waits for its phase's "done in"

    def __call__(self, *a, **k):
        if self.enabled:
            if self._open:  # another message inside a phase: it gets a line of its own
                print(flush=True)
                self._open = False
            print(*a, **k, flush=True)

    def phase(self, label: str, key: str):
        say = self

        class _Phase:
            def __enter__(self):
                self.t0 = time.perf_counter()
                tty = sys.stdout.isatty()
                say(f"{label} ...", end=" " if tty else "\n")
                say._open = tty and say.enabled
                return self

            def __exit__(self, kind, *_):
                dt = time.perf_counter() - self.t0
                say.times[key] = say.times.get(key, 0.0) + dt
                same_line, say._open = say._open, False
                if kind is None:  # the label again unless "done in" ends the phase's own line
                    say(f"{'' if same_line else label + ': '}done in {dt:.1f}s")
                elif same_line:
                    say("")
                return False

        return _Phase()


class Background:
    """``fn()`` in a daemon thread, started at once; `result` waits for it and returns its value or
    raises what it raised (KeyboardInterrupt included). Meant for work that runs without Python's
    GIL: XLA's compile of a program lowered on the main thread (tracing and lowering are Python, and
    two threads doing them only take turns), image encoding; it then runs on another core.

    A process must not end by interpreter shutdown while one of these is still inside XLA (a Ctrl-C
    during the background compile): the daemon thread is torn down in C++ code and the process
    aborts (``FATAL: exception not rethrown``, exit 134). `any_running` tells the command to leave
    with ``os._exit`` instead (`train.__main__`)."""

    _live: "set[Background]" = set()

    def __init__(self, fn, name: str = "jaxenvs-background"):
        self.started = time.perf_counter()
        self.duration: float | None = None
        self._value = self._error = None
        self._thread = threading.Thread(target=self._run, args=(fn,), name=name, daemon=True)
        Background._live.add(self)
        self._thread.start()

    @classmethod
    def any_running(cls) -> bool:
        """Whether a background job of this process is still running."""
        cls._live = {job for job in cls._live if job._thread.is_alive()}
        return bool(cls._live)

    def _run(self, fn):
        try:
            self._value = fn()
        except BaseException as e:  # re-raised by result(), in the thread that waits
            self._error = e
        finally:
            self.duration = time.perf_counter() - self.started

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value
