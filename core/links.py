"""Links that leave the site: emails, webhooks and the API answers the CLI prints."""

from __future__ import annotations

from django.conf import settings


def absolute_url(path: str) -> str:
    """`path` (from reverse(), starting with /) on the site's public address, SITE_URL."""
    return settings.SITE_URL + path
