"""The embedded default's web server (scripts/serve.sh): waitress, with limits for the internet.

waitress reads each request whole (headers and body, spooling large bodies to a temporary
file) in its event loop before a worker thread sees it, and buffers each answer until the
client has taken it, so slow clients cost a socket and never a thread: bench/README.md has the
slowloris drill and why waitress rather than gunicorn's sync or threaded workers, an ASGI
server or granian. docker-compose keeps gunicorn behind its buffering nginx.

Usage: python -m benchloop_site.server [--listen 127.0.0.1:8000]
"""

from __future__ import annotations

import argparse
import os
import sys

# Sockets waitress may hold at once; each may also hold a spooled body, hence 2 files each.
CONNECTIONS = 4000
SPARE_FILES = 256  # the database, logs, the broker's files, imports


def options(max_body: int, open_files: int) -> dict:
    """waitress's settings for a site whose largest upload is `max_body` bytes, in a process
    that may open `open_files` files."""
    return {
        "threads": 8,
        "connection_limit": max(16, min(CONNECTIONS, (open_files - SPARE_FILES) // 2)),
        # A connection that sends nothing for this long is closed (checked every 5 s).
        "channel_timeout": 30,
        "cleanup_interval": 5,
        "max_request_header_size": 64 * 1024,
        "max_request_body_size": max_body,
        # Bodies past 64 KiB wait on disk, not in memory, until they are complete.
        "inbuf_overflow": 64 * 1024,
        # poll() instead of select(): select() cannot watch more than 1,024 sockets.
        "asyncore_use_poll": True,
        "ident": "BenchLoop",
    }


def raise_open_files_limit(wanted: int) -> int:
    """Lift this process's soft limit on open files towards `wanted` (up to the hard limit,
    which needs no privilege) and return the limit in force."""
    try:
        import resource
    except ImportError:  # not on this platform: assume the usual default
        return 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft if soft != resource.RLIM_INFINITY else wanted


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve BenchLoop with waitress.")
    parser.add_argument("--listen", default="127.0.0.1:8000", help="HOST:PORT [127.0.0.1:8000]")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchloop_site.settings")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from waitress import serve  # type: ignore[import-untyped]  # waitress ships no types

    try:
        from benchloop_site.wsgi import application
    except ImproperlyConfigured as exc:  # the operator's to fix: one line, as manage.py says it
        sys.exit(f"BenchLoop refuses to start: {exc}")

    open_files = raise_open_files_limit(2 * CONNECTIONS + SPARE_FILES)
    serve(
        application,
        listen=args.listen,
        **options(settings.BENCHLOOP_MAX_UPLOAD_BYTES, open_files),
    )


if __name__ == "__main__":
    main()
