"""The held-out evaluation never sees the lane it estimates, and the features added for issue 29
(a name's active parameters, the model family's shift) do what they say (runs/estimates.py)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from runs import accelerators, estimates, roofline
from runs.tests.test_estimates import lane


def _crowd():
    """Forty lanes on two classes at efficiencies 0.3-0.7, of forty models of two families."""
    return [
        lane(
            f"o{i}",
            model=f"fam{i % 2}-{i}b",
            cls=f"c{i % 2}",
            eff=0.3 + 0.01 * i,
        )
        for i in range(40)
    ]


def test_a_held_out_lanes_own_speed_never_reaches_its_estimate():
    target = lane("t", model="fam0-9b", cls="c0", eff=0.5)
    twin = lane("twin", model="fam0-9b", cls="c0", engine="ollama", eff=0.45)
    lanes = [target, twin, *_crowd()]
    first = {t.lane.ident: t for t in estimates.hold_out(lanes, "decode")}["t"]
    # Change only what the held-out lane and its twin measured, wildly: their estimate must
    # not move, through the hierarchy, the family's shift or the class's.
    wild = [
        dataclasses.replace(target, decode=5000.0),
        dataclasses.replace(twin, decode=0.001),
        *_crowd(),
    ]
    again = {t.lane.ident: t for t in estimates.hold_out(wild, "decode")}["t"]
    assert again.calibrated.value == pytest.approx(first.calibrated.value)
    assert (again.calibrated.low, again.calibrated.high) == pytest.approx(
        (first.calibrated.low, first.calibrated.high)
    )
    assert again.plain.value == pytest.approx(first.plain.value)
    # The truth it is scored against is the lane's own.
    assert again.truth == 5000.0
    # The same estimate as a calibration built without those two lanes at all.
    alone = estimates.Calibration(_crowd(), "decode").estimate(target)
    assert first.calibrated.value == pytest.approx(alone.value)


def test_the_leave_out_rule_is_asked_about_every_training_lane():
    seen = []

    def leave_out(held, other):
        seen.append((held.ident, other.ident))
        return estimates.held_out_together(held, other)

    lanes = [lane("t", model="fam0-9b", cls="c0"), *_crowd()]
    estimates.hold_out(lanes, "decode", leave_out=leave_out)
    # Each lane is held out once and checked against every lane, itself included.
    assert len(seen) == len(lanes) ** 2
    assert ("t", "t") in seen


def test_the_family_shift_moves_an_estimate_toward_its_family():
    # Family "slow" reaches 0.2 of its ceiling elsewhere; everything else 0.5.
    others = [lane(f"o{i}", model=f"other{i}-7b", cls="c1", eff=0.5) for i in range(30)]
    slow = [lane(f"s{i}", model=f"slow-{i + 1}b", cls="c2", eff=0.2) for i in range(10)]
    calibration = estimates.Calibration(others + slow, "decode")
    found = calibration.estimate(lane("new", model="slow-9b", cls="c1", eff=None))
    plain = calibration.estimate(lane("new", model="fast-9b", cls="c1", eff=None))
    assert found.value < plain.value * 0.8
    family = next(s for s in found.shifts if s.kind == "family")
    assert (family.key, family.n) == ("slow", 10)
    # The estimate multiplies out: ceiling × the hierarchy's efficiency × each shift.
    product = math.exp(found.levels[-1].centre) * math.prod(s.factor for s in found.shifts)
    assert found.efficiency == pytest.approx(product)
    assert found.value == pytest.approx(found.ceiling * found.efficiency)


def test_family_key_drops_the_size():
    assert estimates.family_key("qwen3.5-9b") == "qwen3.5"
    assert estimates.family_key("llama-3.2-1b") == "llama-3.2"
    assert estimates.family_key("lfm2-350m") == "lfm2"
    assert estimates.family_key("phi") == "phi"


def _ceilings(model_id: str, params_b: float) -> roofline.Ceilings:
    found = roofline.ceilings(
        accelerators.catalog(),
        gpu_model="NVIDIA GeForce RTX 4090",
        gpu_count=1,
        vram_gb=24,
        cpu_model="",
        model_id=model_id,
        params_b=params_b,
        quantization="Q4_K_M",
    )
    assert isinstance(found, roofline.Ceilings)
    return found


def test_a_name_stating_its_active_parameters_reads_only_those():
    name = "someone/Frontis-MA1-35B-A3B-Q4_K_M"
    # As the roofline reads a name it does not know: dense (a bound trusts no name).
    found = dataclasses.replace(
        _ceilings(name, 35.0), weights=roofline.Weights(35.0, 35.0, "35B params")
    )
    stated = estimates.stated_active_b(name, found.weights)
    assert stated == 3.0
    built = estimates.lane_features(
        ident="x", ceilings=found, model_id=name, class_key="c", kind="gpu", engine="llama.cpp"
    )
    scale = found.weights.active_b / 3.0
    assert built.moe
    assert built.decode_ceiling == pytest.approx(found.decode_tps * scale)
    assert built.active_gb == pytest.approx(found.active_gb / scale)
    # A dense name is left as the roofline read it.
    dense = _ceilings("Qwen3-8B-Q4_K_M", 8.0)
    assert estimates.stated_active_b("Qwen3-8B-Q4_K_M", dense.weights) is None
    # An "active" count no smaller than the whole is no mixture of experts.
    assert estimates.stated_active_b("odd-3B-A7B", _ceilings("odd-3B-A7B", 3.0).weights) is None
