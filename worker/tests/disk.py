"""A real full disk for fault drills: a small tmpfs (needs root or CAP_SYS_ADMIN, which the CI
container has; tests skip elsewhere), and a filler that takes its free space."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(mount_point: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's notation: 256k, 64m) at mount_point, unmounted afterwards."""
    mount_point.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(folder: Path, leave: int = 0, name: str = "filler") -> Path:
    """Take all free space on folder's file system but `leave` bytes (rounded to pages)."""
    stat = os.statvfs(folder)
    size = stat.f_bavail * stat.f_frsize - leave
    path = folder / name
    with path.open("wb") as handle:
        try:
            handle.write(b"\0" * max(size, 0))
            handle.flush()
        except OSError as exc:  # page rounding: close enough to full
            assert exc.errno == errno.ENOSPC
    return path
