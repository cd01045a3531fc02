"""Real data for a fresh install: the community measurements in shared/data/real and the
earlier product's own run files. `seed_real` (README command 1) loads both; `seed_demo` adds
the synthetic stacks the scale benchmarks and page tests use, and only when asked."""

from __future__ import annotations

from collections import Counter
from io import TextIOBase
from pathlib import Path

from django.conf import settings

from runs import methods
from runs.importers import FormatError, is_results_file, parse_path, read_file
from runs.services import refresh_stack_stats
from submissions.intake import import_batch, import_records, records_problem
from submissions.models import Status, Submission

# leaderboard.json is left out: its source repository has no licence (tests only).
FIXTURE_FILES = [
    "leaderboard-v1.json",
    "generated/v3-full-local/run.json",
    "generated/v3-smoke-local-run.json",
    "generated/v3-custom-remote/run.json",
    "generated/v2-0.2.3-local/run.json",
    "generated/bench_results.jsonl",
]


def import_fixture_files(out: TextIOBase) -> int:
    """The earlier product's real data files, through the upload's plausibility checks (as
    every import is); the number of runs imported."""
    base = Path(settings.BENCHLOOP_FIXTURES_DIR)
    if not base.is_dir():
        out.write(
            f"no fixture folder at {base}: no real runs imported. Set "
            "BENCHLOOP_FIXTURES_DIR to a copy of the earlier product's data files "
            "(shared/fixtures/benchloop) to add its real runs.\n"
        )
        return 0
    out.write(f"real runs from the earlier product's data files in {base}:\n")
    imported = 0
    for name in FIXTURE_FILES:
        path = base / name
        if not path.exists():
            out.write(f"  {name}: missing, skipped\n")
            continue
        try:
            records = parse_path(path)
        except FormatError as exc:
            out.write(f"  skipped {path}: {exc}\n")
            continue
        result = import_records(records, source_name=path.name, check=True)
        imported += len(result.created)
        out.write(f"  {name}: {len(result.created)} runs\n")
    return imported


def import_real_data(out: TextIOBase) -> Counter:
    """Every results file under BENCHLOOP_REAL_DATA_DIR, each through the upload's checks (a
    row that fails them is stored flagged, unpublished); runs created per (method, status)."""
    base = Path(settings.BENCHLOOP_REAL_DATA_DIR)
    created: Counter = Counter()
    if not base.is_dir():
        out.write(
            f"no real-data folder at {base}: no community measurements imported. Set "
            "BENCHLOOP_REAL_DATA_DIR to a copy of shared/data/real.\n"
        )
        return created
    files = sorted(p for p in base.rglob("*") if p.is_file() and is_results_file(p))
    good = []
    for path in files:
        records, problem = read_file(path)
        problem = problem or records_problem(records)
        if problem:
            out.write(f"  skipped {path.relative_to(base)}: {problem}\n")
            continue
        good.append((str(path.relative_to(base)), records))
    touched: set[int] = set()
    ids: list[int] = []
    for result in import_batch(good):
        touched |= result.stack_ids
        ids += [run.id for run in result.created]
    refresh_stack_stats(stack_ids=touched)
    rows = Submission.objects.filter(run_id__in=ids).values_list("run__method", "status")
    created.update(rows)
    return created


def describe(created: Counter) -> list[str]:
    """One line per source: runs imported, and how many the checks held back."""
    lines = []
    for method in sorted({m for m, _ in created}):
        total = sum(n for (m, _), n in created.items() if m == method)
        flagged = created[(method, Status.FLAGGED)]
        share = f" ({flagged / total:.1%})" if total else ""
        lines.append(
            f"  {methods.method_label(method)}: {total} runs, {flagged} flagged by the "
            f"plausibility checks{share}, held for a moderator"
        )
    return lines


def join_unsized_classes() -> int:
    """After a seed: classes without a memory size join their one sized peer where an earlier
    file made the unsized one first (runs.identities.merge_unsized_classes); the number joined."""
    from types import SimpleNamespace

    from runs.identities import merge_unsized_classes
    from runs.models import Hardware, HardwareClass, Lane, Run

    models = SimpleNamespace(hardware_class=HardwareClass, hardware=Hardware, run=Run, lane=Lane)
    return merge_unsized_classes(models, lambda ids: refresh_stack_stats(stack_ids=ids))


def site_figures() -> str:
    """What the leaderboard holds now, counted from the data (the README quotes no figure,
    so none goes stale): published runs, the stacks and hardware classes they are on."""
    from runs.models import Run

    published = Run.objects.published()
    runs = published.count()
    stacks = published.values("stack_id").distinct().count()
    classes = published.values("hardware_class_id").distinct().count()
    return (
        f"the leaderboard now shows {runs} published run{'s' if runs != 1 else ''} on "
        f"{stacks} stack{'s' if stacks != 1 else ''} in {classes} hardware "
        f"class{'es' if classes != 1 else ''}"
    )
