"""How the upload's plausibility checks judge the real community data (issue 28, Must show 4).

Run it on a database that `import_results` filled with shared/data/real, nothing else:

    createdb -h 127.0.0.1 -U postgres benchloop_real
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/benchloop_real
    .venv/bin/python manage.py migrate -v0
    .venv/bin/python manage.py import_results ../shared/data/real
    .venv/bin/python bench/real_flags.py            # --rows lists every flagged row

It prints, per source, the runs with and without declared speculation and how many of each
were flagged, then the flags by kind (the first reason, numbers blanked), then the evidence for
the ceiling's margin: how close the approved runs without speculation come to their ceilings
(measured ÷ ceiling, decode and prefill, by source).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchloop_site.settings")

import django  # noqa: E402

django.setup()

from runs import methods, roofline  # noqa: E402
from submissions import integrity, run_facts  # noqa: E402
from submissions.models import Status, Submission  # noqa: E402


def _speculative(stack) -> bool:
    return run_facts.speculation_of(stack) is not None


def efficiencies(submissions) -> dict[str, dict[str, list[float]]]:
    """measured ÷ ceiling of the approved runs without speculation, by source and metric."""
    catalog = integrity.current_catalog()
    found: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for submission in submissions:
        run = submission.run
        if submission.status != Status.APPROVED or run.hardware is None:
            continue
        if _speculative(run.stack):
            continue
        ceilings = integrity.ceilings_for(run.stack, run.hardware, catalog, run.raw_payload)
        if not isinstance(ceilings, roofline.Ceilings):
            continue
        if run.decode_tps_median:
            found[run.method]["decode"].append(run.decode_tps_median / ceilings.decode_tps)
        if run.prefill_tps_median and ceilings.prefill_tps:
            found[run.method]["prefill"].append(run.prefill_tps_median / ceilings.prefill_tps)
    return found


def _quantiles(values: list[float]) -> str:
    if len(values) < 20:
        return f"n={len(values)}, max {max(values):.2f}" if values else "n=0"
    cuts = statistics.quantiles(values, n=100)
    return (
        f"n={len(values)}: median {statistics.median(values):.2f}, p90 {cuts[89]:.2f}, "
        f"p99 {cuts[98]:.2f}, max {max(values):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", action="store_true", help="list every flagged row")
    args = parser.parse_args()
    found = Submission.objects.filter(run__method__in=methods.IMPORTED_METHODS)
    submissions = list(found.select_related("run__stack", "run__hardware", "run__hardware_class"))
    counts: Counter = Counter()
    kinds: Counter = Counter()
    rows = []
    for submission in submissions:
        run, stack = submission.run, submission.run.stack
        key = (run.method, _speculative(stack))
        counts[key + ("all",)] += 1
        if submission.status != Status.FLAGGED:
            continue
        counts[key + ("flagged",)] += 1
        reason = submission.flag_reasons[0] if submission.flag_reasons else "?"
        kinds[re.sub(r"[0-9][0-9.,]*", "N", reason.split(" (")[0])[:80]] += 1
        rows.append(
            f"{run.method:13} {stack.model_id[:44]:44} {stack.quantization:10} {stack.engine:10}"
            f" {run.hardware_class.label if run.hardware_class else '-':24}"
            f" decode {run.decode_tps or 0:7.1f}  {reason[:70]}"
        )
    print("| source | rows without speculation | flagged | rows with speculation | flagged |")
    print("|---|---|---|---|---|")
    totals = Counter()
    for method in sorted({m for m, _s, _k in counts}):
        cells = []
        for spec in (False, True):
            n, flagged = counts[(method, spec, "all")], counts[(method, spec, "flagged")]
            totals[(spec, "all")] += n
            totals[(spec, "flagged")] += flagged
            cells += [str(n), f"{flagged} ({flagged / n:.1%})" if n else "0"]
        print(f"| {methods.method_label(method)} | " + " | ".join(cells) + " |")
    cells = []
    for spec in (False, True):
        n, flagged = totals[(spec, "all")], totals[(spec, "flagged")]
        cells += [str(n), f"{flagged} ({flagged / n:.1%})" if n else "0"]
    print("| all | " + " | ".join(cells) + " |")
    print("\nflags by kind:")
    for kind, n in kinds.most_common():
        print(f"{n:5}  {kind}")
    print("\nmeasured ÷ ceiling, approved runs without speculation:")
    for method, metrics in sorted(efficiencies(submissions).items()):
        for metric, values in sorted(metrics.items()):
            print(f"  {methods.method_label(method):18} {metric:8} {_quantiles(values)}")
    if args.rows:
        print("\n" + "\n".join(sorted(rows)))


if __name__ == "__main__":
    main()
