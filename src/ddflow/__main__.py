"""``python -m ddflow``: see :mod:`ddflow.cli`."""

import sys

from ddflow.cli import main

sys.exit(main())
