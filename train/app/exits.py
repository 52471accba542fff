"""How ``jaxenvs-train`` ends: its exit statuses and the errors that map to them (each printed as
one line, never a traceback)."""

from __future__ import annotations

__all__ = ["EXIT_OK", "EXIT_DIVERGED", "EXIT_USAGE", "EXIT_STORAGE", "EXIT_INTERRUPTED", "EXIT_STATUSES",
           "UsageError", "Diverged", "StorageError"]

EXIT_OK, EXIT_DIVERGED, EXIT_USAGE, EXIT_STORAGE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_STATUSES = ("exit status: 0 done, 1 training diverged (non-finite numbers), 2 usage error, "
                 "3 the run directory could not be written (permissions, full disk), 130 interrupted "
                 "(Ctrl-C, SIGTERM or SIGHUP; a checkpoint is saved).")


class UsageError(Exception):
    """A mistake in what the user gave (flags, config file, run directory): message, exit status 2."""


class StorageError(Exception):
    """The run directory could not be written (permissions, a read-only or full file system):
    message naming the path, exit status 3."""


class Diverged(Exception):
    """Training produced a non-finite loss, gradient or parameter: message, exit status 1."""
