"""``python -m classroom.cluster``: :func:`classroom.cluster.processes.main`."""

import sys

from classroom.cluster.processes import main

sys.exit(main())
