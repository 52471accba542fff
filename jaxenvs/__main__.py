"""``python -m jaxenvs``: the ``jaxenvs`` command line."""

import sys

from jaxenvs.cli import main

sys.exit(main())
