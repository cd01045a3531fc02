"""Detail pages: a stack, a run, a model, a machine class and a submitter."""

from __future__ import annotations

from dataclasses import replace

from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.db.models import F, Prefetch
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_safe
from django.views.decorators.vary import vary_on_headers

from leaderboard import cache as board_cache
from leaderboard import public, queries, summaries
from leaderboard.filters import SCALES, BoardFilters
from leaderboard.views.board import HtmxHttpRequest, scatter_for
from runs.models import Hardware, Run, SpeedSample, Stack, SuiteResult, TaskResult, Visibility
from submissions.access import can_see_private
from submissions.models import Status
from submissions.names import imported_label

RUNS_PER_PAGE = 25
RUN_SORT_LABELS = [("date", "newest"), ("overall", "overall"), ("decode", "decode tok/s")]
RUN_SORTS = {
    "date": [F("started_at").desc(), F("id").desc()],
    "overall": [F("overall_score").desc(nulls_last=True), F("id").desc()],
    "decode": [F("decode_tps_median").desc(nulls_last=True), F("id").desc()],
}


def _partial(request: HtmxHttpRequest, template: str, context: dict) -> HttpResponse:
    """The whole page, or only its #results block for an htmx request."""
    if request.htmx:
        template += "#results"
    return render(request, template, context)


def _run_page(request: HtmxHttpRequest, runs):
    """A sorted page of runs with what their table row shows (two queries)."""
    sort = request.GET.get("sort", "date")
    if sort not in RUN_SORTS:
        sort = "date"
    page = Paginator(
        runs.select_related("stack", "hardware", "submission", "submission__submitter").order_by(
            *RUN_SORTS[sort]
        ),
        RUNS_PER_PAGE,
    ).get_page(request.GET.get("page"))
    return page, sort


def get_public_stack(pk: int) -> Stack:
    """A stack with at least one published run, or 404: unpublished stacks stay private."""
    stack = get_object_or_404(Stack, pk=pk)
    if not stack.published_run_count and not stack.best_run_id:
        raise Http404("no published runs")
    return stack


@require_safe
@vary_on_headers("HX-Request")
def stack_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Every approved run of a stack, its spread, per-suite scores, trend and recipe."""
    if request.htmx:
        stack = get_public_stack(pk)
        page, sort = _run_page(request, Run.objects.published().filter(stack=stack))
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


def _stack_context(request: HtmxHttpRequest, pk: int) -> dict:
    stack = get_public_stack(pk)
    runs = Run.objects.published().filter(stack=stack)
    page, sort = _run_page(request, runs)
    rows = summaries.run_rows(runs)
    proof = summaries.evidence(rows)
    best_id = proof.best["id"] if proof.best else None
    best_run = Run.objects.select_related("hardware").filter(id=best_id).first()
    suites = summaries.suite_table(runs).get(stack.id, {})
    return {
        "stack": stack,
        "page": page,
        "sort": sort,
        "run_sorts": RUN_SORT_LABELS,
        "proof": proof,
        "best_run": best_run,
        "suites": sorted(suites.values(), key=lambda s: s["suite"]),
        "decode_chart": summaries.decode_strip(rows),
        "score_chart": summaries.score_strip(rows),
        "decode_trend": summaries.engine_trend(rows),
        "score_trend": summaries.engine_trend(rows, "overall_score", unit="overall score"),
        "recipe_command": public.redact_command(best_run.command_used) if best_run else "",
        "recipe_settings": public.public_settings(stack.launch_settings),
        "share": share_meta(
            request,
            title=stack.label,
            description=_stack_description(proof),
            path=reverse("leaderboard:stack", args=[stack.id]),
            image=reverse("leaderboard:stack_image", args=[stack.id]),
        ),
    }


def share_meta(request, *, title: str, description: str, path: str, image: str) -> dict:
    """Absolute permalink and share-image URLs for Open Graph and Twitter cards."""
    base = f"{request.scheme}://{request.get_host()}"
    return {"title": title, "description": description, "url": base + path, "image": base + image}


def _fmt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _stack_description(proof: summaries.StackEvidence) -> str:
    parts = []
    if proof.best and proof.best["overall_score"] is not None:
        parts.append(
            f"Overall {_fmt(proof.best['overall_score'])}, "
            f"quality {_fmt(proof.best['quality_score'])} (best run)"
        )
    if proof.decode:
        parts.append(f"median {_fmt(proof.decode.median)} decode tok/s")
    parts.append(
        f"{proof.run_count} approved run{'s' if proof.run_count != 1 else ''} from "
        f"{proof.submitter_count} submitter{'s' if proof.submitter_count != 1 else ''}"
    )
    return "; ".join(parts) + "."


def _get_visible_run(request, pk: int) -> tuple[Run, bool]:
    """The run if this visitor may see it (published, unlisted-by-link, or their own)."""
    run = get_object_or_404(
        Run.objects.select_related("stack", "hardware", "submission", "submission__submitter"),
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


@require_safe
def run_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """One run's receipts: suites, tasks, verifier notes, latencies and trials."""
    run, private = _get_visible_run(request, pk)
    task_fields = [
        "id",
        "suite_result_id",
        "task_id",
        "passed",
        "score",
        "latency_ms",
        "tokens_generated",
        "tokens_prompt",
        "execution_ok",
        "finish_reason",
        "metadata",
    ]
    if private:
        task_fields += ["output", "error"]
    suites = list(
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
    for suite in suites:
        for task in suite.tasks.all():
            task.notes = public.verifier_notes(task.metadata)
    try:
        report_url = reverse("submissions:report", args=[run.id])
    except NoReverseMatch:
        report_url = ""
    context = {
        "run": run,
        "stack": run.stack,
        "suites": suites,
        "private": private,
        "command": public.redact_command(run.command_used),
        "unlisted": not run.published,
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
    """Every published stack of one model: quantizations, engines and settings side by side."""
    stacks = Stack.objects.filter(model_id=model_id, best_run__isnull=False)
    page = Paginator(
        stacks.select_related("best_run", "best_run__hardware").order_by(
            "best_run__score_scale",
            "-best_run__overall_score",
            "-best_run__decode_tps_median",
            "id",
        ),
        50,
    ).get_page(request.GET.get("page"))
    if not page.paginator.count:
        raise Http404("no published stacks for this model")
    context = {"model_id": model_id, "page": page}
    if request.htmx:
        return _partial(request, "leaderboard/model.html", context)
    points = [
        {
            "decode_tps_median": s.best_run.decode_tps_median,
            "quality_score": s.best_run.quality_score,
            "stack_id": s.id,
            "stack__model_id": s.model_id,
            "stack__quantization": s.quantization,
            "stack__engine": s.engine,
        }
        for s in page.object_list
        if s.best_run.quality_score is not None and s.best_run.decode_tps_median
    ]
    context["scatter"] = scatter_for(points)
    return render(request, "leaderboard/model.html", context)


@require_safe
@vary_on_headers("HX-Request")
def hardware_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The leaderboard restricted to one machine class: best run per stack on it."""
    hardware = get_object_or_404(Hardware, pk=pk)
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


def _submitter_page(request: HtmxHttpRequest, runs, **context) -> HttpResponse | None:
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
