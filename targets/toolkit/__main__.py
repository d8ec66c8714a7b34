"""``python -m targets.toolkit`` runs the ``cuvil`` command."""

import sys

from .cli import main

sys.exit(main())
