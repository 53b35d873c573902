"""``python -m tilefoundry``: the command line, as the ``tilefoundry`` script runs it (and as ``torchrun -m
tilefoundry generate --tp N ...`` starts its ranks)."""

import sys

from .cli.main import main

sys.exit(main())
