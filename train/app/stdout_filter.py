"""Keep the Gloo library's connection banner out of a program's output.

Gloo, the library JAX uses for collectives between the CPU devices of several processes, prints
``[Gloo] Rank 0 is connected to 1 peer ranks. Expected number of connected peer ranks is : 1``
through C++'s ``std::cout`` (file descriptor 1) the first time processes talk, in the middle of
whatever the program prints, and has no switch to turn it off.

`drop_gloo_banner` gives Python's ``sys.stdout`` a descriptor of its own for the real
output (so ``print`` and ``isatty()`` behave as before) and sends descriptor 1, which only native
code writes to now, through a thread that forwards every line except the banner. What native code
prints without a newline is forwarded at once, unless it could be the start of the banner.
"""

from __future__ import annotations

import atexit
import io
import os
import re
import sys
import threading

__all__ = ["BANNER", "drop_gloo_banner", "filter_lines"]

BANNER = re.compile(rb"^\[Gloo\] Rank \d+ is connected to \d+ peer ranks\..*$")
_PREFIX = b"[Gloo] "
_installed = False


def filter_lines(buffer: bytes, final: bool = False) -> tuple[bytes, bytes]:
    """``(to_forward, kept)``: the pieces of ``buffer`` that end in a newline or carriage return,
    without banner lines, and the rest still to wait for (an unfinished piece that may turn out to
    be the banner). ``final`` forwards the rest as well, unless it is the banner."""
    pieces = re.findall(rb"[^\r\n]*(?:\r\n|\n|\r)|[^\r\n]+$", buffer)
    rest = pieces.pop() if pieces and not pieces[-1].endswith((b"\n", b"\r")) else b""
    out = [piece for piece in pieces if not BANNER.match(piece.rstrip(b"\r\n"))]
    maybe_banner = rest.startswith(_PREFIX) or _PREFIX.startswith(rest)
    if final or (rest and not maybe_banner):
        if not BANNER.match(rest):
            out.append(rest)
        rest = b""
    return b"".join(out), rest


def drop_gloo_banner() -> bool:
    """Filter Gloo's banner out of descriptor 1 for the rest of the process (once); returns
    whether the filter is in place (not where descriptor 1 is not a plain open descriptor)."""
    global _installed
    if _installed:
        return True
    try:
        sys.stdout.flush()
        real = os.dup(1)
    except (OSError, AttributeError, ValueError):
        return False
    read_end, write_end = os.pipe()
    os.dup2(write_end, 1)
    os.close(write_end)
    # Python's own output goes straight to the real stdout
    sys.stdout = io.TextIOWrapper(
        io.FileIO(os.dup(real), "w", closefd=True), encoding=sys.stdout.encoding,
        errors=sys.stdout.errors, line_buffering=sys.stdout.line_buffering, write_through=True,
    )

    def pump():
        rest = b""
        while True:
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            out, rest = filter_lines(rest + chunk)
            if out:
                os.write(real, out)
        out, _ = filter_lines(rest, final=True)
        if out:
            os.write(real, out)
        os.close(read_end)

    thread = threading.Thread(target=pump, name="gloo-banner-filter", daemon=True)
    thread.start()

    def restore():  # at exit: let the pump forward the last bytes, then stop it
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        os.dup2(real, 1)  # closes the pipe's last write end: the pump sees the end
        thread.join(timeout=5)

    atexit.register(restore)
    _installed = True
    return True
