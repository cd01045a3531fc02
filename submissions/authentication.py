"""DRF authentication: `Authorization: Bearer bl_…`."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from submissions import keys
from submissions.models import ApiKey

# Writing last_used_at on every request would turn each read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, key = header.partition(" ")
        if scheme != self.keyword:
            return None
        key = key.strip()
        prefix = keys.split_key(key)
        # The profile comes along for the upload's trust check (one query instead of two).
        found = ApiKey.objects.select_related("user", "user__submitter_profile")
        api_key = found.filter(prefix=prefix).first() if prefix else None
        # Hash even when nothing matched, so timing does not tell a bad prefix from a bad key.
        if api_key is None or not keys.matches(key, api_key.hashed_key):
            keys.matches(key, "0" * 64)
            raise exceptions.AuthenticationFailed("Invalid API key.")
        if not api_key.is_active:
            raise exceptions.AuthenticationFailed("This API key has been revoked.")
        if not api_key.user.is_active:
            raise exceptions.AuthenticationFailed("This account is disabled.")
        now = timezone.now()
        if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_RESOLUTION:
            ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        return api_key.user, api_key

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    """Documents the Bearer key in the OpenAPI schema."""

    target_class = "submissions.authentication.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "bl_…",
            "description": "An API key from your account page or `benchloop login`.",
        }
