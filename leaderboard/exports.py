"""CSV, JSON and Markdown of a leaderboard view (the rows are Run objects with their stack),
and the Atom writer that every feed uses."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Sequence

from django.utils.feedgenerator import Atom1Feed
from django.utils.xmlutils import SimplerXMLGenerator

from runs import bounds
from runs.models import Run

# (header, value of a row); numbers stay numbers so spreadsheets can sort them.
COLUMNS: list[tuple[str, Callable[[Run], object]]] = [
    ("model", lambda r: r.stack.model_id),
    ("quantization", lambda r: r.stack.quantization),
    ("engine", lambda r: r.stack.engine),
    ("engine_version", lambda r: r.engine_version),
    ("harness", lambda r: r.stack.harness),
    ("draft_model", lambda r: r.stack.draft_model),
    ("context_length", lambda r: r.stack.context_length),
    ("hardware", lambda r: r.hardware.label if r.hardware else "remote"),
    ("score_scale", lambda r: r.score_scale),
    ("comparable", lambda r: r.comparable),
    ("verified", lambda r: r.is_verified),
    ("overall", lambda r: r.overall_score),
    ("quality", lambda r: r.quality_score),
    ("speed", lambda r: r.speed_score),
    ("reliability", lambda r: r.reliability_score),
    ("value", lambda r: r.value_score),
    ("decode_tps_median", lambda r: r.decode_tps),
    ("decode_tps_stdev", lambda r: r.decode_tps_stdev),
    ("decode_tps_p5", lambda r: r.decode_tps_p5),
    ("decode_tps_p95", lambda r: r.decode_tps_p95),
    ("prefill_tps_median", lambda r: r.prefill_tps),
    ("ttft_ms_median", lambda r: r.ttft_ms),
    ("runs", lambda r: getattr(r, "stack_runs", None)),
    ("submitters", lambda r: r.stack.submitter_count),
    ("started_at", lambda r: r.started_at.isoformat()),
]
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _rounded(value: object) -> object:
    return round(value, 3) if isinstance(value, float) else value


def records(rows: Sequence[Run], *, base_url: str) -> list[dict]:
    """One plain dict per row, ranked, with links back to the site."""
    out = []
    for rank, run in enumerate(rows, start=1):
        record = {"rank": rank}
        record.update({name: _rounded(get(run)) for name, get in COLUMNS})
        record["stack_url"] = f"{base_url}/stacks/{run.stack_id}/"
        record["run_url"] = f"{base_url}/runs/{run.id}/"
        out.append(record)
    return out


def safe_cell(value: object) -> object:
    """Neutralise spreadsheet formulas: text starting with = + - @ tab or CR gets a quote."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def to_csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\r\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({key: safe_cell(value) for key, value in row.items()})
    return buffer.getvalue()


def to_json(rows: list[dict], *, query: str) -> str:
    return json.dumps({"query": query, "count": len(rows), "rows": rows}, indent=1)


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")
MARKDOWN_COLUMNS = [
    ("rank", "#"),
    ("model", "Model"),
    ("quantization", "Quant"),
    ("engine", "Engine"),
    ("hardware", "Hardware"),
    ("overall", "Overall"),
    ("quality", "Quality"),
    ("decode_tps_median", "Decode tok/s"),
    ("ttft_ms_median", "TTFT ms"),
    ("runs", "Runs"),
]


def markdown_text(value: object) -> str:
    """A table cell that renders as the literal text: markup and HTML are backslash-escaped."""
    if value is None or value == "":
        return "—"
    if isinstance(value, float):
        return f"{value:.1f}"
    text = " ".join(str(value).split())
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text).replace("&", "&amp;")


def to_markdown(rows: list[dict], *, title: str) -> str:
    lines = [f"# {markdown_text(title)}", ""]
    lines.append("| " + " | ".join(label for _, label in MARKDOWN_COLUMNS) + " |")
    lines.append(
        "|" + "|".join("---:" if key != "model" else "---" for key, _ in MARKDOWN_COLUMNS) + "|"
    )
    for row in rows:
        lines.append(
            "| " + " | ".join(markdown_text(row[key]) for key, _ in MARKDOWN_COLUMNS) + " |"
        )
    return "\n".join(lines) + "\n"


class _XmlSafeGenerator(SimplerXMLGenerator):
    """Text and attribute values with what XML 1.0 cannot hold replaced (runs.bounds.xml_text):
    Django's generator raises on a control character, which made the whole feed a 500."""

    def characters(self, content: str) -> None:
        super().characters(bounds.xml_text(content) if content else content)

    def startElement(self, name: str, attrs: dict) -> None:  # noqa: N802 (SAX's name)
        safe = {key: bounds.xml_text(str(value)) for key, value in (attrs or {}).items()}
        super().startElement(name, safe)


class XmlSafeAtomFeed(Atom1Feed):
    """An Atom feed that stays well-formed whatever a stored row or the query string holds."""

    def write(self, outfile, encoding: str) -> None:
        # Atom1Feed.write, with the generator above.
        handler = _XmlSafeGenerator(outfile, encoding, short_empty_elements=True)
        handler.startDocument()
        handler.startElement("feed", self.root_attributes())
        self.add_root_elements(handler)
        self.write_items(handler)
        handler.endElement("feed")
