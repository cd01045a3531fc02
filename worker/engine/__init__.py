"""BenchLoop benchmark engine: providers, speed measurement, hardware, suites and run bundles.

Nothing in this package imports Django; the CLI and the Celery workers both build on it.
"""

from __future__ import annotations

ENGINE_NAME = "benchloop-engine"
__version__ = "0.4.0"
