import sys

from tools.similarity.command import main

sys.exit(main())
