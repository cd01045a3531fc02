"""A stored run without the speed suite has no speed score (issue 32): null, "not scored".

Engines before issue 32 wrote speed_score 0.0 into a bundle with no speed suite (quality
suites alone, or the measured-only sweeps), and the site stored it; since then the engine
writes null and the importer keeps null (runs.importers.runjson). This sets the stored ones to
null. Backwards, the same runs get their 0.0 again. Only the engine's own formats (frozen here)
are touched: imported speed files never had a speed score to lose.
"""

from __future__ import annotations

from django.db import migrations
from django.db.models import Exists, OuterRef

# Frozen here: the run formats written by engines before issue 32 (runs.importers.upgrade).
ENGINE_FORMATS = ("bundle-1", "envelope-v3", "run-v3")


def _unscored(apps):
    """Complete runs on the v3 or speed-only scale, from the engine, with no speed suite."""
    run = apps.get_model("runs", "Run")
    suite = apps.get_model("runs", "SuiteResult")
    speed = suite.objects.filter(run=OuterRef("pk"), suite="speed")
    return (
        run.objects.filter(source_format__in=ENGINE_FORMATS, outcome="complete")
        .exclude(score_scale="v2")
        .exclude(Exists(speed))
    )


def forwards(apps, schema_editor) -> None:
    _unscored(apps).filter(speed_score=0.0).update(speed_score=None)


def backwards(apps, schema_editor) -> None:
    _unscored(apps).filter(speed_score__isnull=True).update(speed_score=0.0)


class Migration(migrations.Migration):
    dependencies = [("runs", "0014_speed_version")]

    operations = [migrations.RunPython(forwards, backwards)]
