"""bench/integrity_outliers.py, smaller, in CI: the site's speed checks against planted fakes.

The full run (5,000 honest runs, 200 outliers) and its figures are in bench/README.md.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "integrity_outliers", REPO / "bench" / "integrity_outliers.py"
)
bench = importlib.util.module_from_spec(_spec)
sys.modules["integrity_outliers"] = bench
_spec.loader.exec_module(bench)


def test_the_checks_flag_planted_outliers_and_few_honest_runs() -> None:
    dataset, world = bench.build(runs=2000, outliers=140, seed=15)
    bench.check_all(dataset, world)
    result = bench.summarise(dataset, world, 0.0)

    # The dataset is as varied as the issue asks, even at this size.
    assert result["hardware_classes"] >= 25 and result["models"] >= 40
    assert result["moe_models"] >= 5
    assert {"nvidia", "amd", "intel", "apple", "cpu"} <= set(result["vendors"])
    # Every subtle kind is planted (1.3× decode, prefill over a GPU's and a CPU's compute,
    # an impossible first token, a split that cannot sum, undeclared speculation) ...
    assert all(share.endswith("/20") for share in result["recall_by_kind"].values())
    # ... half of them where fewer than three peers exist: only the physics can catch those.
    assert result["sparse_outliers"] >= 70
    # Honest speculative runs and throttled or spilled ones are among the honest runs.
    assert result["speculative_honest"] >= 50
    assert result["recall_sparse"] >= bench.SPARSE_RECALL_TARGET, result["missed_examples"]
    assert result["recall"] >= bench.RECALL_TARGET, result["missed_examples"]
    assert result["false_flag_rate"] <= bench.FALSE_FLAG_TARGET, result["false_flags"]
