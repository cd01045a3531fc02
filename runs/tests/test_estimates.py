"""The speed estimates' arithmetic on small hand-built lane sets (runs/estimates.py)."""

from __future__ import annotations

import math

import pytest

from runs import estimates, roofline
from runs.estimates import Lane


def lane(ident, *, model="m", cls="c1", kind="gpu", engine="llama.cpp", eff=0.5, **extra):
    """A lane with a decode ceiling of 100 tok/s that measured `eff` of it."""
    fields = dict(
        ident=ident,
        model=model,
        class_key=cls,
        kind=kind,
        moe=False,
        engine=engine,
        backend="cuda",
        quant="kquant",
        decode_ceiling=100.0,
        prefill_ceiling=None,
        decode=None if eff is None else 100.0 * eff,
        active_gb=4.0,
        fits=True,
    )
    fields.update(extra)
    return Lane(**fields)


def test_quantile_interpolates_like_numpy():
    assert estimates.quantile([4, 1, 3, 2], 0.5) == 2.5
    assert estimates.quantile([1, 2, 3, 4, 5], 0.1) == pytest.approx(1.4)
    assert estimates.quantile([7.0], 0.9) == 7.0


def test_one_group_estimates_its_median_efficiency():
    lanes = [lane(str(i), model=f"m{i}", eff=e) for i, e in enumerate([0.4, 0.5, 0.6])]
    found = estimates.Calibration(lanes, "decode").estimate(lane("new", model="x", eff=None))
    assert found.efficiency == pytest.approx(0.5)
    assert found.value == pytest.approx(50.0)
    assert found.ceiling == 100.0


def test_tails_are_conformal_order_statistics():
    # k = floor(0.1 × (n + 1)): the k-th residual from each end, none below 9 lanes.
    assert estimates.tails(list(range(8))) is None
    assert estimates.tails(list(range(9))) == (0, 8)
    assert estimates.tails(list(range(19))) == (1, 17)


def test_top_level_interval_is_the_tails_of_log_residuals():
    values = [math.log(0.1 * e) for e in range(1, 20)]  # efficiencies 0.1 … 1.9
    top = estimates._shrunk(values, None, ())
    centre = math.log(1.0)
    assert top.centre == pytest.approx(centre)
    assert top.low == pytest.approx(math.log(0.2) - centre)
    assert top.high == pytest.approx(math.log(1.8) - centre)


def test_small_group_is_shrunk_toward_its_parent():
    parent = estimates.Level((), 100, math.log(0.5), -0.4, 0.4)
    values = [math.log(0.8)] * 4  # n = PRIOR: half its own median, half the parent's
    child = estimates._shrunk(values, parent, ("gpu",))
    assert child.centre == pytest.approx((math.log(0.8) + math.log(0.5)) / 2)
    # Four lanes cannot bound an 80% interval: the parent's spread is kept.
    assert (child.low, child.high) == (-0.4, 0.4)


def test_group_spread_blends_with_the_parent_from_nine_lanes():
    parent = estimates.Level((), 100, 0.0, -0.4, 0.4)
    values = [-0.1 + 0.025 * i for i in range(9)]  # -0.1 … 0.1, median 0
    child = estimates._shrunk(values, parent, ("gpu",))
    weight = 9 / (9 + estimates.PRIOR)
    assert child.centre == pytest.approx(0.0)
    spread = 9 / (9 + estimates.SPREAD_PRIOR)
    assert child.low == pytest.approx(spread * -0.1 + (1 - spread) * -0.4)
    assert child.high == pytest.approx(spread * 0.1 + (1 - spread) * 0.4)
    assert weight < 1


def test_large_group_decides_and_empty_group_inherits():
    parent = estimates.Level((), 100, math.log(0.5), -0.4, 0.4)
    big = estimates._shrunk([math.log(0.8)] * 396, parent, ("gpu",))
    assert math.exp(big.centre) == pytest.approx(0.8, rel=0.01)
    empty = estimates._shrunk([], parent, ("gpu",))
    assert (empty.n, empty.centre, empty.low, empty.high) == (0, parent.centre, -0.4, 0.4)


def test_hierarchy_uses_the_narrowest_groups_that_match():
    cpu = [lane(f"c{i}", model=f"c{i}", kind="cpu", eff=0.9) for i in range(40)]
    gpu = [lane(f"g{i}", model=f"g{i}", kind="gpu", eff=0.3) for i in range(40)]
    calibration = estimates.Calibration(cpu + gpu, "decode")
    on_cpu = calibration.estimate(lane("new", model="x", kind="cpu", eff=None))
    on_gpu = calibration.estimate(lane("new", model="x", kind="gpu", eff=None))
    assert on_cpu.efficiency == pytest.approx(0.9, rel=0.05)
    assert on_gpu.efficiency == pytest.approx(0.3, rel=0.05)
    # The plain formula ignores the groups: one efficiency for both.
    assert calibration.global_estimate(lane("x", eff=None)).efficiency == pytest.approx(
        math.sqrt(0.9 * 0.3)
    )
    assert [level.key for level in on_cpu.levels][:2] == [(), ("cpu",)]
    assert len(on_cpu.levels) == 1 + len(estimates.LEVELS)


def test_hold_out_leaves_out_the_model_on_its_class_only():
    target = lane("t", model="a", cls="c1", eff=0.5)
    twin = lane("twin", model="a", cls="c1", engine="ollama", eff=0.05)  # same model, class
    elsewhere = lane("e", model="a", cls="c2", eff=0.5)  # same model, another class
    others = [lane(f"o{i}", model=f"o{i}", cls="c1", eff=0.5) for i in range(3)]
    trials = estimates.hold_out([target, twin, elsewhere, *others], "decode")
    by_lane = {trial.lane.ident: trial for trial in trials}
    first = by_lane["t"]
    # 6 lanes, the target and its twin out: 4 calibrate it, all at 0.5.
    assert first.calibrated.levels[0].n == 4
    assert first.calibrated.efficiency == pytest.approx(0.5)
    assert first.calibrated_error == pytest.approx(0.0)
    assert first.ceiling_error == pytest.approx(1.0)  # ceiling 100 against 50 measured
    # The twin was never a training lane for the target, but "elsewhere" was (model level).
    assert first.calibrated.levels[-1].key[-1] == "a"
    assert first.calibrated.levels[-1].n == 1


def test_unmeasured_and_ceilingless_lanes_are_not_trials():
    lanes = [lane("a", model="a"), lane("b", model="b", eff=None), lane("c", decode_ceiling=None)]
    lanes += [lane(f"o{i}", model=f"o{i}") for i in range(3)]
    trials = estimates.hold_out(lanes, "decode")
    assert {t.lane.ident for t in trials} == {"a", "o0", "o1", "o2"}
    summary = estimates.summarise(trials)
    assert summary.n == 4
    assert summary.calibrated_mdape == pytest.approx(0.0)
    assert summary.coverage == 1.0
    # Below nine lanes no interval has a low end: its width is unbounded, not a division error.
    assert summary.width == math.inf


def test_features_from_names():
    assert estimates.engine_key("LlamaCpp") == "llama.cpp"
    assert estimates.engine_key("") == "unstated"
    assert estimates.backend_key("", "apple") == "metal"
    assert estimates.backend_key("", "gpu") == "unstated"
    assert estimates.quant_family(roofline.bits_per_weight("Q4_K_M")) == "kquant"
    assert estimates.quant_family(roofline.bits_per_weight("Q4_0")) == "legacy"
    assert estimates.quant_family(roofline.bits_per_weight("IQ2_XXS")) == "iquant"
    assert estimates.quant_family(roofline.bits_per_weight("BF16")) == "float"
    assert estimates.quant_family(roofline.bits_per_weight("Q8_0")) == "8bit"
    assert estimates.quant_family(roofline.bits_per_weight("4bit")) == "mlx"
    assert estimates.quant_family(roofline.bits_per_weight("")) == "unstated"
    # The held-out unit is the model, whatever its file's quantization.
    assert estimates.model_key("unsloth/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf") == estimates.model_key(
        "Qwen/Qwen3-8B-Q8_0"
    )


def test_weights_fit_compares_all_weights_with_memory():
    from runs import accelerators

    found = roofline.ceilings(
        accelerators.catalog(),
        gpu_model="NVIDIA GeForce RTX 4090",
        gpu_count=1,
        vram_gb=24,
        cpu_model="",
        model_id="qwen3-32b",
        params_b=32.0,
        quantization="Q4_K_M",
    )
    assert isinstance(found, roofline.Ceilings)
    assert estimates.weights_fit(found, 24.0) is True  # 32 × 4.5 / 8 = 18 GB
    assert estimates.weights_fit(found, 12.0) is False
    assert estimates.weights_fit(found, None) is None
    built = estimates.lane_features(
        ident="x",
        ceilings=found,
        model_id="qwen3-32b",
        class_key="c",
        kind="gpu",
        engine="llama.cpp",
        memory_gb=12.0,
    )
    assert built.fits is False
    assert built.path()[2] == ("gpu", "1", "spills")


def test_a_compiled_calibration_estimates_exactly_as_the_full_one():
    """The site caches Calibration.compiled(): every level and shift worked out, the lanes
    dropped. Its estimates (seen paths, unseen ones, unseen families and classes) are the same."""
    lanes = [
        lane(f"{i}", model=f"fam{i % 3}-{i}b", cls=f"c{i % 4}", engine=("vllm", "llama.cpp")[i % 2],
             eff=0.2 + 0.03 * i)
        for i in range(30)
    ]  # fmt: skip
    full = estimates.Calibration(lanes, "decode")
    compiled = estimates.Calibration(lanes, "decode").compiled()
    assert not compiled.by_class and not compiled.by_family
    probes = [
        lane("a", model="fam1-7b", cls="c2", eff=None),
        lane("b", model="other-3b", cls="c9", engine="mlx", eff=None),
        lane("c", model="fam0-13b", cls="c0", kind="cpu", eff=None),
    ]
    for probe in probes:
        assert compiled.estimate(probe) == full.estimate(probe)
        assert compiled.global_estimate(probe) == full.global_estimate(probe)
