#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchloop_site.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A misconfiguration is the operator's to fix: one clear line, not a traceback.
        sys.stderr.write(f"BenchLoop refuses to start: {exc}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
