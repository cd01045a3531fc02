"""What the CLI tests share: an 80-column console that records, the width rule, and the real
CLI run as a process."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console

WIDTH = 80
REPO = Path(__file__).resolve().parents[2]


def run_cli(args: list[str], home: Path, columns: int = 200) -> subprocess.CompletedProcess:
    """`benchloop ARGS` as a user runs it, with its own home and a terminal this wide."""
    env = {**os.environ, "BENCHLOOP_HOME": str(home), "COLUMNS": str(columns)}
    return subprocess.run(
        [sys.executable, "-m", "worker.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def console(width: int = WIDTH) -> Console:
    """What a user's terminal of ``width`` columns shows, without colours."""
    return Console(width=width, file=io.StringIO(), color_system=None, highlight=False)


def text_of(out: Console) -> str:
    """What ``console()`` printed; Rich pads table lines, a terminal shows no trailing spaces."""
    return "".join(line.rstrip() + "\n" for line in out.file.getvalue().splitlines())


def fits(text: str, width: int = WIDTH) -> bool:
    """Every line fits, but a path on a line of its own: printed whole, so it can be pasted."""
    return all(
        len(line) <= width or (" " not in line and line.startswith(("/", "~")))
        for line in text.splitlines()
    )
