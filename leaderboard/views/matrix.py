"""The harness matrix page of a model on a hardware class, and its CSV."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_safe

from leaderboard import cache as board_cache
from leaderboard import matrix
from leaderboard.matrix_export import csv_text
from runs.matrix import MATRIX_SUITES, SUITE_LABELS
from runs.models import HardwareClass

MAX_PARAM = 100


def _setup_query(request: HttpRequest) -> tuple[str | None, str | None]:
    quant, engine = request.GET.get("quant"), request.GET.get("engine")
    return (
        quant[:MAX_PARAM] if quant is not None else None,
        engine[:MAX_PARAM] if engine is not None else None,
    )


def matrix_url(model_id: str, hw: str, **query: str) -> str:
    path = reverse("leaderboard:matrix", kwargs={"hw": hw, "model_id": model_id})
    return path + (f"?{urlencode(query)}" if query else "")


def _context(request: HttpRequest, hw: str, model_id: str) -> dict[str, Any]:
    hardware_class = get_object_or_404(HardwareClass, slug=hw)
    quant, engine = _setup_query(request)
    found = matrix.build(model_id, hardware_class, quantization=quant, engine=engine)
    classes = matrix.classes_for(model_id)
    if found is None and not classes:
        raise Http404("no published matrix runs of this model")
    setup_query: dict[str, str] = {}
    if found is not None:
        setup_query = {"quant": found.setup.quantization, "engine": found.setup.engine}
    return {
        "model_id": model_id,
        "hardware_class": hardware_class,
        "matrix": found,
        "classes": classes,
        "suite_labels": [SUITE_LABELS[s] for s in MATRIX_SUITES],
        "csv_url": reverse("leaderboard:matrix_csv")
        + "?"
        + urlencode({"model": model_id, "hw": hw, **setup_query}),
        "api_url": reverse("api-matrix")
        + "?"
        + urlencode({"model": model_id, "hw": hw, **setup_query}),
        "setup_links": [
            (s, matrix_url(model_id, hw, quant=s.quantization, engine=s.engine))
            for s in (found.setups if found else [])
        ],
    }


@require_safe
def matrix_page(request: HttpRequest, hw: str, model_id: str) -> HttpResponse:
    """Rows = harnesses (raw first), columns = the matrix suites; one class, one setup."""
    quant, engine = _setup_query(request)
    parts = "|".join(["matrix", hw, model_id, repr(quant), repr(engine)])
    return board_cache.render_page(
        request, "leaderboard/matrix.html", parts, lambda: _context(request, hw, model_id)
    )


@require_safe
def matrix_csv(request: HttpRequest) -> HttpResponse:
    """GET /matrix/export.csv?model=…&hw=…[&quant=…&engine=…]: one line per harness and suite."""
    model_id = request.GET.get("model", "")[:300]
    hardware_class = get_object_or_404(HardwareClass, slug=request.GET.get("hw", "")[:120])
    quant, engine = _setup_query(request)
    found = matrix.build(model_id, hardware_class, quantization=quant, engine=engine)
    if found is None:
        raise Http404("no published matrix runs of this model on this class")
    response = HttpResponse(csv_text(found), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="harness-matrix.csv"'
    return response
