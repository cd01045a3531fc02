"""Spellings of the earlier CLI (benchloop-cli 0.2.3 and 0.3.0) that still work.

Each is an alias: the command runs as its new spelling would, after a one-line note on stderr
that names the new spelling (stderr, so `--json` output stays one JSON document).
"""

from __future__ import annotations

import argparse
import os

from rich.console import Console
from rich.text import Text

# The earlier CLI's OpenAI-compatible provider names; vmlx is an OpenAI-compatible MLX server.
OLD_PROVIDERS = {"openai_compat": "openai", "vmlx": "openai"}
PROVIDERS = ("auto", "openai", "ollama")
COMMAND_USED_ENV = "BENCHLOOP_COMMAND_USED"


def note(namespace: argparse.Namespace, old: str, new: str) -> None:
    """Remember to tell the user that ``old`` is now spelled ``new``."""
    # A new list each time: a list set as a parser default would collect notes across runs.
    notes = [*getattr(namespace, "compat_notes", ()), f"{old} is now spelled {new}"]
    namespace.compat_notes = notes


class _Renamed(argparse.Action):
    """An option the earlier CLI spelled differently: stored under the new option's name."""

    def __init__(self, option_strings, dest, *, new: str, **kwargs):
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        note(namespace, option_string, self.new)


class _Provider(argparse.Action):
    """``--provider``, reading the earlier CLI's OpenAI-compatible names as ``openai``."""

    def __call__(self, parser, namespace, values, option_string=None):
        new = OLD_PROVIDERS.get(values)
        if new:
            note(namespace, f"{option_string} {values}", f"{option_string} {new}")
        setattr(namespace, self.dest, new or values)


def add_run_options(run: argparse.ArgumentParser) -> None:
    """``--provider`` (with the old names) and the earlier CLI's ``--endpoint`` and
    ``--command-used``, hidden from --help."""
    run.add_argument(
        "--provider",
        action=_Provider,
        choices=(*PROVIDERS, *OLD_PROVIDERS),
        metavar="{" + ",".join(PROVIDERS) + "}",
        default="auto",
        help="API to speak (default: detected from the server)",
    )
    run.add_argument("--endpoint", dest="url", action=_Renamed, new="--url", help=argparse.SUPPRESS)
    run.add_argument(
        "--command-used",
        dest="launch_command",
        action=_Renamed,
        new="--launch-command",
        help=argparse.SUPPRESS,
    )


def add_suites_command(sub, info_handler) -> None:
    """``benchloop suites``, now part of ``benchloop info`` (not listed in --help)."""
    suites = sub.add_parser("suites", description="The earlier CLI's name for `benchloop info`.")
    suites.add_argument("--json", action="store_true", help="print machine-readable JSON")
    suites.set_defaults(handler=info_handler)
    suites.set_defaults(compat_notes=("benchloop suites is now spelled benchloop info",))


def read_environment(args: argparse.Namespace) -> None:
    """$BENCHLOOP_COMMAND_USED (the earlier CLI's) fills ``--launch-command`` when not given."""
    if args.command != "run" or args.launch_command:
        return
    value = os.environ.get(COMMAND_USED_ENV, "").strip()
    if value:
        args.launch_command = value
        note(args, f"${COMMAND_USED_ENV}", "--launch-command")


def print_notes(err: Console, args: argparse.Namespace) -> None:
    for text in getattr(args, "compat_notes", ()):
        err.print(Text(f"note: {text}"), soft_wrap=True)
