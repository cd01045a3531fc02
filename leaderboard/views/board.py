"""The landing page, the leaderboard, its exports and feed, methodology and the theme switch."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, time, timedelta
from typing import Any

from django.db.models import Count, Q, Sum
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_POST, require_safe
from django.views.decorators.vary import vary_on_headers
from django_htmx.middleware import HtmxDetails

from core.conditional import revalidated
from core.feeds import XmlSafeAtomFeed
from leaderboard import cache as board_cache
from leaderboard import charts, estimated, exports, matrix, menus, queries, scopes
from leaderboard import filters as board_filters
from leaderboard.filters import BoardFilters
from leaderboard.hardware_menu import hardware_menu
from leaderboard.rows import Row
from leaderboard.suite_columns import SUITE_COLUMNS
from runs.methods import METHODS
from runs.models import HardwareClass, HardwareKind, Run, Stack
from worker.rules.reasoning import DEFAULT_THINKING_BUDGET, MAX_TOKENS_CEILING

NEWEST_DAYS = 90
THEME_COOKIE = "theme"


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def _base_url(request: HttpRequest) -> str:
    return f"{request.scheme}://{request.get_host()}"


def _has_blank_values(request: HttpRequest) -> bool:
    """A form submitted without JavaScript sends every field, empty or not."""
    return any(value == "" for _, value in request.GET.items())


def scatter_for(points: list[dict[str, Any]], *, query: str = "") -> charts.Scatter | None:
    """The quality against speed chart of these points; `query` (e.g. "?hw=rtx-4090") goes on
    each stack link. Links are reversed once: a chart draws hundreds of them."""
    marker = 987654321
    link = reverse("leaderboard:stack", args=[marker])
    return charts.scatter(
        [
            {
                "x": p["decode_tps_median"],
                "y": p["quality_score"],
                "label": (
                    f"{p['stack__model_id']} {p['stack__quantization']} · {p['stack__engine']}: "
                    f"quality {p['quality_score']:.1f}, {p['decode_tps_median']:.1f} tok/s"
                ),
                "href": link.replace(str(marker), str(p["stack_id"])) + query,
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


def _landing_context(request: HttpRequest) -> dict[str, Any]:
    totals = Stack.objects.aggregate(
        stacks=Count("id", filter=Q(best_run__isnull=False)),
        runs=Sum("published_run_count"),
    )
    # The window bounds the scan on the started_at index while few runs are verified.
    since = timezone.now() - timedelta(days=NEWEST_DAYS)
    related = ("stack", "hardware", "hardware_class")
    newest = list(
        Run.objects.published()
        .filter(is_verified=True, started_at__gte=since)
        .select_related(*related)
        .order_by("-started_at")[:8]
    )
    verified = bool(newest)
    if not newest:
        newest = list(Run.objects.published().select_related(*related).order_by("-started_at")[:8])
    # Speeds only on one class (the most common one); across hardware, quality alone.
    top = queries.board(BoardFilters(), scatter_limit=0)
    top_quality = queries.board(BoardFilters(hw=board_filters.ALL_HARDWARE), scatter_limit=0)
    choices = menus.cached_hardware_choices()
    return {
        "sources": queries.runs_by_method(),
        "top_board": top,
        "totals": totals,
        "machines": len(choices),
        "newest": newest,
        "newest_verified": verified,
        "top": top.rows[:5],
        "top_scope": top.scope,
        "top_quality": top_quality.rows[:5],
        "hardware_menu": hardware_menu(choices),
        "hardware_links": _popular(choices),
        "site_url": _base_url(request),
        "return_path": reverse("leaderboard:home"),
    }


def _popular(choices: list[dict[str, Any]], count: int = 6) -> list[dict[str, Any]]:
    """The classes with the most runs, for one-click links."""
    return sorted(
        (c for c in choices if c["kind"] != HardwareKind.REMOTE), key=lambda c: -c["runs"]
    )[:count]


def hw_choice(filters: BoardFilters) -> tuple[str, list[tuple[str, str]]]:
    """The menu value that stands for the hardware the visitor chose ("" when they chose none:
    the menu never shows the default class as their choice), and hidden fields for the
    hardware filters the menu cannot show, so a form submitted without JavaScript keeps them."""
    narrowing = [(name, getattr(filters, name)) for name in board_filters.CLASS_NARROWING]
    set_ = {name: value for name, value in narrowing if value}
    if filters.hw:
        value = filters.hw
    elif filters.vram:
        value = f"vram:{filters.vram}"
        set_.pop("vram")
    elif filters.fits:
        value = f"fits:{filters.fits}"
        set_.pop("fits")
    elif filters.cpu != filters.apple:
        value = "kind:cpu" if filters.cpu else "kind:apple"
        set_.pop("cpu" if filters.cpu else "apple")
    else:
        value = ""
    hidden = [(name, "1" if v is True else str(v)) for name, v in set_.items()]
    return value, hidden


_INDENT = re.compile(r"[ \t]*\n\s*")


@require_safe
@vary_on_headers("HX-Request")
def leaderboard(request: HtmxHttpRequest) -> HttpResponse:
    """One row per lane (a stack on a hardware class), filtered and sorted by the query string;
    htmx gets only #results."""
    filters = queries.settle(BoardFilters.from_query(request.GET))
    canonical = filters.to_query()
    path = reverse("leaderboard:leaderboard")
    canonical_url = path + (f"?{canonical.urlencode()}" if canonical else "")
    resend = _has_blank_values(request) or ":" in request.GET.get("hw", "")
    if not request.htmx and (resend or len(request.GET.getlist("cols")) > 1):
        # A form sent without JavaScript: every field, the hardware menu's hw=vram:24, and
        # one cols=… per ticked suite column (the link names them once: cols=a,b).
        return redirect(canonical_url)
    export_qs = f"?{canonical.urlencode()}" if canonical else ""
    key = canonical.urlencode()

    def page_context() -> dict[str, Any]:
        # The table, scatter and filter form depend on nothing but the filters (no user, no
        # CSRF token), so they are cached as HTML until the next publish (leaderboard.cache).
        fragments = {"results": (key, lambda: _results_html(request, filters, path))}
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
    facets = board_cache.cached("facets", "", menus.facets)
    default = None if filters.picks_hardware else scopes.default_class(filters.scale)
    choice, hidden = hw_choice(filters)
    menu = hardware_menu(facets["hardware"])
    context = {
        "filters": filters,
        "path": path,
        "facets": facets,
        "hw_value": choice,
        "hw_default": default.label if default else "",
        "hw_listed": any(choice == value for _, options in menu for value, _ in options),
        "hw_hidden": hidden,
        "hardware_menu": menu,
        "versions": queries.benchmark_version(filters)[1],
        "scales": board_filters.SCALES,
        "param_choices": board_filters.PARAM_CHOICES,
        "backend_choices": board_filters.BACKEND_CHOICES,
        "profile_choices": board_filters.PROFILE_CHOICES,
        "method_choices": [(key, m.label) for key, m in METHODS.items()],
        "location_choices": board_filters.LOCATION_CHOICES,
        "days_choices": [(str(k), v) for k, v in board_filters.DAYS_CHOICES],
        "suite_choices": [(name, *text) for name, text in SUITE_COLUMNS.items()],
        "shown_cols": filters.cols.split(","),
        "more_open": any(
            getattr(filters, name)
            for name in ("family", "params", "harness", "profile", "comparable")
            + ("location", "days", "verified", "bv", "method", "imported")
        ),
    }
    # Folded on a phone unless the visitor has chosen something inside the fold.
    context["fold_open"] = context["more_open"] or any(
        getattr(filters, name) for name in ("q", "engine", "quant")
    )
    return _compact(render_to_string("leaderboard/_board_form.html", context, request=request))


def _results_html(request: HttpRequest, filters: BoardFilters, path: str) -> str:
    result = queries.board(filters)
    _link_matrices(result.rows)
    context = {
        "filters": filters,
        "board": result,
        "rank_offset": result.page.start_index() - 1 if result.total else 0,
        "scatter": scatter_for(
            result.points,
            query=f"?hw={result.scope.single.slug}" if result.scope.single else "",
        ),
        "path": path,
        "export_qs": pinned_query(filters, result.scope),
        "compare_query": pinned(filters, result.scope).run_filter_query(),
        "estimates": estimated.board_section(filters, result.scope),
    }
    # The fragment reads nothing of the request but its path (the pager's fallback).
    return _compact(render_to_string("leaderboard/_board_results.html", context, request=request))


def _link_matrices(rows: Sequence[Row]) -> None:
    """Each shown row whose model has harness matrix runs on its class links that matrix."""
    pairs = {
        (row.stack.model_id, row.hardware_class.id)
        for row in rows
        if row.stack is not None and row.hardware_class is not None
    }
    found = matrix.models_with_matrix(pairs)
    for row in rows:
        if row.stack is None or row.hardware_class is None:
            continue
        if (row.stack.model_id, row.hardware_class.id) in found:
            row.matrix_url = reverse(
                "leaderboard:matrix",
                kwargs={"hw": row.hardware_class.slug, "model_id": row.stack.model_id},
            )


def pinned(filters: BoardFilters, scope: scopes.Scope) -> BoardFilters:
    """The filters with the default class written out, so exports, feeds and compare links
    show the hardware the page showed even after another class becomes the most common."""
    if scope.default and scope.single is not None:
        return replace(filters, hw=scope.single.slug)
    return filters


def pinned_query(filters: BoardFilters, scope: scopes.Scope) -> str:
    query = pinned(filters, scope).to_query(page=1)
    return f"?{query.urlencode()}" if query else ""


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
    filters = queries.settle(BoardFilters.from_query(request.GET))
    rows, scope, version = queries.board_export_rows(filters)
    view = exports.view_meta(filters, scope, version)
    records = exports.records(rows, base_url=_base_url(request), view=view)
    query = filters.to_query().urlencode()
    where = "all-hardware" if scope.pooled else (scope.single.slug if scope.single else "")
    stem = "-".join(p for p in ("benchloop-leaderboard", where, f"{timezone.now():%Y-%m-%d}") if p)
    if fmt == "csv":
        response = HttpResponse(exports.to_csv(records), content_type="text/csv; charset=utf-8")
    elif fmt == "json":
        body = exports.to_json(records, query=query, view=view)
        response = HttpResponse(body, content_type="application/json")
    else:
        title = f"BenchLoop leaderboard: {view['hardware']}" + (f" ({query})" if query else "")
        response = HttpResponse(
            exports.to_markdown(records, title=title, view=view),
            content_type="text/markdown; charset=utf-8",
        )
    response["Content-Disposition"] = f'attachment; filename="{stem}.{fmt}"'
    return response


@require_safe
@revalidated(board_validators)
def feed(request: HttpRequest) -> HttpResponse:
    """Atom feed of newly approved runs for any filter ("new results on RTX 4090").

    Each entry is one run on its own hardware class; on the all-hardware view entries carry
    quality alone, like the view."""
    filters = BoardFilters.from_query(request.GET)
    scope = scopes.hardware_scope(filters, pick_default=False)
    base = _base_url(request)
    labels = [label for name, label in filters.active() if name not in scopes.CLASS_LABELLED]
    if scope.class_ids is not None or scope.pooled:
        labels.insert(0, scope.label)
    title = "BenchLoop: new results" + (f" ({', '.join(labels)})" if labels else "")
    query = filters.to_query()
    board_link = (
        base + reverse("leaderboard:leaderboard") + (f"?{query.urlencode()}" if query else "")
    )
    atom = XmlSafeAtomFeed(
        title=title,
        link=board_link,
        description="Newly approved BenchLoop results matching a leaderboard view.",
        feed_url=request.build_absolute_uri(),
        language="en",
    )
    for run in queries.newest_approved(filters):
        stack = run.stack
        atom.add_item(
            title=f"{stack.label} on {exports.run_hardware(run)}",
            link=base + reverse("leaderboard:run", args=[run.id]),
            # Atom's summary is type="html": a reader renders it, so the names in it are escaped.
            description=escape(exports.feed_summary(run, pooled=scope.pooled)),
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
    # The engine's own limits, so the page never states others.
    limits = {"thinking_budget": DEFAULT_THINKING_BUDGET, "ceiling": MAX_TOKENS_CEILING}
    return render(request, "leaderboard/methodology.html", {"limits": limits})


@require_safe
def data(request: HttpRequest) -> HttpResponse:
    """The exports, the feeds and the API in one place, with examples for a real hardware
    class (the one with the most published runs)."""
    example = (
        HardwareClass.objects.annotate(n=Count("runs", filter=Q(runs__published=True)))
        .filter(n__gt=0)
        .order_by("-n", "slug")
        .only("slug", "label")
        .first()
    )
    return render(
        request, "leaderboard/data.html", {"example": example, "base": _base_url(request)}
    )


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
