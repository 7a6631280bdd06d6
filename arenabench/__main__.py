import sys

from arenabench.cli import main

sys.exit(main())
