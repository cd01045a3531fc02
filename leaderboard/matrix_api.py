"""GET /api/v1/matrix: the harness matrix of a model on a hardware class (published runs)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ApiError
from leaderboard import matrix
from leaderboard.api import READ_THROTTLES
from leaderboard.matrix_export import as_dict
from runs.models import HardwareClass


class MatrixView(APIView):
    """The matrix page as JSON: rows = harnesses (raw first), a cell per matrix suite with its
    pass rate and 95% interval (Wilson, over task attempts) and the harness's overhead per task
    (ratios to raw on the tasks both ran). One hardware class and one setup (quantization and
    engine) at a time; wall times are never pooled across classes."""

    permission_classes = [AllowAny]
    throttle_classes = READ_THROTTLES

    @extend_schema(
        parameters=[
            OpenApiParameter("model", str, required=True, description="the model id"),
            OpenApiParameter("hw", str, required=True, description="a hardware class slug"),
            OpenApiParameter("quant", str, description="a quantization (default: most runs)"),
            OpenApiParameter("engine", str, description="an engine (default: most runs)"),
        ],
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="the matrix"),
            404: OpenApiResponse(description="no such class, or no published matrix runs"),
        },
    )
    def get(self, request: Request) -> Response:
        model_id = request.query_params.get("model", "")[:300]
        slug = request.query_params.get("hw", "")[:120]
        hardware_class = HardwareClass.objects.filter(slug=slug).first()
        if not model_id or hardware_class is None:
            raise ApiError(404, "not_found", "Name a model (?model=) and a hardware class (?hw=).")
        # An empty value filters nothing, as an absent one (what the form of a client sends).
        quant = request.query_params.get("quant") or None
        engine = request.query_params.get("engine") or None
        found = matrix.build(
            model_id,
            hardware_class,
            quantization=quant[:100] if quant is not None else None,
            engine=engine[:100] if engine is not None else None,
        )
        if found is None:
            raise ApiError(404, "not_found", "No published matrix runs of this model here.")
        return Response(as_dict(found))
