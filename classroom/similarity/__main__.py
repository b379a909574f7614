import sys

from classroom.similarity.command import main

sys.exit(main())
