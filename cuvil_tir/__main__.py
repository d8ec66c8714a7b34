"""``python -m cuvil_tir`` runs the ``cuvil`` command."""

import sys

from .cli import main

sys.exit(main())
