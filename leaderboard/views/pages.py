"""Detail pages: a stack, a run, a model, a machine class and a submitter."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from django.contrib.auth.models import User
from django.core.paginator import Page, Paginator
from django.db.models import F, Prefetch
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_safe
from django.views.decorators.vary import vary_on_headers

from leaderboard import cache as board_cache
from leaderboard import charts, estimated, matrix, places, queries, summaries, sweeps
from leaderboard.filters import DAYS_CHOICES, PROFILE_CHOICES, SCALES, BoardFilters
from leaderboard.queued import LateSlotStart, late_starts_by_index
from leaderboard.resources import reasoning_view, resources_view
from leaderboard.templatetags.lanes import ci_text
from leaderboard.views.board import HtmxHttpRequest, scatter_for
from runs import lane_rows as lane_rules
from runs import public
from runs.labels import labels_by_id
from runs.lanes import lane_version
from runs.models import (
    Hardware,
    HardwareClass,
    Lane,
    Run,
    RunQuerySet,
    SpeedSample,
    Stack,
    SuiteResult,
    TaskResult,
    Visibility,
)
from runs.names import imported_label
from runs.standing import standing_of
from submissions.access import can_see_private, can_see_standing
from submissions.models import Status
from worker.rules.engines import known_build
from worker.rules.redact import redact_command, redact_text
from worker.rules.scoring import MEASURED_ONLY

RUNS_PER_PAGE = 25
RUN_SORT_LABELS = [("date", "newest"), ("overall", "overall"), ("decode", "decode tok/s")]
RUN_SORTS = {
    "date": [F("started_at").desc(), F("id").desc()],
    "overall": [F("overall_score").desc(nulls_last=True), F("id").desc()],
    "decode": [F("decode_tps_median").desc(nulls_last=True), F("id").desc()],
}


def _partial(request: HtmxHttpRequest, template: str, context: dict[str, Any]) -> HttpResponse:
    """The whole page, or only its #results block for an htmx request."""
    if request.htmx:
        template += "#results"
    return render(request, template, context)


def _run_page(request: HtmxHttpRequest, runs: RunQuerySet) -> tuple[Page[Run], str]:
    """A sorted page of runs with what their table row shows (two queries)."""
    sort = request.GET.get("sort", "date")
    if sort not in RUN_SORTS:
        sort = "date"
    listed = (
        runs.select_related("stack", "hardware", "submission", "submission__submitter")
        # The table shows none of the large columns; a stored payload can be megabytes.
        .defer("raw_payload", "error", "command_used", "stack__launch_settings")
        .order_by(*RUN_SORTS[sort])
    )
    page = Paginator(listed, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    return page, sort


def get_public_stack(pk: int) -> Stack:
    """A stack with at least one published run, or 404: unpublished stacks stay private."""
    stack = get_object_or_404(Stack, pk=pk)
    if not stack.published_run_count and not stack.best_run_id:
        raise Http404("no published runs")
    return stack


def stack_filters(request: HttpRequest) -> tuple[BoardFilters, str]:
    """The leaderboard's filters and the hardware class (?hw=, a class slug) from a query."""
    filters = BoardFilters.from_query(request.GET)
    hw = getattr(filters, "hw", "") or request.GET.get("hw", "").strip()[:120]
    return filters, hw


def filtered_runs(runs: RunQuerySet, filters: BoardFilters, hw: str) -> RunQuerySet:
    """The runs the leaderboard's filters keep: hardware class, machine, profile, date, ..."""
    if hw:
        runs = runs.filter(hardware_class__slug=hw)
    if filters.restricts_runs:
        runs = queries.restrict_runs(runs, filters)
    return runs


def active_run_filters(
    filters: BoardFilters, hw: str, classes: Iterable[HardwareClass]
) -> list[str]:
    """Human labels of the filters that restrict which runs count."""
    keep = set(filters.run_filter_query())
    labels = [label for name, label in filters.active() if name in keep]
    if hw:
        names = {c.slug: c.label for c in classes}
        labels.insert(0, names.get(hw, f"hardware {hw}"))
    return labels


@require_safe
@vary_on_headers("HX-Request")
def stack_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """A stack's lanes (one per hardware class), quality, charts, recipe and every run."""
    if any(value == "" for _name, value in request.GET.items()):
        # The filter form sends its empty fields too; share one clean link.
        clean = QueryDict(mutable=True)
        for name in request.GET:
            value = request.GET.get(name, "")  # the last value, as items() gives it
            if value:
                clean[name] = value
        return redirect(request.path + (f"?{clean.urlencode()}" if clean else ""))
    if request.htmx:
        stack = get_public_stack(pk)
        filters, hw = stack_filters(request)
        runs = filtered_runs(Run.objects.published().filter(stack=stack), filters, hw)
        page, sort = _run_page(request, runs)
        context = {"stack": stack, "page": page, "sort": sort, "run_sorts": RUN_SORT_LABELS}
        return _partial(request, "leaderboard/stack.html", context)
    query = _plain_run_query(request)
    if query is None:
        return render(request, "leaderboard/stack.html", _stack_context(request, pk))
    here = request.path + (f"?{query}" if query else "")
    return board_cache.render_page(
        request,
        "leaderboard/stack.html",
        f"stack|{pk}|{query}",
        lambda: {**_stack_context(request, pk), "return_path": here},
    )


def _plain_run_query(request: HtmxHttpRequest) -> str | None:
    """The query string when it holds at most one known sort and one page number: the page's
    links copy the query string, so a page is shared only when nothing else is in it."""
    query = request.GET
    if set(query) - {"sort", "page"} or any(len(query.getlist(name)) > 1 for name in query):
        return None
    if query.get("sort", "date") not in RUN_SORTS:
        return None
    page = query.get("page", "1")
    if not (page.isdigit() and len(page) <= 6):
        return None
    return query.urlencode()


def _stack_context(request: HtmxHttpRequest, pk: int) -> dict[str, Any]:
    stack = get_public_stack(pk)
    filters, hw = stack_filters(request)
    runs = filtered_runs(Run.objects.published().filter(stack=stack), filters, hw)
    page, sort = _run_page(request, runs)
    proof = summaries.evidence(summaries.run_rows(runs), summaries.attempts_of([stack.id]))
    classes = list(
        HardwareClass.objects.filter(runs__stack=stack, runs__published=True)
        .distinct()
        .order_by("label")
    )
    scope = proof.scopes[0] if proof.scopes else None
    focus = scope.lanes[0] if scope and scope.lanes else None
    chart_rows: list[dict[str, Any]] = []
    profile, suites = "", {}
    if scope:
        chart_rows, profile = summaries.chart_rows(proof, scope.key, filters.profile)
        counted = summaries.counted_in(runs, scope.key, profile)
        suites = summaries.suite_table(counted).get(stack.id, {})
    # ?hw= a class with no run of this stack: its estimate, never in the lanes' table.
    unmeasured = estimated.for_stack_page(stack, hw, classes)
    named = [unmeasured["hw_class"]] if unmeasured else []
    active = active_run_filters(filters, hw, classes + named)
    if not active:
        # The board ranks every run's lane: its place is the page's only when no filter drops runs.
        for shown in proof.scopes:
            ids = [lane.figures.hardware_class_id for lane in shown.lanes]
            found = places.lane_places(stack, ids, *shown.key) if ids else {}
            for lane in shown.lanes:
                lane.place = found.get(lane.figures.hardware_class_id)
    harness_matrix = matrix.for_stack(stack, hw or (focus.slug if focus else ""))
    recipe_run = None
    if focus and focus.best:
        recipe_run = Run.objects.defer("raw_payload").filter(id=focus.best["id"]).first()
    return {
        "stack": stack,
        "page": page,
        "sort": sort,
        "run_sorts": RUN_SORT_LABELS,
        "proof": proof,
        "scope": scope,
        "focus": focus,
        "profile": profile,
        "hw": hw,
        "filters": filters,
        "classes": classes,
        "active_filters": active,
        "profiles": PROFILE_CHOICES,
        "days_choices": DAYS_CHOICES,
        "suites": sorted(suites.values(), key=lambda s: s["suite"]),
        "decode_chart": summaries.decode_strip(chart_rows),
        "score_chart": summaries.score_strip(chart_rows),
        "decode_trend": summaries.class_trend(chart_rows),
        "sweeps": sweeps.stack_sweeps(proof.rows),
        "quality_trend": summaries.quality_trend(chart_rows),
        "harness_matrix": harness_matrix,
        "unmeasured": unmeasured,
        "recipe_run": recipe_run,
        "recipe_command": redact_command(recipe_run.command_used) if recipe_run else "",
        "recipe_model_file": redact_text(
            stack.launch_settings.get("model_file")
            or (Run.objects.filter(pk=recipe_run.pk).recorded_model_file() if recipe_run else "")
        ),
        "recipe_build": known_build(recipe_run.engine_version) if recipe_run else "",
        "recipe_settings": public.public_settings(stack.launch_settings),
        "share": share_meta(
            request,
            title=stack.label,
            description=_stack_description(proof, focus),
            path=reverse("leaderboard:stack", args=[stack.id]),
            image=reverse("leaderboard:stack_image", args=[stack.id]),
        ),
    }


def share_meta(
    request: HttpRequest, *, title: str, description: str, path: str, image: str
) -> dict[str, str]:
    """Absolute permalink and share-image URLs for Open Graph and Twitter cards."""
    base = f"{request.scheme}://{request.get_host()}"
    return {"title": title, "description": description, "url": base + path, "image": base + image}


def _fmt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _stack_description(proof: summaries.StackEvidence, focus: summaries.ShownLane | None) -> str:
    parts = []
    if proof.scopes and proof.scopes[0].quality.median is not None:
        parts.append(f"Quality {ci_text(proof.scopes[0].quality)} across all hardware")
    if focus:
        runs = f"{focus.run_count} run{'s' if focus.run_count != 1 else ''}"
        decode = focus.figures.decode
        if decode is not None and decode.median is not None:
            over = f" over {runs}" if decode.has_interval else ""  # else ci_text names them
            parts.append(f"on {focus.hardware}: median decode {ci_text(decode)} tok/s{over}")
        else:
            parts.append(f"on {focus.hardware}: {runs}, no decode speed")
    parts.append(
        f"{proof.run_count} approved run{'s' if proof.run_count != 1 else ''} from "
        f"{proof.submitter_count} submitter{'s' if proof.submitter_count != 1 else ''}"
    )
    return "; ".join(parts) + "."


def _get_visible_run(request: HttpRequest, pk: int) -> tuple[Run, bool]:
    """The run if this visitor may see it (published, unlisted-by-link, or their own)."""
    run = get_object_or_404(
        Run.objects.select_related(
            "stack", "hardware", "hardware_class", "submission", "submission__submitter"
        ),
        pk=pk,
    )
    private = can_see_private(request.user, run)
    if run.published or private:
        return run, private
    submission = getattr(run, "submission", None)
    if (
        run.visibility == Visibility.UNLISTED
        and submission is not None
        and submission.status == Status.APPROVED
    ):
        return run, private
    raise Http404("no such run")


def _visibility_note(run: Run, private: bool) -> str:
    """Who can open this page, said as _get_visible_run decides it (issue 18: an owner's
    pending run must not claim that its link works for everyone)."""
    if run.published:
        return ""
    submission = getattr(run, "submission", None)
    status = submission.status if submission is not None else None
    if run.visibility == Visibility.UNLISTED and status == Status.APPROVED:
        return (
            "This run is unlisted: anyone with its link can open it, and it appears on no "
            "public list."
        )
    if not private:
        return ""
    if status in (Status.PENDING, Status.FLAGGED):
        return (
            "This run waits for moderation. Only you and moderators can see it until it is "
            "approved; anyone else who opens its link gets “not found”."
        )
    if status == Status.REJECTED:
        return "This run was rejected. Only you and moderators can see it; it is on no public page."
    if status == Status.WITHDRAWN:
        return "This run is withdrawn. Only you and moderators can see it; it is on no public page."
    return "This run is not public. Only you and moderators can see it."


@dataclass(frozen=True)
class Trial:
    """A stored trial, and the wait for a server slot its prefill window held (issue 35)."""

    sample: SpeedSample
    late_start: LateSlotStart | None


@dataclass(frozen=True)
class TaskReceipt:
    """A task's stored result with what the run page reads from its metadata."""

    task: TaskResult
    notes: list[tuple[str, str]]
    reasoning_tokens: int | None
    cell_status: str | None  # a measured-only suite's cell: measured, skipped or failed
    trials: list[Trial]


@dataclass(frozen=True)
class SuiteReceipt:
    suite: SuiteResult
    measured_only: bool  # measured, not scored (worker.rules.scoring.MEASURED_ONLY)
    tasks: list[TaskReceipt]


def _receipt(suite: SuiteResult) -> SuiteReceipt:
    """A suite's receipt from its prefetched tasks and trials."""
    measured_only = suite.suite in MEASURED_ONLY
    tasks = []
    for task in suite.tasks.all():
        late = late_starts_by_index(task.metadata)
        trials = [Trial(s, late.get(s.trial_index)) for s in task.samples.all()]
        tasks.append(
            TaskReceipt(
                task,
                public.verifier_notes(task.metadata),
                public.reasoning_tokens(task.metadata),
                public.cell_status(task.metadata) if measured_only else None,
                trials,
            )
        )
    return SuiteReceipt(suite, measured_only, tasks)


@require_safe
def run_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """One run's receipts: suites, tasks, verifier notes, latencies and trials."""
    run, private = _get_visible_run(request, pk)
    task_fields = ["id", "suite_result_id", *public.PUBLIC_TASK_COLUMNS, "metadata"]
    if private:
        task_fields += ["output", "error"]
    stored = (
        SuiteResult.objects.filter(run=run)
        .order_by("suite")
        .prefetch_related(
            Prefetch(
                "tasks",
                queryset=TaskResult.objects.only(*task_fields)
                .order_by("task_id")
                .prefetch_related(
                    Prefetch("samples", queryset=SpeedSample.objects.order_by("trial_index"))
                ),
            )
        )
    )
    suites = [_receipt(suite) for suite in stored]
    context_lane = None
    counted = lane_rules.counts({"score_scale": run.score_scale, "comparable": run.comparable})
    if run.hardware_class_id and counted:
        # This run among the stack's others on the same hardware class: never other machines.
        same = Run.objects.published().filter(
            stack_id=run.stack_id, hardware_class_id=run.hardware_class_id
        )
        key = (run.hardware_class_id, run.score_scale, lane_version(run))
        attempts = summaries.attempts_of([run.stack_id])
        context_lane = summaries.evidence(summaries.run_rows(same), attempts).lane(key)
    try:
        report_url = reverse("submissions:report", args=[run.id])
    except NoReverseMatch:
        report_url = ""
    context = {
        "run": run,
        "stack": run.stack,
        "suites": suites,
        "private": private,
        "command": redact_command(run.command_used),
        "resources": resources_view(run.raw_payload),
        "reasoning": reasoning_view(run.raw_payload),
        "sweeps": sweeps.run_sweeps(run.raw_payload),
        "context_lane": context_lane,
        # Where it stands among its class: public once published, else for its owner only.
        "standing": standing_of(run) if can_see_standing(request.user, run) else None,
        "unlisted": not run.published,
        "visibility_note": _visibility_note(run, private),
        "report_url": report_url if request.user.is_authenticated else "",
        "share": share_meta(
            request,
            title=f"{run.stack.label} on {run.hardware or 'a remote endpoint'}",
            description=_run_description(run),
            path=reverse("leaderboard:run", args=[run.id]),
            image=reverse("leaderboard:run_image", args=[run.id]),
        ),
    }
    return render(request, "leaderboard/run.html", context)


def _run_description(run: Run) -> str:
    parts = []
    if run.overall_score is not None:
        parts.append(f"Overall {_fmt(run.overall_score)}, quality {_fmt(run.quality_score)}")
    if run.decode_tps is not None:
        parts.append(f"{_fmt(run.decode_tps)} decode tok/s")
    if run.ttft_ms is not None:
        parts.append(f"TTFT {_fmt(run.ttft_ms, 0)} ms")
    parts.append("verified" if run.is_verified else "self-reported")
    return "; ".join(parts) + "."


@require_safe
@vary_on_headers("HX-Request")
def model_detail(request: HtmxHttpRequest, model_id: str) -> HttpResponse:
    """Every published stack of one model on one hardware class (the visitor's, or the class
    with the most runs of it): quantizations, engines and settings side by side."""
    stacks = {s.id: s for s in Stack.objects.filter(model_id=model_id, published_run_count__gt=0)}
    if not stacks:
        raise Http404("no published stacks for this model")
    stored = list(
        Lane.objects.filter(stack_id__in=list(stacks), run_count__gt=0).select_related(
            "hardware_class"
        )
    )
    classes: Counter[HardwareClass] = Counter()
    for lane in stored:
        if lane.hardware_class is not None:  # selected with the lane: no query
            classes[lane.hardware_class] += lane.run_count
    _filters, hw = stack_filters(request)
    chosen = next((c for c in classes if c.slug == hw), None)
    if chosen is None and classes:
        chosen = max(classes, key=lambda c: (classes[c], -c.id))
    quality = {
        (lane.stack_id, lane.score_scale, lane.benchmark_version): lane
        for lane in stored
        if lane.hardware_class_id is None
    }
    rows = [
        summaries.StoredRow(
            lane, quality.get((lane.stack_id, lane.score_scale, lane.benchmark_version))
        )
        for lane in stored
        if chosen is not None and lane.hardware_class_id == chosen.id
    ]
    rows.sort(key=summaries.StoredRow.order)
    page = Paginator(rows, 50).get_page(request.GET.get("page"))
    shown = {row.lane.stack_id for row in rows}
    elsewhere = [s for s in stacks.values() if s.id not in shown]
    labels = labels_by_id(stacks.values())
    for row in page.object_list:
        row.stack = stacks[row.lane.stack_id]
        row.label = labels[row.lane.stack_id]
    context: dict[str, Any] = {
        "model_id": model_id,
        "page": page,
        "chosen": chosen,
        "classes": sorted(classes.items(), key=lambda item: -item[1]),
        "elsewhere": sorted(((labels[s.id], s) for s in elsewhere), key=lambda p: p[0]),
    }
    if request.htmx:
        return _partial(request, "leaderboard/model.html", context)
    if chosen is None:  # no lane on any class: no rows, so no chart
        context["scatter"] = None
        return render(request, "leaderboard/model.html", context)
    context["scatter"] = charts.scatter(
        [
            {
                "x": row.decode.median,
                "y": row.quality.median,
                "label": f"{row.label}: quality {row.quality.median:.1f} (all hardware), "
                f"{row.decode.median:.1f} tok/s on {chosen.label}",
                "href": reverse("leaderboard:stack", args=[row.lane.stack_id])
                + f"?hw={chosen.slug}",
            }
            for row in page.object_list
            if row.quality.median is not None and row.decode.median
        ]
    )
    return render(request, "leaderboard/model.html", context)


@require_safe
@vary_on_headers("HX-Request")
def hardware_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The leaderboard restricted to one machine class: best run per stack on it."""
    hardware = get_object_or_404(Hardware.objects.select_related("hardware_class"), pk=pk)
    # The page is the machine; filters that would pick other machines do not apply.
    filters = replace(
        BoardFilters.from_query(request.GET), hardware=hardware.id, q="", vendor="", gpu=""
    )
    result = queries.board(filters)
    if not result.total and not Run.objects.published().filter(hardware=hardware).exists():
        raise Http404("no published runs on this hardware")
    path = reverse("leaderboard:hardware", args=[pk])
    context = {
        "hardware": hardware,
        "filters": filters,
        "board": result,
        "rank_offset": result.page.start_index() - 1 if result.total else 0,
        "path": path,
        "scatter": None if request.htmx else scatter_for(result.points),
        "export_qs": f"?{filters.to_query().urlencode()}",
        "scales": SCALES,
        "fixed_filter": "hardware",
    }
    return _partial(request, "leaderboard/hardware.html", context)


def _submitter_page(
    request: HtmxHttpRequest, runs: RunQuerySet, **context: object
) -> HttpResponse | None:
    """A submitter's page of runs, or None when there is none to show."""
    page, sort = _run_page(request, runs)
    if not page.paginator.count:
        return None
    context.update(page=page, sort=sort, run_sorts=RUN_SORT_LABELS)
    return _partial(request, "leaderboard/submitter.html", context)


@require_safe
@vary_on_headers("HX-Request")
def submitter_detail(request: HtmxHttpRequest, username: str) -> HttpResponse:
    """Runs submitted by one account."""
    runs = Run.objects.published().filter(queries.account_runs_q(username))
    response = _submitter_page(request, runs, name=username)
    if response is not None:
        return response
    imported = Run.objects.published().filter(queries.imported_runs_q(username))
    if not User.objects.filter(username=username).exists() and imported.exists():
        # Links from before imported authors had pages of their own.
        return redirect("leaderboard:imported_submitter", name=username, permanent=True)
    raise Http404("no published runs by this submitter")


@require_safe
@vary_on_headers("HX-Request")
def imported_submitter_detail(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """Runs imported under one author's name: never merged with an account's page."""
    runs = Run.objects.published().filter(queries.imported_runs_q(name))
    response = _submitter_page(request, runs, name=imported_label(name), imported=True)
    if response is None:
        raise Http404("no published runs by this submitter")
    return response
