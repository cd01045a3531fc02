"""import_results reads the other tools' files: a table that names no machine is refused with
the question, not a guess, and `--hardware` answers it; a folder walk passes over READMEs,
licences and schemas beside the data."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from runs.models import Run

DATA = Path(__file__).parent / "data" / "external"
pytestmark = pytest.mark.django_db


def _import(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_results", *args, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def test_a_table_without_its_machine_is_refused_with_the_question() -> None:
    err = io.StringIO()
    with pytest.raises(CommandError, match="1 file"):
        call_command("import_results", str(DATA / "llama-bench.md"), stdout=io.StringIO(),
                     stderr=err)  # fmt: skip
    assert "--hardware" in err.getvalue() and Run.objects.count() == 0


def test_hardware_named_in_words_answers_it() -> None:
    printed = _import(str(DATA / "llama-bench.md"), "--hardware", "RTX 4090 24 GB")
    run = Run.objects.get()
    assert "created 1" in printed
    assert run.method == "llama-bench" and run.hardware_class.slug == "rtx-4090-24gb"
    assert run.stack.method == "llama-bench" and run.stack.label.endswith("(llama-bench)")


def test_hardware_words_that_name_nothing_stop_the_command() -> None:
    with pytest.raises(CommandError, match="--hardware"):
        _import(str(DATA / "llama-bench.md"), "--hardware", "  ")


def test_a_folder_walk_reads_the_results_and_passes_over_the_rest(tmp_path: Path) -> None:
    for name in ("llama-bench.json", "llama-bench.sql"):
        shutil.copy(DATA / name, tmp_path / name)
    (tmp_path / "README.md").write_text("# notes\n\nnot a results table\n")
    (tmp_path / "LICENSE").write_text("MIT\n")
    (tmp_path / "schema.json").write_text('{"type": "object"}')
    printed = _import(str(tmp_path))
    # Two files, two runs (a file's id comes from its own content), nothing else read.
    assert "total: 2 created, 0 skipped, 0 file(s) rejected" in printed
    assert "README" not in printed and "schema" not in printed
