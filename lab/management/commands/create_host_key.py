"""`manage.py create_host_key NAME`: a host key for lab host NAME, printed once."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from lab import agents
from lab.models import HostKey


class Command(BaseCommand):
    help = "Create a host key for a lab host's agent; the key is shown once and never stored."

    def add_arguments(self, parser) -> None:
        parser.add_argument("host_name", help="the host's BENCHLOOP_LAB_HOST")
        parser.add_argument(
            "--scope",
            action="append",
            choices=HostKey.SCOPES,
            help="repeat for several (default: all of them)",
        )

    def handle(self, *args, host_name: str, scope: list[str] | None, **options) -> None:
        try:
            key, plaintext = agents.create_host_key(host_name=host_name, user=None, scopes=scope)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(f"host key for {key.host_name} ({', '.join(key.scopes)}); shown once:")
        self.stdout.write(plaintext)
