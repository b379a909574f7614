"""``python -m tools.mutants``: see :mod:`tools.mutants.cli`."""

import sys

from .cli import main

sys.exit(main())
