"""How well the speed estimates (runs/estimates.py) predict lanes they never saw (issue 29).

Run it on a database that `import_results` filled with shared/data/real, nothing else:

    createdb -h 127.0.0.1 -U postgres benchloop_h8_real
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/benchloop_h8_real
    .venv/bin/python manage.py migrate -v0
    .venv/bin/python manage.py import_results ../shared/data/real
    .venv/bin/python bench/estimate_accuracy.py          # --worst N lists the largest misses

A lane is one stack on one hardware class; its truth is the median of its published runs. Every
lane is held out in turn with all the lanes of its model on its class, and estimated from the
rest. It prints the median absolute percentage error and the 80% interval's coverage, overall,
by hardware kind and by engine, beside the plain formula (ceiling × one global efficiency) and
the raw ceiling, and the lanes that could not be estimated with the reason.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchloop_site.settings")

import django  # noqa: E402

django.setup()

from runs import estimates, roofline  # noqa: E402
from runs.models import HardwareKind, Run  # noqa: E402
from submissions import integrity  # noqa: E402


def _speculative(stack) -> bool:
    declared = (stack.launch_settings or {}).get("speculative")
    return bool(stack.draft_model) or declared not in (None, "", False, "no", "off", "none")


def measured_lanes() -> tuple[list[estimates.Lane], Counter]:
    """The published lanes with a known ceiling, and why the others were skipped."""
    catalog = integrity.current_catalog()
    grouped = defaultdict(list)
    runs = Run.objects.published().select_related("stack", "hardware", "hardware_class")
    for run in runs.exclude(hardware_class=None):
        grouped[(run.stack_id, run.hardware_class_id)].append(run)
    lanes, skipped = [], Counter()
    for (stack_id, class_id), found in sorted(grouped.items()):
        first = found[0]
        stack, hw_class = first.stack, first.hardware_class
        decode = [r.decode_tps for r in found if r.decode_tps]
        prefill = [r.prefill_tps for r in found if r.prefill_tps]
        if hw_class.kind in (HardwareKind.REMOTE, HardwareKind.UNKNOWN):
            skipped["remote or unknown hardware: no roofline"] += 1
            continue
        if not decode and not prefill:
            skipped["no speed measured"] += 1
            continue
        if _speculative(stack):
            # Speculative decoding may beat the bandwidth ceiling; the roofline does not bound it.
            skipped["speculative decoding or MTP: the roofline does not bound it"] += 1
            continue
        if first.hardware is None:
            skipped["no machine recorded"] += 1
            continue
        found_ceilings = integrity.ceilings_for(stack, first.hardware, catalog)
        if isinstance(found_ceilings, roofline.Unknown):
            reason = found_ceilings.reason
            if found_ceilings.hardware_name:
                reason = f"{found_ceilings.hardware_kind.upper()} not in the accelerator data"
            elif reason.startswith("the parameter count"):
                reason = "the model's parameter count is unknown (no size in its name)"
            skipped[f"no ceiling: {reason}"] += 1
            continue
        if integrity._moe_of_unknown_size(stack, found_ceilings):
            skipped["no ceiling: MoE with unknown active parameters"] += 1
            continue
        lanes.append(
            estimates.lane_features(
                ident=f"{stack_id}@{class_id}",
                ceilings=found_ceilings,
                model_id=stack.model_id,
                class_key=hw_class.key,
                kind=hw_class.kind,
                engine=stack.engine,
                backend=str((stack.launch_settings or {}).get("backend") or ""),
                decode=statistics.median(decode) if decode else None,
                prefill=statistics.median(prefill) if prefill else None,
                devices=hw_class.count or 1,
                memory_gb=hw_class.memory_gb,
                label=f"{stack.model_id[:40]} {stack.quantization} {stack.engine} "
                f"on {hw_class.label}",
            )
        )
    return lanes, skipped


def _row(name: str, trials: list[estimates.Trial]) -> str:
    s = estimates.summarise(trials)
    return (
        f"| {name} | {s.n} | {s.calibrated_mdape:.1%} | {s.coverage:.1%} | ×{s.width:.2f} "
        f"| {s.plain_mdape:.1%} | {s.plain_coverage:.1%} | ×{s.plain_width:.2f} "
        f"| {s.ceiling_mdape:.1%} |"
    )


def report(trials: list[estimates.Trial], metric: str) -> None:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worst", type=int, default=0, help="list the N largest decode misses")
    args = parser.parse_args()
    lanes, skipped = measured_lanes()
    print(f"measured lanes with a ceiling: {len(lanes)}; skipped: {sum(skipped.values())}")
    for reason, n in skipped.most_common():
        print(f"{n:6}  {reason}")
    for metric in estimates.METRICS:
        trials = estimates.hold_out(lanes, metric)
        if trials:
            report(trials, metric)
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
