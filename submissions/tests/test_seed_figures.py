"""Issue 32: the demo's figures come from the data, printed by the seed command (the README
quotes none, so none goes stale), and the seeded classes hold no unsized peer of a sized one."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from django.core.management import call_command

from runs.models import HardwareClass, Run

pytestmark = pytest.mark.django_db
README = Path(__file__).resolve().parents[2] / "README.md"
FIGURES = re.compile(
    r"the leaderboard now shows (\d+) published runs? on (\d+) stacks? in (\d+) hardware class"
)


def test_seed_demo_prints_the_figures_of_the_data_it_left(settings, fixtures_dir) -> None:
    settings.BENCHLOOP_FIXTURES_DIR = fixtures_dir
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    found = FIGURES.search(out.getvalue())
    assert found, out.getvalue()[-500:]
    published = Run.objects.published()
    assert [int(n) for n in found.groups()] == [
        published.count(),
        published.values("stack_id").distinct().count(),
        published.values("hardware_class_id").distinct().count(),
    ]
    # An Apple chip or GPU recorded without its memory joined its one sized class.
    for unsized in HardwareClass.objects.filter(kind__in=("apple", "gpu"), memory_gb=None):
        sized = HardwareClass.objects.filter(
            kind=unsized.kind, chip=unsized.chip, count=unsized.count, memory_gb__isnull=False
        )
        assert sized.count() != 1, f"{unsized.label} sits beside {sized.get().label}"
        assert unsized.label.endswith("memory not reported"), unsized.label


def test_the_readme_quotes_no_run_or_stack_count() -> None:
    text = README.read_text()
    quoted = re.findall(r"\b\d[\d,]* (?:runs?|stacks?) (?:on|across) \d[\d,]* stacks?", text)
    assert quoted == [], quoted
    assert "the leaderboard now shows N published runs" in re.sub(r"\s+", " ", text)
