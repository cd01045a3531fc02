"""The landing page, the leaderboard, its exports and feed, methodology and the theme switch."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, time, timedelta

from django.db.models import Count, Q, Sum
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_POST, require_safe
from django.views.decorators.vary import vary_on_headers
from django_htmx.middleware import HtmxDetails

from benchloop_site.conditional import revalidated
from leaderboard import cache as board_cache
from leaderboard import charts, exports, queries
from leaderboard import filters as board_filters
from leaderboard.filters import BoardFilters
from runs.models import Hardware, Run, ScoreScale, Stack

NEWEST_DAYS = 90
THEME_COOKIE = "theme"


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def _base_url(request: HttpRequest) -> str:
    return f"{request.scheme}://{request.get_host()}"


def _has_blank_values(request: HttpRequest) -> bool:
    """A form submitted without JavaScript sends every field, empty or not."""
    return any(value == "" for _, value in request.GET.items())


def scatter_for(points: list[dict]) -> charts.Scatter | None:
    return charts.scatter(
        [
            {
                "x": p["decode_tps_median"],
                "y": p["quality_score"],
                "label": (
                    f"{p['stack__model_id']} {p['stack__quantization']} · {p['stack__engine']}: "
                    f"quality {p['quality_score']:.1f}, {p['decode_tps_median']:.1f} tok/s"
                ),
                "href": reverse("leaderboard:stack", args=[p["stack_id"]]),
            }
            for p in points
        ]
    )


@require_safe
def landing(request: HttpRequest) -> HttpResponse:
    """What BenchLoop measures, how to take part, and the newest verified results."""
    return board_cache.render_page(
        request, "leaderboard/landing.html", "landing", lambda: _landing_context(request)
    )


def _landing_context(request: HttpRequest) -> dict:
    totals = Stack.objects.aggregate(
        stacks=Count("id", filter=Q(best_run__isnull=False)),
        runs=Sum("published_run_count"),
    )
    # The window bounds the scan on the started_at index while few runs are verified.
    since = timezone.now() - timedelta(days=NEWEST_DAYS)
    newest = list(
        Run.objects.published()
        .filter(is_verified=True, started_at__gte=since)
        .select_related("stack", "hardware")
        .order_by("-started_at")[:8]
    )
    verified = bool(newest)
    if not newest:
        newest = list(
            Run.objects.published()
            .on_scale(ScoreScale.V3)
            .select_related("stack", "hardware")
            .order_by("-started_at")[:8]
        )
    top = queries.board(BoardFilters(), scatter_limit=0)
    return {
        "totals": totals,
        "machines": Hardware.objects.count(),
        "newest": newest,
        "newest_verified": verified,
        "top": top.rows[:5],
        "site_url": _base_url(request),
        "return_path": reverse("leaderboard:home"),
    }


_INDENT = re.compile(r"[ \t]*\n\s*")


@require_safe
@vary_on_headers("HX-Request")
def leaderboard(request: HtmxHttpRequest) -> HttpResponse:
    """One row per stack, filtered and sorted by the query string; htmx gets only #results."""
    filters = BoardFilters.from_query(request.GET)
    canonical = filters.to_query()
    path = reverse("leaderboard:leaderboard")
    canonical_url = path + (f"?{canonical.urlencode()}" if canonical else "")
    if not request.htmx and _has_blank_values(request):
        return redirect(canonical_url)
    export_qs = f"?{canonical.urlencode()}" if canonical else ""
    key = canonical.urlencode()

    def page_context() -> dict:
        # The table, scatter and filter form depend on nothing but the filters (no user, no
        # CSRF token), so they are cached as HTML until the next publish (leaderboard.cache).
        fragments = {"results": (key, lambda: _results_html(request, filters, path, export_qs))}
        if not request.htmx:
            fragments["form"] = (key, lambda: _form_html(request, filters, path))
        html = board_cache.cached_many(fragments)
        return {
            "filters": filters,
            "results_html": html["results"],
            "form_html": html.get("form", ""),
            "canonical_url": canonical_url,
            "return_path": canonical_url,
            "export_qs": export_qs,
        }

    if request.htmx:
        response = render(request, "leaderboard/leaderboard.html#results", page_context())
        # The form sends empty fields too; the address bar should show the clean link.
        response["HX-Push-Url"] = canonical_url
        return response
    return board_cache.render_page(
        request, "leaderboard/leaderboard.html", f"board|{key}", page_context
    )


def _form_html(request: HttpRequest, filters: BoardFilters, path: str) -> str:
    context = {
        "filters": filters,
        "path": path,
        "facets": board_cache.cached("facets", "", queries.facets),
        "scales": board_filters.SCALES,
        "modes": board_filters.MODES,
        "vendors": board_filters.VENDOR_CHOICES,
        "vram_choices": board_filters.VRAM_CHOICES,
        "ram_choices": board_filters.RAM_CHOICES,
        "param_choices": board_filters.PARAM_CHOICES,
        "profile_choices": board_filters.PROFILE_CHOICES,
        "location_choices": board_filters.LOCATION_CHOICES,
        "days_choices": [(str(k), v) for k, v in board_filters.DAYS_CHOICES],
        "more_open": any(
            getattr(filters, name)
            for name in ("ram", "cpu", "apple", "family", "params", "harness", "profile")
            + ("comparable", "location", "days", "verified")
        ),
    }
    return _compact(render_to_string("leaderboard/_board_form.html", context, request=request))


def _results_html(request: HttpRequest, filters: BoardFilters, path: str, export_qs: str) -> str:
    result = queries.board(filters)
    context = {
        "filters": filters,
        "board": result,
        "rank_offset": result.page.start_index() - 1 if result.total else 0,
        "scatter": scatter_for(result.points),
        "path": path,
        "export_qs": export_qs,
    }
    # The fragment reads nothing of the request but its path (the pager's fallback).
    return _compact(render_to_string("leaderboard/_board_results.html", context, request=request))


def _compact(html: SafeString) -> SafeString:
    """Template indentation out of a cached fragment (a tenth of the page); it renders the same,
    since these fragments hold no <pre> or <textarea>. Still our escaped template output."""
    return mark_safe(_INDENT.sub("\n", html))  # noqa: S308


def board_validators(request: HttpRequest, fmt: str = "atom") -> tuple[str, datetime] | None:
    """ETag and Last-Modified of an export or feed of the board: what it shows changes only
    with the data version (publishing bumps it), the filters, the host it names in links, and
    the date (a "last N days" filter moves with it, and so does an export's file name)."""
    version = board_cache.data_version()
    if version is None:
        return None
    number, changed = version
    today = timezone.now().date()
    parts = [str(number), today.isoformat(), _base_url(request), fmt]
    parts.append(BoardFilters.from_query(request.GET).to_query().urlencode())
    etag = hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]
    midnight = datetime.combine(today, time(), tzinfo=UTC)
    return etag, max(datetime.fromtimestamp(changed, UTC), midnight)


@require_safe
@revalidated(board_validators)
def export(request: HttpRequest, fmt: str) -> HttpResponse:
    """The filtered view as CSV, JSON or Markdown (every row, not just one page)."""
    filters = BoardFilters.from_query(request.GET)
    rows = exports.records(queries.board_export_rows(filters), base_url=_base_url(request))
    query = filters.to_query().urlencode()
    stem = f"benchloop-leaderboard-{timezone.now():%Y-%m-%d}"
    if fmt == "csv":
        response = HttpResponse(exports.to_csv(rows), content_type="text/csv; charset=utf-8")
    elif fmt == "json":
        response = HttpResponse(exports.to_json(rows, query=query), content_type="application/json")
    else:
        title = "BenchLoop leaderboard" + (f" ({query})" if query else "")
        response = HttpResponse(
            exports.to_markdown(rows, title=title), content_type="text/markdown; charset=utf-8"
        )
    response["Content-Disposition"] = f'attachment; filename="{stem}.{fmt}"'
    return response


@require_safe
@revalidated(board_validators)
def feed(request: HttpRequest) -> HttpResponse:
    """Atom feed of newly approved runs for any filter ("new results on RTX 4090")."""
    filters = BoardFilters.from_query(request.GET)
    base = _base_url(request)
    labels = [label for _, label in filters.active()]
    title = "BenchLoop: new results" + (f" ({', '.join(labels)})" if labels else "")
    query = filters.to_query()
    board_link = (
        base + reverse("leaderboard:leaderboard") + (f"?{query.urlencode()}" if query else "")
    )
    atom = exports.XmlSafeAtomFeed(
        title=title,
        link=board_link,
        description="Newly approved BenchLoop results matching a leaderboard view.",
        feed_url=request.build_absolute_uri(),
        language="en",
    )
    for run in queries.newest_approved(filters):
        stack = run.stack
        hardware = run.hardware.label if run.hardware else "remote endpoint"
        scores = (
            f"overall {run.overall_score:.1f}, quality {run.quality_score:.1f}"
            if run.overall_score is not None and run.quality_score is not None
            else "speed only"
        )
        speed = f"{run.decode_tps:.1f} tok/s decode" if run.decode_tps else "no speed data"
        atom.add_item(
            title=f"{stack.label} on {hardware}",
            link=base + reverse("leaderboard:run", args=[run.id]),
            description=f"{scores}; {speed}; {run.get_score_scale_display()}.",
            unique_id=f"{base}/runs/{run.id}/",
            pubdate=run.approved_at,
            updateddate=run.approved_at,
            author_name=run.submission.display_submitter if hasattr(run, "submission") else "",
            categories=[c for c in (stack.engine, stack.quantization, stack.model_family) if c],
        )
    response = HttpResponse(content_type="application/atom+xml; charset=utf-8")
    atom.write(response, "utf-8")
    return response


@require_safe
def methodology(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/methodology.html")


@require_POST
def set_theme(request: HttpRequest) -> HttpResponseRedirect:
    """Remember a light, dark or automatic theme in a cookie; works without JavaScript."""
    theme = request.POST.get("theme", "auto")
    target = request.POST.get("next", "/")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = "/"
    response = HttpResponseRedirect(target)
    if theme in ("light", "dark"):
        response.set_cookie(
            THEME_COOKIE, theme, max_age=365 * 24 * 3600, samesite="Lax", httponly=True
        )
    else:
        response.delete_cookie(THEME_COOKIE, samesite="Lax")
    return response
