"""The result data model: hardware, stacks, runs, and their suite, task and trial rows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Unpack

from django.db import models
from django.db.models import Q
from django.utils import timezone

from runs import identities, labels, methods, normalize
from runs.lanes import version_column

# A run's suites, tasks and trials are defined beside it, and are this module's too.
from runs.results import SpeedSample as SpeedSample
from runs.results import SuiteResult as SuiteResult
from runs.results import TaskResult as TaskResult

# Stack.model_family's column: a family guessed from a model id is cut to it.
MODEL_FAMILY_LENGTH = 100


class HardwareKind(models.TextChoices):
    GPU = "gpu", "GPU"
    APPLE = "apple", "Apple silicon"
    CPU = "cpu", "CPU only"
    REMOTE = "remote", "remote endpoint"
    # Local runs whose files named no hardware at all (older exports, the speed probe).
    UNKNOWN = "unknown", "unknown hardware"


class HardwareClass(models.Model):
    """What speeds are compared within: a GPU model with its count, an Apple chip with its
    unified memory, a CPU-only machine, or a remote endpoint. Many machines (Hardware rows,
    which also record the host CPU, RAM and OS) belong to one class."""

    key = models.CharField(max_length=255, unique=True)
    slug = models.SlugField(max_length=120, unique=True, help_text="the URL's ?hw= value")
    kind = models.CharField(max_length=8, choices=HardwareKind.choices)
    label = models.CharField(max_length=200, help_text="e.g. '2× RTX 3090 24 GB'")
    vendor = models.CharField(max_length=20, blank=True)
    chip = models.CharField(max_length=200, blank=True, help_text="GPU model, Apple chip or CPU")
    count = models.PositiveSmallIntegerField(default=1)
    # Total memory the model can live in: VRAM of all cards, unified memory, or system RAM.
    memory_gb = models.FloatField(null=True, blank=True)
    memory_channels = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "hardware classes"
        indexes = [models.Index(fields=["kind", "memory_gb"], name="hwclass_kind_memory_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(memory_gb__gt=0) | Q(memory_gb__isnull=True),
                name="hwclass_memory_positive",
            ),
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def has_speed(self) -> bool:
        """Whether speeds in this class describe one kind of machine (not unknown hardware)."""
        return self.kind != HardwareKind.UNKNOWN

    @classmethod
    def for_fields(cls, fields: Mapping[str, Any]) -> HardwareClass:
        """The class with these fields (runs.normalize.hardware_class_of and friends), created
        the first time it is seen."""
        found: HardwareClass = identities.ensure_class(cls, fields)
        return found


class Hardware(models.Model):
    """A normalised machine identity; equal canonical keys are the same machine class."""

    canonical_key = models.CharField(max_length=255, unique=True)
    cpu_model = models.CharField(max_length=200, blank=True)
    gpu_model = models.CharField(max_length=200, blank=True)
    gpu_vendor = models.CharField(max_length=20, blank=True)
    gpu_count = models.PositiveSmallIntegerField(default=0)
    vram_gb = models.FloatField(null=True, blank=True)
    ram_gb = models.FloatField(null=True, blank=True)
    memory_channels = models.PositiveSmallIntegerField(null=True, blank=True)
    os = models.CharField(max_length=40, blank=True)
    accelerator = models.CharField(max_length=20, blank=True)
    vram_bucket = models.CharField(max_length=8, blank=True)
    ram_bucket = models.CharField(max_length=8, blank=True)
    hardware_class = models.ForeignKey(
        HardwareClass, on_delete=models.PROTECT, null=True, blank=True, related_name="machines"
    )

    class Meta:
        verbose_name_plural = "hardware"
        indexes = [
            models.Index(fields=["gpu_vendor", "gpu_model"], name="hardware_gpu_idx"),
            models.Index(fields=["vram_bucket"], name="hardware_vram_bucket_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(vram_gb__gte=0), name="hardware_vram_nonnegative"),
            models.CheckConstraint(condition=Q(ram_gb__gte=0), name="hardware_ram_nonnegative"),
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        """The machine's class label: '2× RTX 3090 24 GB', 'Apple M2 Max 64 GB',
        'CPU only: AMD EPYC 7763 · 512 GB'."""
        return normalize.hardware_class_of(self.identity_fields())["label"]

    def identity_fields(self) -> dict[str, Any]:
        """The normalised fields its class is derived from (runs.normalize.hardware_class_of)."""
        return {
            name: getattr(self, name)
            for name in (
                "gpu_model",
                "gpu_vendor",
                "gpu_count",
                "vram_gb",
                "cpu_model",
                "ram_gb",
                "memory_channels",
            )
        }

    @classmethod
    def for_identity(cls, **fields: Unpack[normalize.MachineDescription]) -> Hardware:
        """The machine with this description and its class, each created the first time."""
        identity = normalize.hardware_identity(**fields)
        key = identity["canonical_key"]
        hardware = cls.objects.filter(canonical_key=key).select_related("hardware_class").first()
        if hardware is None:
            hardware_class = HardwareClass.for_fields(normalize.hardware_class_of(identity))
            row = {name: value for name, value in identity.items() if name != "canonical_key"}
            hardware, _ = cls.objects.get_or_create(
                canonical_key=key, defaults={**row, "hardware_class": hardware_class}
            )
        if hardware.hardware_class_id is None:
            hardware.hardware_class = HardwareClass.for_fields(
                normalize.hardware_class_of(hardware.identity_fields())
            )
            hardware.save(update_fields=["hardware_class"])
        return hardware


class MeasuredBy:
    """What a stack's or run's measurement method (runs.methods) says of it on a page."""

    method: str

    @property
    def method_label(self) -> str:
        return methods.method_label(self.method)

    @property
    def is_imported(self) -> bool:
        return methods.is_imported(self.method)


class Stack(MeasuredBy, models.Model):
    """What the leaderboard ranks: a model file served by an engine with given launch settings.

    The engine version is kept per run, so one stack can show its trend across engine builds.
    """

    comparability_key = models.CharField(max_length=64, unique=True)
    model_id = models.CharField(max_length=300)
    model_family = models.CharField(max_length=MODEL_FAMILY_LENGTH, blank=True)
    params_b = models.FloatField(null=True, blank=True, help_text="parameters, in billions")
    param_bucket = models.CharField(max_length=10, blank=True)
    quantization = models.CharField(max_length=40, blank=True)
    model_sha256 = models.CharField(max_length=64, blank=True)
    engine = models.CharField(max_length=60)
    harness = models.CharField(max_length=40, default="raw")
    context_length = models.PositiveIntegerField(null=True, blank=True)
    kv_cache_type = models.CharField(max_length=40, blank=True)
    draft_model = models.CharField(max_length=300, blank=True)
    launch_settings = models.JSONField(default=dict, blank=True)
    # How its speeds were measured (runs.methods): part of the identity, so a lane never
    # pools two methods.
    method = models.CharField(max_length=30, default=methods.DEFAULT_METHOD, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Denormalised by runs.services.refresh_stack_stats (run by a worker after moderation), so
    # the leaderboard reads one row per stack instead of aggregating every run on each request.
    best_run = models.ForeignKey(
        "Run", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    published_run_count = models.PositiveIntegerField(default=0)
    submitter_count = models.PositiveIntegerField(default=0)
    stats_refreshed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["model_family", "params_b"], name="stack_family_params_idx"),
            models.Index(fields=["engine", "quantization"], name="stack_engine_quant_idx"),
            models.Index(fields=["model_id"], name="stack_model_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(params_b__gt=0), name="stack_params_positive"),
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        parts = [self.model_id]
        if self.quantization:
            parts.append(self.quantization)
        parts.append(f"· {self.engine}")
        if self.draft_model:
            parts.append(f"+ draft {self.draft_model}")
        if self.method != methods.DEFAULT_METHOD:
            parts.append(f"({methods.method_label(self.method)})")
        return " ".join(parts)

    @property
    def short_key(self) -> str:
        return self.comparability_key[:12]

    @staticmethod
    def distinct_labels(stacks: Iterable[Stack]) -> list[str]:
        """Labels for stacks shown together (a compare page, a share image, an export), in
        the order given: each stack's label plus whatever tells it from a neighbour that
        would otherwise read the same (harness, context, KV type, launch settings, short
        digest). See runs.labels.distinct_labels."""
        return labels.distinct_labels(stacks)

    @classmethod
    def for_identity(cls, **fields: Unpack[normalize.StackDescription]) -> Stack:
        key = normalize.stack_identity(**fields)
        parsed = normalize.parse_model(fields["model_id"])
        defaults = {
            "model_id": parsed["model_id"],
            # A guess from the id; one that does not fit its column is cut, not an error.
            "model_family": parsed["family"][:MODEL_FAMILY_LENGTH],
            "params_b": parsed["params_b"],
            "param_bucket": normalize.param_bucket(parsed["params_b"]),
            "quantization": normalize.normalise_quant(fields["quantization"]),
            "model_sha256": normalize.normalise_digest(fields["model_sha256"]),
            "engine": fields["engine"],
            "harness": fields["harness"],
            "context_length": fields["context_length"],
            "kv_cache_type": fields["kv_cache_type"],
            "draft_model": normalize.normalise_model_id(fields["draft_model"]),
            "launch_settings": normalize.normalise_launch_settings(fields["launch_settings"]),
            "method": fields.get("method") or methods.DEFAULT_METHOD,
        }
        stack, _ = cls.objects.get_or_create(comparability_key=key, defaults=defaults)
        return stack


class ScoreScale(models.TextChoices):
    """Scores on different scales are never ranked together."""

    V3 = "v3", "v3 (0–100, weighted quality)"
    V2 = "v2", "legacy v2"
    SPEED_ONLY = "speed", "speed only"


class SourceFormat(models.TextChoices):
    BUNDLE_V1 = "bundle-1", "BenchLoop bundle v1"
    RUN_V3 = "run-v3", "run.json v3 (cli 0.3.0)"
    ENVELOPE_V3 = "envelope-v3", "v3 publish envelope"
    FAILED_V3 = "failed-v3", "failed-run record"
    RUN_V2 = "run-v2", "run.json v2 (cli 0.2.3)"
    LEADERBOARD_V2 = "leaderboard-v2", "leaderboard.json export"
    LEADERBOARD_V1 = "leaderboard-v1", "leaderboard-v1.json speed stack"
    SPEED_JSONL = "speed-jsonl", "speed-probe JSONL"
    DEMO = "demo", "synthetic demo"
    LLAMA_BENCH = "llama-bench", "llama-bench output"
    LLAMA_BENCHY = "llama-benchy", "llama-benchy output"
    LOCALMAXXING = "localmaxxing", "LocalMaxxing leaderboard row"
    LLMFIT = "llmfit", "llmfit community submission"
    CLUB_5060TI = "club-5060ti", "club-5060ti result"


class Visibility(models.TextChoices):
    PUBLIC = "public"
    UNLISTED = "unlisted"
    PRIVATE = "private"


class Outcome(models.TextChoices):
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    FAILED = "failed"


class ScoringMode(models.TextChoices):
    LOCAL = "local"
    REMOTE = "remote"


SPEED_METRICS = ("decode_tps", "prefill_tps", "ttft_ms")
SPEED_STATS = ("median", "mean", "stdev", "p5", "p95", "peak")


class RunQuerySet(models.QuerySet["Run"]):
    def published(self) -> RunQuerySet:
        """Approved and public: the only runs any public page may show."""
        return self.filter(published=True)

    def comparable(self) -> RunQuerySet:
        return self.filter(comparable=True)

    def on_scale(self, scale: str) -> RunQuerySet:
        return self.filter(score_scale=scale)

    def of_version(self, scale: str, version: str) -> RunQuerySet:
        """Runs of this scale in the lanes of this version (runs.lanes.version_column)."""
        return self.filter(score_scale=scale, **{version_column(scale): version})

    def ranked(self) -> RunQuerySet:
        return self.order_by(
            models.F("overall_score").desc(nulls_last=True),
            models.F("decode_tps_median").desc(nulls_last=True),
            "id",
        )

    def with_related(self) -> RunQuerySet:
        return self.select_related("stack", "hardware")

    def recorded_model_file(self) -> str:
        """The weights file's name the first run's payload recorded: model.file (the engine
        hashed it), else launch.model_file (the server named it); "" where neither did."""
        keys = ("model__file", "launch__model_file", "run__model__file", "run__launch__model_file")
        found = self.values_list(*(f"raw_payload__{key}" for key in keys)).first() or ()
        return next((str(name) for name in found if isinstance(name, str) and name), "")

    def matrix(self) -> RunQuerySet:
        """Runs that measured a harness matrix suite (runs.matrix.MATRIX_SUITES)."""
        from runs.matrix import MATRIX_SUITES

        suites = SuiteResult.objects.filter(run=models.OuterRef("pk"), suite__in=MATRIX_SUITES)
        return self.filter(models.Exists(suites))


class Run(MeasuredBy, models.Model):
    """One benchmark execution of a stack on a piece of hardware."""

    stack = models.ForeignKey(Stack, on_delete=models.PROTECT, related_name="runs")
    # Null for remote endpoints: we never claim hardware we did not see.
    hardware = models.ForeignKey(
        Hardware, on_delete=models.PROTECT, null=True, blank=True, related_name="runs"
    )
    # The machine's class (a remote endpoint's class where no machine was seen), kept on the
    # run so every speed query groups and filters by it without a join.
    hardware_class = models.ForeignKey(
        HardwareClass, on_delete=models.PROTECT, null=True, blank=True, related_name="runs"
    )
    fingerprint = models.CharField(max_length=64, unique=True)
    client_run_id = models.CharField(max_length=200, blank=True)

    benchmark_id = models.CharField(max_length=40, default="benchloop")
    benchmark_version = models.CharField(max_length=20, blank=True)
    # How the speeds were measured, versioned apart from the benchmark (runs.methods
    # .speed_version): the speed-only scale's lanes are versioned by it (runs.lanes).
    speed_version = models.CharField(max_length=20, blank=True, default="")
    profile = models.CharField(max_length=20, blank=True)
    requested_profile = models.CharField(max_length=20, blank=True)
    score_schema_version = models.CharField(max_length=20, blank=True, help_text="blank = legacy")
    score_scale = models.CharField(max_length=8, choices=ScoreScale.choices)
    manifest_hash = models.CharField(max_length=80, blank=True)
    coverage_score = models.FloatField(null=True, blank=True)
    comparable = models.BooleanField(default=False)
    # Why a run is not ranked with its peers (worker.rules.comparability), shown on its page.
    noncomparable_reasons = models.JSONField(default=list, blank=True)
    # "clear", "contended" or "unknown": other load on the machine while it was measured.
    contention_status = models.CharField(max_length=12, blank=True)

    scoring_mode = models.CharField(
        max_length=8, choices=ScoringMode.choices, default=ScoringMode.LOCAL
    )
    overall_score = models.FloatField(null=True, blank=True)
    quality_score = models.FloatField(null=True, blank=True)
    speed_score = models.FloatField(null=True, blank=True)
    reliability_score = models.FloatField(null=True, blank=True)
    value_score = models.FloatField(null=True, blank=True)

    # Speed summary over the run's post-warm-up samples; TTFT 'peak' is the fastest (lowest).
    decode_tps_median = models.FloatField(null=True, blank=True)
    decode_tps_mean = models.FloatField(null=True, blank=True)
    decode_tps_stdev = models.FloatField(null=True, blank=True)
    decode_tps_p5 = models.FloatField(null=True, blank=True)
    decode_tps_p95 = models.FloatField(null=True, blank=True)
    decode_tps_peak = models.FloatField(null=True, blank=True)
    prefill_tps_median = models.FloatField(null=True, blank=True)
    prefill_tps_mean = models.FloatField(null=True, blank=True)
    prefill_tps_stdev = models.FloatField(null=True, blank=True)
    prefill_tps_p5 = models.FloatField(null=True, blank=True)
    prefill_tps_p95 = models.FloatField(null=True, blank=True)
    prefill_tps_peak = models.FloatField(null=True, blank=True)
    ttft_ms_median = models.FloatField(null=True, blank=True)
    ttft_ms_mean = models.FloatField(null=True, blank=True)
    ttft_ms_stdev = models.FloatField(null=True, blank=True)
    ttft_ms_p5 = models.FloatField(null=True, blank=True)
    ttft_ms_p95 = models.FloatField(null=True, blank=True)
    ttft_ms_peak = models.FloatField(null=True, blank=True)
    speed_sample_count = models.PositiveIntegerField(null=True, blank=True)

    provider = models.CharField(max_length=40, blank=True)
    engine_version = models.CharField(max_length=80, blank=True)
    harness_version = models.CharField(max_length=20, blank=True)
    command_used = models.TextField(blank=True)
    outcome = models.CharField(max_length=12, choices=Outcome.choices, default=Outcome.COMPLETE)
    error = models.TextField(blank=True)

    started_at = models.DateTimeField()
    total_runtime_sec = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # When its submission was last decided (for a published run: approved), else when it was
    # stored: the Atom feed's order, kept on the run (submissions.intake sets it with the
    # decision) so the feed reads an index instead of sorting every matching run across a join.
    approved_at = models.DateTimeField(default=timezone.now)

    source_format = models.CharField(max_length=20, choices=SourceFormat.choices)
    # How the speeds were measured (runs.methods; the stack's too), and where a measurement we
    # did not make came from (source, repository, commit, path, row id, licence, repeats).
    method = models.CharField(max_length=30, default=methods.DEFAULT_METHOD)
    provenance = models.JSONField(default=dict, blank=True)
    visibility = models.CharField(
        max_length=10, choices=Visibility.choices, default=Visibility.PUBLIC
    )
    # Denormalised from the submission (approved) and visibility (public) so public reads
    # need one indexed flag instead of a join; set only through submissions.intake.
    published = models.BooleanField(default=False)
    is_verified = models.BooleanField(default=False)
    is_demo = models.BooleanField(default=False)
    raw_payload = models.JSONField(default=dict, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(
                fields=["stack", "score_scale", "-overall_score"],
                condition=Q(published=True),
                name="run_published_stack_rank_idx",
            ),
            models.Index(fields=["hardware", "published"], name="run_hardware_idx"),
            # A stack's runs per hardware lane (stack pages' lanes and trends), and a class's
            # runs (charts and lists narrowed to one class).
            models.Index(
                fields=["stack", "hardware_class", "score_scale"],
                condition=Q(published=True),
                name="run_published_stack_class_idx",
            ),
            models.Index(
                fields=["hardware_class", "score_scale", "-overall_score"],
                condition=Q(published=True),
                name="run_published_class_rank_idx",
            ),
            models.Index(fields=["-started_at"], name="run_started_idx"),
            models.Index(fields=["manifest_hash"], name="run_manifest_idx"),
            # The Atom feed: newest decision first, on a scale (and on a class).
            models.Index(
                fields=["score_scale", "-approved_at", "-id"],
                condition=Q(published=True),
                name="run_published_feed_idx",
            ),
            models.Index(
                fields=["hardware_class", "score_scale", "-approved_at", "-id"],
                condition=Q(published=True),
                name="run_published_class_feed_idx",
            ),
            # The landing page's "newest verified results".
            models.Index(
                models.F("started_at").desc(),
                condition=Q(published=True, is_verified=True),
                name="run_verified_recent_idx",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(coverage_score__gte=0, coverage_score__lte=100)
                | Q(coverage_score__isnull=True),
                name="run_coverage_0_100",
            ),
            models.CheckConstraint(
                condition=Q(decode_tps_median__gte=0) | Q(decode_tps_median__isnull=True),
                name="run_decode_nonnegative",
            ),
            models.CheckConstraint(
                condition=Q(ttft_ms_median__gte=0) | Q(ttft_ms_median__isnull=True),
                name="run_ttft_nonnegative",
            ),
            models.CheckConstraint(
                condition=~Q(score_scale="speed") | Q(overall_score__isnull=True),
                name="run_speed_only_has_no_score",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.stack} @ {self.started_at:%Y-%m-%d}"

    @property
    def trust_tier(self) -> str:
        return methods.trust_tier(self.method, is_verified=self.is_verified)

    @property
    def provenance_url(self) -> str:
        return methods.provenance_url(self.provenance)

    @property
    def is_legacy(self) -> bool:
        return self.score_scale == ScoreScale.V2

    @property
    def decode_tps(self) -> float | None:
        """Headline decode speed: the median, or the mean where only a mean was published."""
        return (
            self.decode_tps_median if self.decode_tps_median is not None else self.decode_tps_mean
        )

    @property
    def ttft_ms(self) -> float | None:
        return self.ttft_ms_median if self.ttft_ms_median is not None else self.ttft_ms_mean

    @property
    def prefill_tps(self) -> float | None:
        return (
            self.prefill_tps_median
            if self.prefill_tps_median is not None
            else self.prefill_tps_mean
        )


class Lane(models.Model):
    """A ranked row: one stack on one hardware class, on one score scale and benchmark version.

    Speed figures belong to a hardware class and are never pooled. The lane with no hardware
    class is the stack's quality pooled across every machine (quality does not depend on the
    machine); it carries no speed. Kept by runs.services from the published runs.
    """

    stack = models.ForeignKey(Stack, on_delete=models.CASCADE, related_name="lanes")
    hardware_class = models.ForeignKey(
        HardwareClass, on_delete=models.CASCADE, null=True, blank=True, related_name="lanes"
    )
    score_scale = models.CharField(max_length=8, choices=ScoreScale.choices)
    benchmark_version = models.CharField(max_length=20, blank=True)

    run_count = models.PositiveIntegerField(default=0)
    submitter_count = models.PositiveIntegerField(default=0)
    # Every upload of this stack here, flagged, rejected and withdrawn ones included.
    attempt_count = models.PositiveIntegerField(default=0)
    best_run = models.ForeignKey(
        Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # The best run's own figure, kept as evidence ("best of N"); it never orders the rows. The
    # overall score on a hardware lane of a scored scale, quality on a pooled lane, decode on
    # a speed-only lane.
    best_score = models.FloatField(null=True, blank=True)
    # Medians of the runs' own figures (runs.figures.Interval): the median from one run, its
    # 95% interval (low, high) from three. Lanes rank by their median, the lanes of one or
    # two runs after the rest (leaderboard.queries.lanes).
    quality_median = models.FloatField(null=True, blank=True)
    quality_low = models.FloatField(null=True, blank=True)
    quality_high = models.FloatField(null=True, blank=True)
    # The overall score includes speed: a hardware class's alone, never on the pooled lane.
    overall_median = models.FloatField(null=True, blank=True)
    overall_low = models.FloatField(null=True, blank=True)
    overall_high = models.FloatField(null=True, blank=True)
    decode_median = models.FloatField(null=True, blank=True)
    decode_low = models.FloatField(null=True, blank=True)
    decode_high = models.FloatField(null=True, blank=True)
    prefill_median = models.FloatField(null=True, blank=True)
    prefill_low = models.FloatField(null=True, blank=True)
    prefill_high = models.FloatField(null=True, blank=True)
    ttft_median = models.FloatField(null=True, blank=True)
    ttft_low = models.FloatField(null=True, blank=True)
    ttft_high = models.FloatField(null=True, blank=True)
    # When these figures were worked out (a refresh that finds them unchanged keeps the row).
    refreshed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # A class's lanes of one scale and version (a class board, leaderboard.places).
            models.Index(
                fields=["hardware_class", "score_scale", "benchmark_version", "id", "refreshed_at"],
                name="lane_class_mark_idx",
            ),
            models.Index(fields=["stack", "score_scale"], name="lane_stack_scale_idx"),
            # A class's ranking (SQLite has no NULLS LAST in an index: rank non-null scores).
            models.Index(
                fields=["hardware_class", "score_scale", "benchmark_version", "-best_score"],
                name="lane_class_rank_idx",
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["stack", "hardware_class", "score_scale", "benchmark_version"],
                condition=Q(hardware_class__isnull=False),
                name="lane_unique_stack_class",
            ),
            models.UniqueConstraint(
                fields=["stack", "score_scale", "benchmark_version"],
                condition=Q(hardware_class__isnull=True),
                name="lane_unique_stack_pooled",
            ),
            models.CheckConstraint(
                condition=Q(hardware_class__isnull=False)
                | Q(
                    overall_median__isnull=True,
                    decode_median__isnull=True,
                    prefill_median__isnull=True,
                    ttft_median__isnull=True,
                ),
                name="lane_pooled_has_no_speed",
            ),
        ]

    def __str__(self) -> str:
        where = self.hardware_class.label if self.hardware_class is not None else "all hardware"
        return f"{self.stack} on {where}"
