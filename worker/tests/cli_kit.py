"""What the CLI tests share: an 80-column console that records, and the width rule."""

from __future__ import annotations

import io

from rich.console import Console

WIDTH = 80


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
