"""Request types for the views only a signed-in account reaches, so their code can use
`request.user` as the account it is (the stubs type it "account or anonymous").

Annotations only: a view behind @login_required (or an API view whose permission classes
refuse anonymous requests) declares its request as one of these; nothing is checked here.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails
from rest_framework.request import Request


class HtmxRequest(HttpRequest):
    """A page request as django_htmx's middleware leaves it (with `htmx`)."""

    htmx: HtmxDetails


class SignedInRequest(HttpRequest):
    """A page request behind @login_required."""

    user: User


class SignedInHtmxRequest(SignedInRequest, HtmxRequest):
    """Both: a signed-in page request with `htmx`."""


class SignedInApiRequest(Request):
    """An API request whose permission classes admit accounts only (IsAuthenticated, a key)."""

    user: User
