"""import_results runs the upload's plausibility checks: a planted fake among real LocalMaxxing
rows is stored flagged and unpublished, declared speculation is judged with its allowance, an
MoE whose active size nobody states is not held to a dense ceiling, and a toy model is judged
by the roofline rather than the absolute bound."""

from __future__ import annotations

import copy
import io
import json
import os
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from runs.models import Run
from submissions.models import Status, Submission

REAL = Path(
    os.environ.get(
        "BENCHLOOP_REAL_DATA_DIR", Path(settings.BASE_DIR).parent / "shared" / "data" / "real"
    )
)
CACHE = REAL / "llmfit" / "benchmark_cache.json"

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not CACHE.is_file(), reason=f"no real data at {REAL}"),
]


def _real_row(predicate) -> dict:
    """The first real LocalMaxxing row that `predicate` accepts, as the source holds it."""
    presets = json.loads(CACHE.read_text(encoding="utf-8"))["presets"]
    for preset in presets.values():
        for row in preset["rows"]:
            if predicate(row):
                return copy.deepcopy(row)
    raise AssertionError("no such row in the real data")


def _import(tmp_path: Path, *rows: dict) -> dict[str, Submission]:
    """The rows as one LocalMaxxing cache file, through import_results; submissions by row id."""
    document = {"scraped_at": "2026-08-22T00:00:00Z", "presets": {"Test preset": {"rows": rows}}}
    path = tmp_path / "benchmark_cache.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    out = io.StringIO()
    call_command("import_results", str(path), stdout=out)
    found = Submission.objects.select_related("run__stack")
    return {s.run.provenance["row_id"]: s for s in found}


# A real row: NVIDIA-Nemotron-3-Nano-4B at Q4_K_M under llama.cpp on one RTX 3090, 149 tok/s.
# Its ceiling: 936 GB/s ÷ (4B × 4.85 bits ÷ 8 = 2.43 GB) = 386 tok/s, flagged above 1.15× (444)
# without declared speculation and above 1.15 × 3 × (1,331) with it (no draft length stated).
HONEST_ID = "cmrsumd5h0728lg01ki3cgp47"


def _honest(row: dict) -> bool:
    return row.get("id") == HONEST_ID


def test_a_planted_5x_fake_is_stored_flagged_and_unpublished(tmp_path: Path) -> None:
    honest = _real_row(_honest)
    fake = copy.deepcopy(honest)
    fake["id"] = "planted-fake"
    fake["tokSOut"] = honest["tokSOut"] * 5
    fake["createdAt"] = "2026-08-01T00:00:00.000Z"

    found = _import(tmp_path, honest, fake)

    assert found[honest["id"]].status == Status.APPROVED
    assert found[honest["id"]].run.published
    planted = found["planted-fake"]
    assert planted.status == Status.FLAGGED and not planted.run.published
    assert any(r.startswith("decode ") and "> ceiling" in r for r in planted.flag_reasons)
    # Nothing public shows it: the board's lanes count the honest run alone.
    assert Run.objects.published().filter(provenance__row_id="planted-fake").count() == 0


def test_declared_speculation_gets_its_allowance_and_undeclared_does_not(
    tmp_path: Path,
) -> None:
    honest = _real_row(_honest)
    declared, undeclared = copy.deepcopy(honest), copy.deepcopy(honest)
    for row, name in ((declared, "declared"), (undeclared, "undeclared")):
        row["id"] = name
        row["tokSOut"] = 700.0  # above 1.15× the plain ceiling, within 1.15 × 3×
        row["createdAt"] = f"2026-08-0{2 if name == 'declared' else 3}T00:00:00.000Z"
    declared["engineFlags"] = {**(declared.get("engineFlags") or {}), "specDecoding": True}

    found = _import(tmp_path, declared, undeclared)

    assert found["declared"].status == Status.APPROVED
    assert found["undeclared"].status == Status.FLAGGED
    assert any(
        "flagged above 1.15×" in r and r.endswith("declare speculation if you used it")
        for r in found["undeclared"].flag_reasons
    )


def test_an_moe_of_unstated_active_size_is_not_held_to_a_dense_ceiling(tmp_path: Path) -> None:
    def moe(row: dict) -> bool:
        model = row.get("model") or {}
        return bool(model.get("isMoE")) and row.get("tokSOut") and model.get("params")

    row = _real_row(moe)
    row["id"] = "moe-unknown-active"
    row["model"] = {**row["model"], "hfId": "some-org/Unnamed-Experts", "activeParams": None}
    row["model"].pop("baseModel", None)

    found = _import(tmp_path, row)

    assert found["moe-unknown-active"].status == Status.APPROVED
    assert found["moe-unknown-active"].run.stack.launch_settings.get("moe") is True
