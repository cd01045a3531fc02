"""GET /api/v1/estimates?hw=SLUG: the board's "Estimated, not measured" section as JSON."""

from __future__ import annotations

import math
from typing import Any

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ApiError
from leaderboard import cache as board_cache
from leaderboard import estimated
from leaderboard.api import READ_THROTTLES
from runs import estimates
from runs.models import HardwareClass, HardwareKind


def _figure(found: estimates.Estimate | None) -> dict[str, Any] | None:
    """tok/s with the 80% interval's ends (null where too few lanes bound one)."""
    if found is None:
        return None
    bounded = found.low > 0 and math.isfinite(found.high)
    return {
        "value": round(found.value, 2),
        "low": round(found.low, 2) if bounded else None,
        "high": round(found.high, 2) if bounded else None,
    }


def as_dict(hw_class: HardwareClass, rows: list[estimated.Estimated]) -> dict[str, Any]:
    accuracy = {
        metric: {"lanes": lanes, "median_abs_error": error, "interval_held": held}
        for metric, (lanes, error, held) in estimated.ACCURACY.items()
    }
    return {
        "hardware_class": hw_class.slug,
        "hardware": hw_class.label,
        "measured": False,
        "note": "estimated, not measured: never ranked with measured rows",
        "interval": 0.8,
        "held_out_accuracy": accuracy,
        "estimates": [
            {
                "stack_id": row.stack.pk,
                "model_id": row.stack.model_id,
                "quantization": row.stack.quantization,
                "engine": row.stack.engine,
                "decode_tps": _figure(row.decode),
                "prefill_tps": _figure(row.prefill),
                "decode_ceiling_tps": round(row.lane.decode_ceiling or 0, 2),
                "measured_on_classes": row.measured_on,
                "arithmetic": reverse("leaderboard:estimate", args=[row.stack.pk, hw_class.slug]),
                "measure_command": row.cli,
            }
            for row in rows
        ],
    }


class EstimatesView(APIView):
    """Stacks measured on other hardware but not on this class, whose weights fit it: their
    expected decode and prefill speeds with 80% intervals, estimated, not measured."""

    permission_classes = [AllowAny]
    throttle_classes = READ_THROTTLES

    @extend_schema(
        parameters=[
            OpenApiParameter("hw", str, required=True, description="a hardware class slug"),
            OpenApiParameter("engine", str, description="only stacks of this engine"),
            OpenApiParameter("quant", str, description="only stacks of this quantization"),
        ],
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="the estimates"),
            404: OpenApiResponse(description="no such class, or a remote endpoint"),
            503: OpenApiResponse(
                description="not_ready: the estimates' calibration is being worked out again "
                "(a new site, or one whose cache lost it); Retry-After says when to ask again"
            ),
        },
    )
    def get(self, request: Request) -> Response:
        slug = request.query_params.get("hw", "")[:120]
        hw_class = HardwareClass.objects.filter(slug=slug).first()
        if hw_class is None or hw_class.kind in (HardwareKind.REMOTE, HardwareKind.UNKNOWN):
            raise ApiError(404, "not_found", "Name a local hardware class (?hw=).")
        engine = request.query_params.get("engine", "")[:60]
        quant = request.query_params.get("quant", "")[:40]

        def compute() -> dict[str, Any]:
            return as_dict(hw_class, estimated.for_class(hw_class, engine=engine, quant=quant))

        return Response(board_cache.cached("estimates-api", f"{slug}|{engine}|{quant}", compute))
