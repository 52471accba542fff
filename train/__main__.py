"""``python -m jaxenvs.train``: the ``jaxenvs-train`` command (`train.app`)."""

import sys

from .app.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
