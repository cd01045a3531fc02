from __future__ import annotations

from rest_framework.permissions import BasePermission

from core.http import SignedInApiRequest
from submissions.models import ApiKey


class KeyRequest(SignedInApiRequest):
    """A request past scope_required: made with an API key, for the key's account."""

    auth: ApiKey


def scope_required(scope: str) -> type[BasePermission]:
    """Permission class: an API key that carries `scope` (session users are never enough)."""

    class HasScope(BasePermission):
        message = f"This API key lacks the '{scope}' scope."

        def has_permission(self, request, view) -> bool:
            return isinstance(request.auth, ApiKey) and request.auth.has_scope(scope)

    HasScope.__name__ = f"Has{scope.title()}Scope"
    return HasScope
