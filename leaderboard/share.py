"""Share images: a 1200×630 PNG card with a page's headline numbers (Pillow, no Django).

Text is drawn as pixels, so hostile names cannot inject anything; they are only truncated.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import cache

from PIL import Image, ImageDraw, ImageFont

SIZE = (1200, 630)
BACKGROUND = (14, 17, 23)
SURFACE = (24, 29, 39)
TEXT = (232, 235, 241)
MUTED = (163, 172, 189)
ACCENT = (143, 168, 255)
SERIES = [(143, 168, 255), (111, 220, 160), (243, 180, 98), (240, 130, 160)]
Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


@dataclass(frozen=True)
class Metric:
    label: str
    value: str


@dataclass(frozen=True)
class Column:
    """One block of numbers: a stack on a compare card, or the only block on the others."""

    title: str
    subtitle: str
    metrics: tuple[Metric, ...]


@cache
def _font(size: int, bold: bool = False) -> Font:
    # DejaVu ships with most Linux images; Pillow's bundled font is the fallback elsewhere.
    name = "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"
    try:
        return ImageFont.truetype(name, size)
    except OSError:
        return ImageFont.load_default(size=size)


def _fit(draw: ImageDraw.ImageDraw, text: str, font: Font, width: int) -> str:
    text = " ".join(str(text).split())[:200]
    if draw.textlength(text, font=font) <= width:
        return text
    while text and draw.textlength(text + "…", font=font) > width:
        text = text[:-1]
    return text + "…"


def title_lines(
    draw: ImageDraw.ImageDraw, text: str, font: Font, width: int, count: int
) -> list[str]:
    """The title in at most `count` lines. What is cut is the middle, not the end: the end of
    a stack's label is what tells it from its neighbours on a compare card."""
    words = " ".join(str(text).split())[:200].split(" ")
    lines: list[str] = []
    while words and len(lines) < count - 1:
        line = words.pop(0)
        while words and draw.textlength(f"{line} {words[0]}", font=font) <= width:
            line += " " + words.pop(0)
        lines.append(_fit(draw, line, font, width))
    rest = " ".join(words)
    if rest and draw.textlength(rest, font=font) > width:
        while rest and draw.textlength("…" + rest, font=font) > width:
            rest = rest[1:]
        rest = "…" + rest
    if rest:
        lines.append(rest)
    return lines


def measure() -> ImageDraw.ImageDraw:
    """A drawing surface for measuring text as the cards do."""
    return ImageDraw.Draw(Image.new("RGB", (1, 1)))


@dataclass(frozen=True)
class Card:
    """What one share image draws."""

    kicker: str
    columns: tuple[Column, ...]
    footer: str

    def text(self) -> str:
        """Everything the card draws, as plain text (the PNG itself carries no text chunk)."""
        lines = [self.kicker]
        shown = 6 if len(self.columns) <= 1 else 4  # as many metrics as _metrics draws
        for column in self.columns[:4]:
            lines.append(f"{column.title} — {column.subtitle}")
            lines.extend(f"{m.label}: {m.value}" for m in column.metrics[:shown])
        lines.append(self.footer)
        return "\n".join(" ".join(str(line).split()) for line in lines)


def render_card(*, kicker: str, columns: list[Column], footer: str) -> bytes:
    """The PNG bytes of a card: a kicker line, one to four columns of metrics, a footer."""
    image = Image.new("RGB", SIZE, BACKGROUND)
    draw = ImageDraw.Draw(image)
    margin = 56
    draw.text((margin, 40), "◆ BenchLoop", font=_font(34, bold=True), fill=ACCENT)
    draw.text((margin + 260, 50), _fit(draw, kicker, _font(24), 820), font=_font(24), fill=MUTED)
    count = max(1, len(columns))
    gap = 24
    width = (SIZE[0] - 2 * margin - gap * (count - 1)) // count
    top = 120
    for index, column in enumerate(columns[:4]):
        left = margin + index * (width + gap)
        draw.rounded_rectangle((left, top, left + width, SIZE[1] - 90), radius=18, fill=SURFACE)
        colour = SERIES[index % len(SERIES)] if count > 1 else ACCENT
        draw.rectangle((left, top + 18, left + 6, top + 70), fill=colour)
        single = count == 1
        title_font = _font(40 if single else 24, bold=True)
        if single:
            lines = [_fit(draw, column.title, title_font, width - 48)]
        else:
            lines = title_lines(draw, column.title, title_font, width - 48, 2)
        for number, line in enumerate(lines):
            draw.text((left + 24, top + 14 + 30 * number), line, font=title_font, fill=TEXT)
        draw.text(
            (left + 24, top + (68 if single else 78)),
            _fit(draw, column.subtitle, _font(22), width - 48),
            font=_font(22),
            fill=MUTED,
        )
        _metrics(
            draw,
            column.metrics,
            left + 24,
            top + (120 if single else 112),
            width - 48,
            single=single,
        )
    draw.text(
        (margin, SIZE[1] - 64), _fit(draw, footer, _font(22), 1080), font=_font(22), fill=MUTED
    )
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def _metrics(
    draw: ImageDraw.ImageDraw,
    metrics: tuple[Metric, ...],
    left: int,
    top: int,
    width: int,
    *,
    single: bool,
) -> None:
    per_row = 3 if single else 1
    cell = width // per_row
    value_font = _font(54 if single else 34, bold=True)
    label_font = _font(22 if single else 18)
    row_height = 130 if single else 76
    for index, metric in enumerate(metrics[: 6 if single else 4]):
        x = left + (index % per_row) * cell
        y = top + (index // per_row) * row_height
        draw.text(
            (x, y), _fit(draw, metric.value, value_font, cell - 16), font=value_font, fill=TEXT
        )
        draw.text(
            (x, y + (62 if single else 40)),
            _fit(draw, metric.label, label_font, cell - 16),
            font=label_font,
            fill=MUTED,
        )
