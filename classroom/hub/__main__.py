"""``python -m classroom.hub``: :func:`classroom.hub.command.main`."""

import sys

from classroom.hub.command import main

sys.exit(main())
