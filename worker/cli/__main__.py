"""`python -m worker.cli`: the `benchloop` command without its console script."""

from __future__ import annotations

import sys

from worker.cli import main

sys.exit(main())
