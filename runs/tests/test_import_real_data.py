"""The three community sources in shared/data/real, read from the real files: what every row
became (the mapping report), repeats merged, provenance, hardware classes, speculation, and
nothing private in any public field; stored twice, they are stored once."""

from __future__ import annotations

import json
import os
import re
from collections import Counter, defaultdict
from dataclasses import asdict
from pathlib import Path

import pytest
from django.conf import settings

from runs.importers import FormatError, public_fields, read_file
from runs.importers.community import (
    detect_community,
    hardware_class_label,
    mapping_report,
    parse_community,
)
from runs.importers.community_shared import scrub_command
from runs.importers.records import RunRecord
from runs.models import Run
from submissions.intake import import_records
from submissions.models import Submission
from worker.rules.redact import redact_command

REAL = Path(
    os.environ.get(
        "BENCHLOOP_REAL_DATA_DIR", Path(settings.BASE_DIR).parent / "shared" / "data" / "real"
    )
)
CACHE = REAL / "llmfit" / "benchmark_cache.json"
COMMUNITY = REAL / "llmfit" / "community"
CLUB = REAL / "club-5060ti" / "data"

pytestmark = pytest.mark.skipif(
    not CACHE.is_file(), reason=f"no real data at {REAL} (set BENCHLOOP_REAL_DATA_DIR)"
)

# What the sources' command snippets, notes and model paths hold that no public field may:
# private and loopback addresses with their ports, home folders (with the user's name), local
# mounts and folders, a disk's serial, a host's name.
PRIVATE = [
    "10.43.56.45", "192.168.0.99", "192.168.1.122", "127.0.0.1", "0.0.0.0", "localhost",
    ":8000", ":8080", ":11434", ":11435",
    "/home/", "/Users/", "/mnt/", "/run/media", "/root/", "/opt/models", "/data/models", "~/",
    "axjns", "sgtpooki", "ghazni", "maxious", "/dario", "radar", "lotto", "kaden", "tuff-2026",
    "aurora_docs", "bigbeast-fedora", "lmx-m1max", "lmstudio_models", "6C4A1C714A1C39F2",
    ".hipfire", "servedModel", "Remote endpoint",
]  # fmt: skip


def _files() -> list[Path]:
    return sorted(
        p
        for p in REAL.rglob("*")
        if p.is_file()
        and p.suffix in (".json", ".csv")
        and p.name != "schema.json"
        and not p.name.endswith(".schema.json")
    )


def _document(path: Path) -> object | None:
    return None if path.suffix == ".csv" else json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def records() -> dict[str, list[RunRecord]]:
    """Every file's records by method, their public fields redacted as the site stores them."""
    found: dict[str, dict[str, RunRecord]] = defaultdict(dict)
    for path in _files():
        text, document = path.read_text(encoding="utf-8"), _document(path)
        if detect_community(path, document):
            for record in parse_community(path, text, document):
                found[record.method][record.client_run_id] = public_fields(record)
    return {method: list(by_id.values()) for method, by_id in found.items()}


@pytest.fixture(scope="module")
def report() -> dict:
    return mapping_report(REAL)


def _by_row(records: list[RunRecord]) -> dict[str, RunRecord]:
    return {
        row: r for r in records for row in r.provenance.get("row_ids", [r.provenance["row_id"]])
    }


def test_every_file_is_detected_as_its_source() -> None:
    kinds = {str(p.relative_to(REAL)): detect_community(p, _document(p)) for p in _files()}
    assert kinds.pop("llmfit/benchmark_cache.json") == "localmaxxing"
    assert kinds.pop("club-5060ti/data/community-results.csv") == "club-5060ti-csv"
    assert {k for k in kinds if k.startswith("llmfit/community/")} == {
        k for k, v in kinds.items() if v == "llmfit"
    }
    assert sum(v == "llmfit" for v in kinds.values()) == 70
    assert sum(v == "club-5060ti-json" for v in kinds.values()) == 8
    # A BenchLoop file and an unrelated table are no community source.
    assert detect_community(Path("run.json"), {"schema_version": "1", "suites": {}}) is None
    assert detect_community(Path("x.csv"), None) is None


def test_at_most_two_percent_of_any_source_is_unmapped(report: dict) -> None:
    assert set(report) == {"localmaxxing", "llmfit", "club-5060ti"}
    for method, summary in report.items():
        assert summary["unmapped_pct"] <= 2.0, (method, summary["unmapped_rows"])
        # Every distinct row is accounted for, once.
        assert summary["distinct_rows"] == (
            summary["records"]
            + summary["duplicates_merged"]
            + summary["unmapped"]
            + summary["no_figure"]
        ), method
    lm, fit, club = report["localmaxxing"], report["llmfit"], report["club-5060ti"]
    # 1,111 rows as listed; 101 are one row shown under two presets (the RX 7900 XT group
    # lists XTX rows); 115 of the 1,010 repeat another's figures under a new id; 18 are the
    # aggregate of several requests a server decoded at once.
    assert (lm["rows"], lm["listed_twice"], lm["records"], lm["duplicates_merged"]) == (
        1111,
        101,
        877,
        115,
    )
    concurrent = [row for row in lm["no_figure_rows"] if "requests at once" in row["reason"]]
    assert (lm["no_figure"], len(concurrent)) == (18, 18)
    assert (fit["files"], fit["rows"], fit["records"], fit["duplicates_merged"]) == (
        70,
        500,
        499,
        1,
    )
    # club-5060ti: 76 results and 27 table rows; six hold no speed ("n/a", "Not yet tested").
    assert (club["rows"], club["records"], club["no_figure"]) == (103, 97, 6)
    assert all("no speed figure" in row["reason"] for row in club["no_figure_rows"])


def test_repeats_become_one_record_that_counts_and_lists_them(records) -> None:
    localmaxxing = _by_row(records["localmaxxing"])
    first, second = "cmrxkxn6000fvo401mgieo8jy", "cmrxpp1qo00qno401vvov9cwn"
    record = localmaxxing[first]
    assert localmaxxing[second] is record
    assert record.provenance["repeats"] == 2
    assert record.provenance["row_ids"] == [first, second]  # the earliest first
    assert record.client_run_id == f"localmaxxing:{first}"
    assert record.speed["decode_tps_median"] == 582.5
    # llmfit: one result shared in two files of one machine is one record from either file.
    folder = COMMUNITY / "intel-arc-graphics-130v-140v-integrated"
    a, b = folder / "1783676393-31f19579.json", folder / "1783676393-792a24b6-0.json"
    from_a = parse_community(a, a.read_text(), _document(a))
    from_b = parse_community(b, b.read_text(), _document(b))
    shared = [r for r in from_a if r.provenance["repeats"] == 2]
    assert len(shared) == 1 and asdict(shared[0]) == asdict(from_b[0])
    assert shared[0].provenance["row_ids"] == [
        "intel-arc-graphics-130v-140v-integrated/1783676393-31f19579#0",
        "intel-arc-graphics-130v-140v-integrated/1783676393-792a24b6-0#0",
    ]


def test_every_record_carries_its_provenance_and_no_person(records) -> None:
    repositories = {
        "localmaxxing": ("AlexsJones/llmfit", "3f44fd30a43d"),
        "llmfit": ("AlexsJones/llmfit", "3f44fd30a43d"),
        "club-5060ti": ("5p00kyy/club-5060ti", "90ce13438a32"),
    }
    paths = {
        "localmaxxing": re.compile(r"^llmfit-core/data/benchmark_cache\.json$"),
        "llmfit": re.compile(r"^llmfit-core/data/community/[\w.-]+/[\w.-]+\.json$"),
        "club-5060ti": re.compile(r"^data/(?:results/[\w.-]+\.json|community-results\.csv)$"),
    }
    for method, found in records.items():
        for record in found:
            source = record.provenance
            assert (source["repository"], source["commit"]) == repositories[method]
            assert paths[method].match(source["path"]), source["path"]
            assert source["source"] == method and source["row_id"]
            assert source["repeats"] == len(source.get("row_ids", [source["row_id"]]))
            assert source["licence"] == (
                "no licence stated; facts attributed to LocalMaxxing via llmfit"
                if method == "localmaxxing"
                else "MIT"
            )
            assert record.client_run_id == f"{method}:{source['row_id']}"
            assert (record.method, record.source_format, record.benchmark_id) == (method,) * 3
            assert (record.score_scale, record.outcome, record.submitter_name) == (
                "speed",
                "complete",
                "",
            )
            assert record.quality_score is None and record.overall_score is None
            assert record.hardware is not None and record.model_id
    assert sum(len(found) for found in records.values()) == 877 + 499 + 97


@pytest.mark.parametrize(
    ("method", "row_id", "label"),
    [
        ("localmaxxing", "cmp7b4hc6000ho40128gv04c7", "RTX 4090 24 GB"),
        ("localmaxxing", "cmr1w30ik01lald01jc64n2to", "RTX 3090 24 GB"),
        ("localmaxxing", "cmrqjkf5v05srlg01by1bes9f", "4× RTX 5090 32 GB"),
        ("localmaxxing", "cmoqtxiun000gky047ofznawj", "Apple M4 Max 128 GB"),
        ("localmaxxing", "cmq1eccf500mko6015zitbqv8", "Apple M1 Max 64 GB"),
        ("localmaxxing", "cmrio3ys401uvmj01lcom115h", "CPU only: AMD Ryzen 7 7840HS"),
        ("localmaxxing", "cmrk3s4mr02z1mj01111xfyoq", "T4 16 GB"),
        ("llmfit", "nvidia-geforce-rtx-3090/1787062221-99e4b57e#0", "2× RTX 3090 24 GB"),
        ("llmfit", "apple-m4-pro/1786562271-33df4e5e#0", "Apple M4 Pro 24 GB"),
        ("llmfit", "nvidia-gb10/1786611367-03c54b31-1#0", "GB10 128 GB"),
        ("llmfit", "tesla-t4/1784112256-43b7d49b#0", "4× T4 16 GB"),
        # An integrated GPU named by its CPU has the system's memory, as an Apple chip does.
        ("llmfit", "radeon-840m-860m-graphics/1786355096-7527bd61#0", "860M 32 GB"),
        ("club-5060ti", "20260519-021232-qwen3.6-27b-short-chat-1", "2× RTX 5060 Ti 16 GB"),
        ("club-5060ti", "20260519-022742-qwen3.5-9b-short-chat-1", "RTX 5060 Ti 16 GB"),
    ],
)
def test_named_rows_land_in_their_hardware_class(records, method, row_id, label) -> None:
    assert hardware_class_label(_by_row(records[method])[row_id]) == label


def test_one_machine_is_one_class_however_its_name_is_written(records) -> None:
    every = [r for found in records.values() for r in found]
    # "AMD Ryzen 7 8745H w/ Radeon 780M" and "... w/ Radeon 780M Graphics" are one CPU.
    ryzen = {hardware_class_label(r) for r in every if "8745H" in r.hardware.cpu}
    assert ryzen == {"CPU only: AMD Ryzen 7 8745H"}
    # "RTX 5060 Ti" and "NVIDIA GeForce RTX 5060 Ti"; Apple chips always carry their memory.
    club = {hardware_class_label(r) for r in records["club-5060ti"]}
    assert club == {"RTX 5060 Ti 16 GB", "2× RTX 5060 Ti 16 GB"}
    apple = [hardware_class_label(r) for r in every if "Apple" in r.hardware.gpu]
    assert apple and all(re.search(r"^Apple M\d( \w+)? \d+ GB$", label) for label in apple)


def test_a_servers_aggregate_of_several_requests_is_no_single_stream_decode(
    report: dict, records
) -> None:
    """A row's batchSize is the requests in flight where the server decoded several at once
    (vLLM's --max-num-seqs, llama-server's -np); elsewhere it is the prompt batch (-b)."""
    left_out = {row["row_id"]: row["reason"] for row in report["localmaxxing"]["no_figure_rows"]}
    # vLLM, --max-num-seqs 12, "aggregate ... across C11 concurrent requests".
    assert left_out["cmsm2bq2c00ljpb0159v0hcbh"].startswith("no single-stream figure: 11 requests")
    # llama-server -np 2 with eight requests: their aggregate, two slots.
    assert "8 requests at once" in left_out["cmrkp5mqc04izmj01cmqmhhap"]
    kept = _by_row(records["localmaxxing"])
    # llama-server with one slot or none stated (batchSize 2048, its -b) and llama-bench -b 128:
    # one stream each, kept.
    served = Counter(
        r.launch_settings.get("batch_size")
        for r in records["localmaxxing"]
        if r.launch_settings.get("tool") == "llama-server"
    )
    assert (served[2048], served[4096], served[512]) == (8, 1, 1)
    assert any(r.launch_settings.get("batch_size") == 128 for r in kept.values())


def test_speculation_is_declared_where_the_row_used_it(records) -> None:
    for record in records["localmaxxing"]:
        flags = record.raw_payload["engineFlags"]
        if flags["mtpEnabled"]:
            assert record.launch_settings["speculative"] == "mtp"
        elif flags["specDecoding"]:  # the command says which kind, where it does
            assert record.launch_settings["speculative"] in ("mtp", "draft", "ngram", "yes")
    lm = _by_row(records["localmaxxing"])
    # A draft named on the command line (llama-server -md ...) is the run's draft model.
    drafted = lm["cmqyxx9c901nyoe01tdp4i4hx"]
    assert drafted.draft_model == "mtp-gemma-4-31B-it"
    assert drafted.launch_settings["speculative"] == "mtp"
    club = _by_row(records["club-5060ti"])
    mtp = club["20260519-021232-qwen3.6-27b-short-chat-1"].launch_settings
    assert (mtp["speculative"], mtp["spec_draft_n"]) == ("mtp", 3)
    assert "speculative" not in club["20260519-025242-qwen3.5-9b-short-chat-1"].launch_settings
    assert not any("speculative" in r.launch_settings for r in records["llmfit"])


def test_speeds_are_the_sources_figures(records) -> None:
    cache = json.loads(CACHE.read_text())
    rows = {r["id"]: r for p in cache["presets"].values() for r in p["rows"]}
    for record in records["localmaxxing"]:
        row = rows[record.provenance["row_id"]]
        assert record.speed["decode_tps_median"] == row["tokSOut"]
        assert record.speed["prefill_tps_median"] == (row["tokSPrefill"] or None)
        assert record.speed["ttft_ms_median"] == (row["ttftMs"] or None)
    for record in records["llmfit"]:
        folder, rest = record.provenance["row_id"].split("/")
        stem, index = rest.split("#")
        result = json.loads((COMMUNITY / folder / f"{stem}.json").read_text())["results"][
            int(index)
        ]
        # An average over numRuns, with its fastest run as the peak: no median, no percentile.
        assert record.speed["decode_tps_mean"] == result["avgTps"]
        assert record.speed["decode_tps_peak"] == result["maxTps"]
        assert record.speed_sample_count == result["numRuns"]
        assert not {"decode_tps_median", "decode_tps_p5", "decode_tps_p95"} & set(record.speed)
    club = _by_row(records["club-5060ti"])["20260519-021232-qwen3.6-27b-short-chat-1"]
    assert club.speed["decode_tps_median"] == 34.10693002190571
    assert club.speed["prefill_tps_median"] == 193.24635169589257


def test_models_quantizations_and_parameters(records) -> None:
    lm = _by_row(records["localmaxxing"])
    moe = lm["cmrxkxn6000fvo401mgieo8jy"]
    assert (moe.model_id, moe.quantization, moe.engine) == (
        "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4",
        "NVFP4",
        "vllm",
    )
    assert (
        moe.launch_settings.items()
        >= {"params_b": 32.0, "active_params_b": 3.0, "moe": True}.items()
    )
    engines = {r.engine for r in records["localmaxxing"]}
    assert {"llama.cpp", "vllm", "ollama", "mlx", "lm-studio", "hipfire"} <= engines
    fit = _by_row(records["llmfit"])
    gguf = fit["apple-m4-pro/1786562271-33df4e5e#0"]
    assert (gguf.model_id, gguf.quantization, gguf.engine) == (
        "Muse-Glimmer-30B-Q4_K_M",
        "Q4_K_M",
        "llama.cpp",
    )
    # A model given as a path on the submitter's disk keeps its file's name only.
    local = [r for r in records["llmfit"] if r.model_id == "gemma-3.Q8_0"]
    assert local and all(r.quantization == "Q8_0" for r in local)
    club = _by_row(records["club-5060ti"])["llm-bench-import-qwen3.6-35b-a3b"]
    assert (
        club.launch_settings.items()
        >= {"params_b": 35.0, "active_params_b": 3.0, "moe": True}.items()
    )


def _public(record: RunRecord) -> dict[str, str]:
    hardware = record.hardware
    return {
        "model_id": record.model_id,
        "quantization": record.quantization,
        "engine": record.engine,
        "engine_version": record.engine_version,
        "provider": record.provider,
        "kv_cache_type": record.kv_cache_type,
        "draft_model": record.draft_model,
        "launch_settings": json.dumps(record.launch_settings),
        "hardware": f"{hardware.gpu} | {hardware.cpu} | {hardware.os_name}",
        "provenance": json.dumps(record.provenance),
        "command_used": redact_command(record.command_used),
        "submitter_name": record.submitter_name,
    }


def test_nothing_private_reaches_a_public_field_or_the_stored_row(records) -> None:
    cache = json.loads(CACHE.read_text())
    people = {
        r["user"]["username"]
        for p in cache["presets"].values()
        for r in p["rows"]
        if r["user"]["username"]
    }
    assert len(people) > 60
    for found in records.values():
        for record in found:
            # A Hugging Face publisher is the model's name, not the row's submitter.
            publisher = record.model_id.split("/")[0] if "/" in record.model_id else None
            raw = json.loads(json.dumps(record.raw_payload))
            if isinstance(raw.get("model"), dict):
                raw.pop("model")
            fields = {**_public(record), "raw_payload": json.dumps(raw)}
            for name, value in fields.items():
                for private in PRIVATE:
                    assert private not in value, (record.client_run_id, name, private, value)
                for person in people - {publisher}:
                    if len(person) >= 4:
                        assert person not in value, (record.client_run_id, name, person)
            # Who sent a row is left out; LocalMaxxing's free-text notes too (they name
            # machines and folders no rule can find), the club's short notes are kept cleaned.
            assert "user" not in raw and "contributor" not in raw
            assert record.method != "localmaxxing" or "notes" not in raw


@pytest.mark.parametrize(
    ("snippet", "kept"),
    [
        ("# Remote endpoint: http://10.43.56.45:8000  servedModel: gemma4-26b", ""),
        (
            "llama-bench -m /home/llm/models/qwen3.6-27b/Qwen3.6-27B-Q4_K_M.gguf -p 512 -n 128"
            " -d 8192 -o json",
            "llama-bench -m Qwen3.6-27B-Q4_K_M.gguf -p 512 -n 128 -d 8192 -o json",
        ),
        (
            "taskset -c 0-7 llama-bench -m LFM2-350M-Q4_0.gguf -t 8 -p 64",
            "llama-bench -m LFM2-350M-Q4_0.gguf -t 8 -p 64",
        ),
        (
            "llama-server -m Qwen3-8B-Q4_K_M.gguf --alias qwen3-8b-q4km -ngl 999 -fa on"
            " --host 127.0.0.1 --port 8080",
            "llama-server -m Qwen3-8B-Q4_K_M.gguf -ngl 999 -fa on",
        ),
        (
            "./target/release/examples/dflash_spec_demo --target ~/.hipfire/models/qwen3.5-9b.mq4"
            " --prompt $(cat benchmarks/prompts/x.txt) --max 120",
            "dflash_spec_demo --target qwen3.5-9b.mq4 --max 120",
        ),
        (
            "sudo docker run --gpus all -p 8000:8000 -v ~/.cache/huggingface:/root/.cache/hf"
            " vllm/vllm-openai:gemma RedHatAI/diffusiongemma-26B-A4B-it-FP8-dynamic",
            "docker run --gpus all -v hf vllm/vllm-openai:gemma"
            " RedHatAI/diffusiongemma-26B-A4B-it-FP8-dynamic",
        ),
        ("CUDA_VISIBLE_DEVICES=1 llama-server -m x.gguf -c 8192", "llama-server -m x.gguf -c 8192"),
        ('llama-cli -m x.gguf -p "my notes on /srv/box" -n 64', "llama-cli -m x.gguf -n 64"),
    ],
)
def test_a_command_keeps_its_program_and_flags_only(snippet, kept) -> None:
    assert scrub_command(snippet).text == kept


def _rewritten(tmp_path: Path, source: Path, change, name: str | None = None) -> Path:
    document = json.loads(source.read_text())
    change(document)
    target = tmp_path / (name or source.name)
    target.write_text(json.dumps(document))
    return target


def _first_row(document: dict) -> dict:
    return next(iter(document["presets"].values()))["rows"][0]


@pytest.mark.parametrize(
    ("source", "change", "position"),
    [
        (
            CACHE,
            lambda d: _first_row(d).update(tokSOut="fast"),
            "presets.RTX 5090 (32 GB).rows[0].tokSOut",
        ),
        (CACHE, lambda d: _first_row(d).pop("createdAt"), "presets.RTX 5090 (32 GB).rows[0]"),
        (
            COMMUNITY / "apple-m4-pro" / "1786562271-33df4e5e.json",
            lambda d: d["results"][0].update(avgTps="13"),
            "results[0].avgTps",
        ),
        (
            COMMUNITY / "apple-m4-pro" / "1786562271-33df4e5e.json",
            lambda d: d["results"][0].update(avgTps=99.0),
            "results[0].avgTps",
        ),
        (
            CLUB / "results" / "seed-qwen35-9b-mtp-1x5060ti-20260519.json",
            lambda d: d["results"][3].update(timestamp_utc="yesterday"),
            "results[3].timestamp_utc",
        ),
    ],
)
def test_malformed_rows_are_refused_naming_the_row_and_field(
    tmp_path, source, change, position
) -> None:
    target = _rewritten(tmp_path, source, change)
    with pytest.raises(FormatError) as caught:
        parse_community(target, target.read_text(), json.loads(target.read_text()))
    assert caught.value.position.startswith(position)


@pytest.mark.parametrize(
    ("line", "breaking", "message"),
    [
        (5, lambda row: row.rsplit(",", 3)[0], "line 5: 20 cells where the header has 23"),
        (7, lambda row: row.replace("2026-05-17", "17 May"), "line 7, column date: not a date"),
        (2, lambda row: row.replace(",8192,", ",8k,"), "line 2, column context_tokens"),
    ],
)
def test_a_broken_table_row_is_refused_by_its_line(tmp_path, line, breaking, message) -> None:
    lines = (CLUB / "community-results.csv").read_text().splitlines()
    lines[line - 1] = breaking(lines[line - 1])
    broken = tmp_path / "community-results.csv"
    broken.write_text("\n".join(lines) + "\n")
    assert detect_community(broken, None) == "club-5060ti-csv"
    with pytest.raises(FormatError, match=re.escape(message)):
        parse_community(broken, broken.read_text(), None)


@pytest.mark.django_db
def test_storing_the_real_data_twice_stores_it_once() -> None:
    """Every file through the importer's path (read_file: detection, parsing, public fields)
    and submissions.intake.import_records; the second time, nothing is added."""
    files = [p for p in _files() if detect_community(p, _document(p))]
    created = skipped = 0
    for path in files:
        found, problem = read_file(path)
        assert not problem, (path, problem)
        result = import_records(found, source_name=path.name)
        created += len(result.created)
        skipped += len(result.skipped)
    # The shared llmfit result comes in with both its files: stored once.
    assert (created, skipped) == (877 + 499 + 97, 1)
    assert Run.objects.count() == created
    again = 0
    for path in files:
        result = import_records(read_file(path)[0], source_name=path.name)
        assert not result.created
        again += len(result.skipped)
    assert again == created + 1 and Run.objects.count() == created
    assert set(Run.objects.values_list("method", flat=True)) == {
        "localmaxxing",
        "llmfit",
        "club-5060ti",
    }
    assert not Submission.objects.exclude(submitter_name="").exists()
    stored = Run.objects.select_related("hardware_class").get(
        client_run_id="localmaxxing:cmp7b4hc6000ho40128gv04c7"
    )
    assert stored.hardware_class.label == "RTX 4090 24 GB"
    assert stored.provenance["row_id"] == "cmp7b4hc6000ho40128gv04c7"
    assert stored.provenance["commit"] == "3f44fd30a43d"
    assert stored.decode_tps_median == 213.87 and not stored.is_verified
