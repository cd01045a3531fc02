"""How well the speed estimates (runs/estimates.py) predict lanes they never saw (issue 29).

Run it on a database that `import_results` filled with shared/data/real, nothing else:

    createdb -h 127.0.0.1 -U postgres benchloop_real
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/benchloop_real
    .venv/bin/python manage.py migrate -v0
    .venv/bin/python manage.py import_results ../shared/data/real
    .venv/bin/python bench/estimate_accuracy.py          # --worst N lists the largest misses

A lane is one stack on one hardware class; its truth is the median of its published runs. Every
lane is held out in turn with all the lanes of its model on its class, and estimated from the
rest (leaderboard.estimated.measured_lanes collects them, as the site calibrates on them).
It prints the median absolute percentage error and the 80% interval's coverage, overall,
by hardware kind and by engine, beside the plain formula (ceiling × one global efficiency) and
the raw ceiling, and the lanes that could not be estimated with the reason.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchloop_site.settings")

import django  # noqa: E402

django.setup()

from leaderboard.estimated import measured_lanes  # noqa: E402
from runs import estimates  # noqa: E402
from runs.models import Stack  # noqa: E402


def _row(name: str, trials: list[estimates.Trial]) -> str:
    s = estimates.summarise(trials)
    return (
        f"| {name} | {s.n} | {s.calibrated_mdape:.1%} | {s.coverage:.1%} | ×{s.width:.2f} "
        f"| {s.plain_mdape:.1%} | {s.plain_coverage:.1%} | ×{s.plain_width:.2f} "
        f"| {s.ceiling_mdape:.1%} |"
    )


def report(trials: list[estimates.Trial], metric: str, sources: dict[str, str]) -> None:
    print(f"\n### {metric}: held-out lanes\n")
    print(
        "| lanes | n | calibrated: median abs. error | 80% interval held | interval width"
        " | plain formula: error | plain: interval held | plain: width | raw ceiling: error |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print(_row("all", trials))
    for attribute in ("kind", "engine"):
        by = defaultdict(list)
        for trial in trials:
            by[getattr(trial.lane, attribute)].append(trial)
        for value, group in sorted(by.items(), key=lambda item: -len(item[1])):
            print(_row(f"{attribute} {value}", group))
    # Where the lanes came from (the stack's measuring method: an imported source or a tool).
    by_source = defaultdict(list)
    for trial in trials:
        by_source[sources[trial.lane.ident]].append(trial)
    for value, group in sorted(by_source.items(), key=lambda item: -len(item[1])):
        print(_row(f"source {value}", group))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worst", type=int, default=0, help="list the N largest decode misses")
    args = parser.parse_args()
    lanes, skipped = measured_lanes()
    methods = dict(Stack.objects.values_list("id", "method"))
    sources = {lane.ident: methods[int(lane.ident.split("@")[0])] for lane in lanes}
    print(f"measured lanes with a ceiling: {len(lanes)}; skipped: {sum(skipped.values())}")
    for reason, n in skipped.most_common():
        print(f"{n:6}  {reason}")
    for metric in estimates.METRICS:
        trials = estimates.hold_out(lanes, metric)
        if trials:
            report(trials, metric, sources)
        if metric == "decode" and args.worst:
            print()
            for t in sorted(trials, key=lambda t: -t.calibrated_error)[: args.worst]:
                print(
                    f"{t.calibrated_error:7.1%} truth {t.truth:8.1f} est {t.calibrated.value:8.1f}"
                    f" [{t.calibrated.low:.1f}, {t.calibrated.high:.1f}] n={t.calibrated.group.n}"
                    f" {t.lane.label}"
                )


if __name__ == "__main__":
    main()
