"""Sign-up and account activation: nothing tells a visitor whether an email is registered.

A sign-up always ends on the same "check your email" page. A new address gets an account that
stays inactive until its owner opens the link mailed to it; an address that already has an
account is not touched, and its owner is told by mail that someone tried to sign up with it.
Both paths hash the password and send one mail, so they also take about the same time.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import User
from django.contrib.auth.tokens import default_token_generator
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes, force_str
from django.utils.http import urlsafe_base64_decode, urlsafe_base64_encode

from core.links import absolute_url
from submissions.models import SubmitterProfile


def _pending() -> QuerySet[User]:
    """Accounts created by a sign-up whose link was never opened (never signed in, nothing
    uploaded: a deactivated account that once was used is not one of them)."""
    return User.objects.filter(
        is_active=False, last_login__isnull=True, submissions__isnull=True, api_keys__isnull=True
    )


def forget_stale_signups() -> int:
    """Delete sign-ups whose activation link has expired, so they hold no username."""
    cutoff = timezone.now() - timedelta(seconds=settings.PASSWORD_RESET_TIMEOUT)
    deleted, _ = _pending().filter(date_joined__lt=cutoff).delete()
    return deleted


def request_signup(*, username: str, email: str, password: str) -> User | None:
    """Start a sign-up; the caller shows the same answer whatever happened here. Returns the
    new inactive account, or None where the address already had one (its owner is mailed)."""
    hashed = make_password(password)  # on both paths: the time taken tells nothing either
    with transaction.atomic():
        known = User.objects.filter(email__iexact=email)
        owner = known.exclude(pk__in=_pending()).order_by("pk").first()
        if owner is not None:
            transaction.on_commit(lambda: _mail_existing_owner(owner))
            return None
        # An earlier sign-up with this address that was never confirmed gives way to this one.
        known.delete()
        user = User.objects.create(username=username, email=email, password=hashed, is_active=False)
        SubmitterProfile.objects.create(user=user)
        transaction.on_commit(lambda: _mail_activation(user))
    return user


CONSOLE_MAIL = "django.core.mail.backends.console.EmailBackend"


def mail_goes_to_console() -> bool:
    """Whether mail is written to the server's terminal instead of sent (the embedded
    default, scripts/serve.sh): nobody receives it, so pages show what it would have said."""
    return settings.EMAIL_BACKEND == CONSOLE_MAIL


def activation_path(user: User) -> str:
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    return reverse("accounts:activate", args=[uid, token])


def pending_user(uidb64: str, token: str) -> User | None:
    """The inactive account an activation link names, if the link is valid and unexpired."""
    try:
        pk = int(force_str(urlsafe_base64_decode(uidb64)))
    except (TypeError, ValueError, OverflowError):
        return None
    user = _pending().filter(pk=pk).first()
    if user is None or not default_token_generator.check_token(user, token):
        return None
    return user


def activate(*, user: User) -> User:
    user.is_active = True
    user.save(update_fields=["is_active"])
    return user


def _mail_activation(user: User) -> None:
    send_mail(
        subject="BenchLoop: confirm your email address",
        message=(
            f"Someone (we hope you) signed up for BenchLoop as {user.username} with this "
            f"address. Open this link to activate the account:\n\n"
            f"{absolute_url(activation_path(user))}\n\n"
            "The link works once and expires in "
            f"{settings.PASSWORD_RESET_TIMEOUT // 86400} days. If it was not you, ignore "
            "this email: the account is never activated and is deleted."
        ),
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=[user.email],
        fail_silently=True,
    )


def _mail_existing_owner(owner: User) -> None:
    send_mail(
        subject="BenchLoop: someone tried to sign up with your email address",
        message=(
            "Someone (maybe you) tried to create a new BenchLoop account with this address. "
            f"You already have one, {owner.username}; nothing was changed.\n\n"
            f"Sign in: {absolute_url(reverse('accounts:login'))}\n"
            f"Forgot your password? {absolute_url(reverse('accounts:password_reset'))}\n\n"
            "If it was not you, you can ignore this email."
        ),
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=[owner.email],
        fail_silently=True,
    )
