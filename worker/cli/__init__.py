"""`benchloop`: benchmark a local or remote LLM server and publish the result.

Exit codes (stable, for scripts):
  0  success
  1  the run failed or is incomplete (interrupted, every task errored)
  2  usage or user error (bad option, unknown model/suite/run)
  3  a server (LLM endpoint or site) is unreachable or timed out
  4  authentication refused or missing (endpoint key, site key, login)
  5  a server answered with an error (5xx, rejected request, unexpected API)
  130 interrupted before a run started
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from worker.cli import compat, matrix, submit_from
from worker.cli.cost import RunDeclined, confirm_cost
from worker.cli.display import RunDisplay
from worker.cli.formatting import print_json, say, versions
from worker.cli.info import cmd_info
from worker.cli.listing import mark_running, next_unsent
from worker.cli.run import print_header, render_run, run_summary
from worker.engine.bundle import export_row, find_run, list_runs, load_bundle, upload_view
from worker.engine.compare import compare_bundles
from worker.engine.detect import COMMON_PORTS, scan_local
from worker.engine.errors import BundleWriteError, EngineError, UsageError
from worker.engine.matrix.programs import PROGRAMS
from worker.engine.orchestrator import RunOutcome, execute, prepare_run
from worker.engine.parallel import DEFAULT_CAP
from worker.engine.paths import benchloop_home
from worker.engine.plan import RunConfig
from worker.engine.suites.sweep import parse_levels
from worker.rules.contract import RunEvent
from worker.rules.harnesses import FORMATS, HARNESSES, canonical
from worker.rules.reasoning import DEFAULT_THINKING_BUDGET, MAX_TOKENS_CEILING

EXIT_OK, EXIT_RUN, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_AUTH, EXIT_SERVER = 0, 1, 2, 3, 4, 5
EXIT_INTERRUPTED = 130
_EXIT_BY_KIND = {
    "unreachable": EXIT_UNREACHABLE,
    "timeout": EXIT_UNREACHABLE,
    "auth": EXIT_AUTH,
    "unknown_model": EXIT_USAGE,
    "usage": EXIT_USAGE,
    "suite_data": EXIT_USAGE,
    "context_overflow": EXIT_USAGE,
}

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


def _csv_list(value: str | None) -> list[str] | None:
    items = [v.strip() for v in (value or "").split(",") if v.strip()]
    return items or None


def _levels(value: str | None, flag: str, *, minimum: int) -> list[int] | None:
    """A sweep's comma-separated levels, or None when the flag was not given."""
    if value is None:
        return None
    try:
        return parse_levels(value, minimum=minimum)
    except ValueError as exc:
        raise UsageError(f"{flag} {value!r}: {exc}") from exc


# ---------------------------------------------------------------------------------------- run


def _auto_url() -> str:
    found = scan_local()
    if len(found) == 1:
        return found[0].base_url
    if not found:
        raise UsageError(
            "no --url given and no LLM server answers on the usual local ports",
            hint=f"Start one or pass --url (ports tried: {', '.join(map(str, COMMON_PORTS))}).",
        )
    urls = ", ".join(f.base_url for f in found)
    raise UsageError(f"several local servers answer ({urls})", hint="Pick one with --url.")


def cmd_run(args: argparse.Namespace) -> int:
    return run_and_show(args)[0]


def run_and_show(args: argparse.Namespace) -> tuple[int, RunOutcome]:
    """Run what ``args`` ask for, with the live display (or JSON); the exit code and outcome."""
    url = args.url or os.environ.get("BENCHLOOP_URL") or _auto_url()
    config = RunConfig(
        url=url,
        model=args.model,
        provider=args.provider,
        suites=_csv_list(args.suites),
        profile=args.profile,
        tasks=_csv_list(args.tasks),
        trials=args.trials,
        harness=args.harness,
        harness_variant=args.harness_variant or "",
        scoring="local" if args.local else "remote" if args.remote else None,
        hardware_label=args.hardware,
        gpu=args.gpu,
        gpu_memory_gb=args.gpu_memory_gb,
        api_key=args.api_key or os.environ.get("BENCHLOOP_ENDPOINT_API_KEY") or None,
        timeout=args.timeout,
        max_tokens=args.max_tokens,
        thinking_budget=args.thinking_budget,
        model_file=args.model_file,
        launch_command=args.launch_command,
        hash_weights=not args.no_model_hash,
        sweep_depths=_levels(args.depths, "--depths", minimum=0),
        sweep_concurrency=_levels(args.concurrency, "--concurrency", minimum=1),
        sweep_prompt_tokens=args.sweep_prompt_tokens,
        sweep_output_tokens=args.sweep_output_tokens,
        parallel=args.parallel,
    )

    def preflight(event: RunEvent) -> None:
        if event["type"] == "hashing_weights" and not args.json:
            size = event["size_bytes"] / 1024**3
            err.print(f"hashing {escape(event['file'])} ({size:.1f} GB), once per file…")

    prep = prepare_run(config, on_event=preflight)
    markers: list[Path] = []

    def started(event: RunEvent) -> None:
        # `benchloop list` reads this marker to say "running" while this process lives.
        if event["type"] == "run_started":
            home = prep.config.home or benchloop_home()
            marker = mark_running(home / "runs" / event["run_id"])
            if marker is not None:
                markers.append(marker)

    try:
        if not confirm_cost(prep, yes=args.yes, err=err):
            raise RunDeclined()
        if args.json:
            outcome = execute(prep, started)
        else:
            print_header(out, prep)
            with RunDisplay(out, prep.tasks) as display:

                def both(event: RunEvent) -> None:
                    started(event)
                    display.on_event(event)

                outcome = execute(prep, both)
            # The bundle is already on disk; a display crash here loses nothing.
            render_run(out, outcome.bundle, str(outcome.path))
    finally:
        for marker in markers:
            marker.unlink(missing_ok=True)
        prep.provider.close()
    if args.json:
        print_json(run_summary(outcome))
    return (EXIT_OK if outcome.status == "complete" else EXIT_RUN), outcome


# --------------------------------------------------------------------------------------- info


def cmd_list(args: argparse.Namespace) -> int:
    from worker.cli.listing import ask_site, list_rows, render_list
    from worker.engine.paths import runs_dir

    rows = list_rows()
    ask_site(rows)
    if args.json:
        print_json({"runs_dir": str(runs_dir()), "count": len(rows), "runs": rows})
    else:
        render_list(out, rows)
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    from worker.cli.compare import render_compare

    if args.run_b is None:
        from worker.cli.standing import cmd_standing, is_run_address

        if not args.site and not is_run_address(args.run_a):
            raise UsageError(
                "compare needs two runs, or one run and --site",
                hint="`benchloop compare A B` compares two runs here; `benchloop compare RUN "
                "--site URL` says where RUN stands among its class on the site.",
            )
        return cmd_standing(args, out)
    if args.site:
        raise UsageError(
            "--site takes one run", hint="`benchloop compare RUN --site URL`, or two runs alone."
        )
    a = load_bundle(find_run(args.run_a))
    b = load_bundle(find_run(args.run_b))
    result = compare_bundles(a, b)
    if not result["shared_tasks"]:
        raise UsageError(
            f"{a['run_id']} and {b['run_id']} have no speed task in common: nothing to compare",
            hint="Compare two runs that ran the same speed tasks (e.g. both `--suites speed`).",
        )
    if args.json:
        print_json(result)
    else:
        render_compare(out, result)
    return EXIT_OK


# ------------------------------------------------------------------------- submit, login, export


def _review_state(answer: dict) -> str:
    """What the site did with an upload, in words: published, or waiting for a moderator."""
    status, published = answer.get("status"), answer.get("published")
    if status in ("pending", "flagged"):
        return "pending review: it appears on the leaderboard once a moderator approves it"
    if published:
        return "published on the leaderboard"
    if status == "approved":
        return "approved, not on the leaderboard (unlisted, private or incomplete)"
    return f"{status}: not on the leaderboard" if isinstance(status, str) else ""


def cmd_submit(args: argparse.Namespace) -> int:
    from urllib.parse import urljoin

    from worker.engine.site import api_key_for, site_url, submit

    if args.from_file or args.hardware:
        return submit_from.submit_from(args, out, err)
    if args.run:
        path = find_run(args.run)
    else:
        # Not the run that started last: the newest one that finished and was never sent.
        unsent = next_unsent(allow_incomplete=args.allow_incomplete)
        if unsent is None:
            if args.json:
                print_json({"ok": True, "nothing_to_send": True, "run_id": None})
            else:
                say(out, "Nothing left to send: every finished run here is already on a site.")
                say(out, "`benchloop list` shows them; `benchloop submit ID` sends one again.")
            return EXIT_OK
        path = unsent
    bundle = load_bundle(path)
    if not args.run and not args.json:
        # On stderr, like login's prompt: stdout says only what the site answered.
        say(err, f"Sending {bundle['run_id']}, the newest finished run not yet on the site.")
    if bundle["status"] != "complete" and not args.allow_incomplete:
        raise UsageError(
            f"run {bundle['run_id']} is {bundle['status']}",
            hint="Only complete runs are submitted; pass --allow-incomplete to send it anyway.",
        )
    site = site_url(args.site)
    key = api_key_for(site)
    secrets = [key, os.environ.get("BENCHLOOP_ENDPOINT_API_KEY", "")]
    payload = upload_view(bundle, secrets=secrets)
    result = submit(site, key, payload)
    url = result.body.get("url")
    record = {
        "ok": True,
        "site": site,
        "run_id": bundle["run_id"],
        "client_run_id": bundle["client_run_id"],
        "status_code": result.status_code,
        "created": result.created,
        # Absolute, so it can be opened from here; a site before 0.4 answers a relative link.
        "url": urljoin(site + "/", url) if isinstance(url, str) and url else None,
        "review": result.body.get("status"),
        "published": result.body.get("published"),
        "submitted_at": datetime.now(UTC).isoformat(),
    }
    # Kept beside run.json (which stays exactly as measured) so users can see what was sent.
    (path.parent / "submission.json").write_text(json.dumps(record, indent=1) + "\n")
    if args.json:
        from worker.cli.standing import ask_quietly

        print_json({**record, "standing": ask_quietly(site, key, result.body.get("id"))[0]})
    else:
        verb = "uploaded" if result.created else "already on the site (same client_run_id)"
        state = _review_state(result.body)
        say(out, f"{bundle['run_id']}: {verb}" + (f"; {state}" if state else ""))
        if record["url"]:
            # On a line of its own and never wrapped, so it can be clicked or copied whole.
            out.print(Text(record["url"]), soft_wrap=True)
        from worker.cli.standing import after_submit

        after_submit(out, err, site, key, result.body.get("id"))
    return EXIT_OK


def cmd_login(args: argparse.Namespace) -> int:
    from worker.engine.site import device_poll, device_start, save_credentials, site_url

    site = site_url(args.site)
    grant = device_start(site)
    target = grant.verification_uri_complete or grant.verification_uri
    line = f"Open {target} and enter the code {grant.user_code}"
    if len(line) > err.width:
        # The link on a line of its own, whole, so it can be clicked or copied.
        line = f"Open this address and enter the code {grant.user_code}\n{target}"
    err.print(Text(line), soft_wrap=True)
    err.print("[dim]Waiting for approval… (Ctrl-C to cancel)[/]")
    key = device_poll(site, grant)
    path = save_credentials(site, key)
    if args.json:
        print_json({"ok": True, "site": site, "credentials": str(path)})
    else:
        say(out, f"Logged in to {site}; the key is saved, readable by you only (mode 0600), in:")
        out.print(Text(str(path)), soft_wrap=True)
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    paths = (
        [find_run(ref) for ref in args.runs] if args.runs else [p / "run.json" for p in list_runs()]
    )
    rows = [export_row(load_bundle(p)) for p in paths]
    fmt = "json" if args.json else args.format
    if fmt == "json":
        text = (
            json.dumps(
                {
                    "generated_at": datetime.now(UTC).isoformat(),
                    "count": len(rows),
                    "source": "benchloop export",
                    "runs": rows,
                },
                indent=2,
            )
            + "\n"
        )
    else:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(export_row({}).keys()))
        writer.writeheader()
        writer.writerows(rows)
        text = buffer.getvalue()
    if args.output and args.output != "-":
        with open(args.output, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        if not args.json:
            err.print(f"{len(rows)} run(s) written to {args.output}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


# ------------------------------------------------------------------------------------- parser


def _add_run_options(run: argparse.ArgumentParser) -> None:
    """`run`'s flags: the endpoint, what to run, how to score, and what to record."""
    run.add_argument(
        "--url", help="endpoint root (default: $BENCHLOOP_URL, else the one local server found)"
    )
    run.add_argument("--model", help="model id (default: the only model the server lists)")
    compat.add_run_options(run)
    run.add_argument("--suites", help="comma-separated suites (overrides the profile's list)")
    run.add_argument("--profile", help="profile name (see `benchloop info`)")
    run.add_argument("--tasks", help="comma-separated task ids or globs, e.g. 'speed-p128-*'")
    run.add_argument(
        "--trials",
        type=int,
        help="measured repeats per speed task (default: the profile's; 5, smoke 3)",
    )
    run.add_argument(
        "--harness",
        choices=HARNESSES,
        type=canonical,
        default="raw",
        metavar="NAME",
        help="a prompt format (raw = native tool calls, "
        f"{', '.join(FORMATS[1:])}) or a harness program ({', '.join(PROGRAMS)}), which "
        "runs the matrix suites; the old names hermes, qwen and pi still work",
    )
    run.add_argument(
        "--harness-variant",
        help="a harness program's variant, e.g. Aider's edit format (see `benchloop harness list`)",
    )
    mode = run.add_mutually_exclusive_group()
    mode.add_argument("--local", action="store_true", help="force the local scoring curve")
    mode.add_argument("--remote", action="store_true", help="force the remote (cloud) curve")
    run.add_argument("--hardware", help="hardware label override")
    run.add_argument("--gpu", help="GPU name override")
    run.add_argument("--gpu-memory-gb", type=float, help="GPU memory override (GB)")
    run.add_argument("--api-key", help="endpoint key (default $BENCHLOOP_ENDPOINT_API_KEY)")
    run.add_argument("--timeout", type=float, default=300.0, help="seconds without data (300)")
    run.add_argument(
        "--max-tokens",
        type=int,
        help="set every quality task's answer limit, up or down (speed: only lower); "
        f"at most {MAX_TOKENS_CEILING} (not comparable)",
    )
    run.add_argument(
        "--thinking-budget",
        type=int,
        metavar="N",
        help="tokens added to each quality task's limit for thinking (default: "
        f"{DEFAULT_THINKING_BUDGET} when the warm-up answer reasons, else 0)",
    )
    run.add_argument(
        "--parallel",
        type=int,
        metavar="N",
        help="quality tasks run N at a time (default: the server's reported slots, at most "
        f"{DEFAULT_CAP}, else 1); speed and the sweeps always run alone",
    )
    run.add_argument(
        "--model-file", help="the GGUF the server loaded, to record its sha256 (name only kept)"
    )
    run.add_argument(
        "--launch-command",
        help="how the server was started, when it is not visible here (stored redacted)",
    )
    run.add_argument("--no-model-hash", action="store_true", help="do not hash the weights file")
    run.add_argument(
        "--yes",
        action="store_true",
        help="start without asking, however long the run (no estimate probe)",
    )
    sweep = run.add_argument_group("depth and concurrency sweeps (suite speed_sweep)")
    sweep.add_argument("--depths", help="context depths in tokens, e.g. 0,4096 (not comparable)")
    sweep.add_argument("--concurrency", help="concurrent streams, e.g. 1,2,4 (not comparable)")
    sweep.add_argument("--sweep-prompt-tokens", type=int, help="new prompt tokens per request")
    sweep.add_argument("--sweep-output-tokens", type=int, help="decoded tokens per request")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="benchloop",
        # Raw text is not wrapped by argparse: broken here to fit 80 columns.
        description="Benchmark an LLM server (llama.cpp, Ollama, vLLM, LM Studio, any\n"
        "OpenAI-compatible API) and publish the result to a BenchLoop site.",
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"benchloop {versions()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--json", action="store_true", help="print machine-readable JSON")
        return p

    run = command("run", "run suites against an endpoint and write a run bundle")
    _add_run_options(run)
    run.set_defaults(handler=cmd_run)

    info = command("info", "show hardware, local LLM servers, suites and profiles")
    info.add_argument(
        "--all", action="store_true", help="also each suite, profile, harness and sweep figure"
    )
    info.set_defaults(handler=cmd_info)
    compat.add_suites_command(sub, cmd_info)

    runs = command("list", "this machine's run bundles, newest first, with their ids")
    runs.set_defaults(handler=cmd_list)

    compare = command(
        "compare",
        "compare two runs on their shared speed tasks (ratio, interval, significance), or say "
        "where one run stands among its class on a site (--site)",
    )
    compare.add_argument("run_a", metavar="RUN_A", help="run id, prefix, folder or run.json")
    compare.add_argument(
        "run_b", metavar="RUN_B", nargs="?", help="the second run (not with --site)"
    )
    compare.add_argument(
        "--site",
        help="where RUN_A stands on this site; RUN_A may also be a site run id or its page's "
        "address (a local run's site is the one it was sent to)",
    )
    compare.set_defaults(handler=cmd_compare)

    submit = command("submit", "upload a run (default: the latest) to a BenchLoop site")
    submit.add_argument("run", nargs="?", metavar="RUN")
    submit.add_argument("--site", help="site URL (default $BENCHLOOP_SITE or the saved login)")
    submit.add_argument("--allow-incomplete", action="store_true")
    submit_from.add_options(submit)
    submit.set_defaults(handler=cmd_submit)

    login = command("login", "log in to a BenchLoop site (device code) and save an API key")
    login.add_argument("--site", help="site URL (default $BENCHLOOP_SITE)")
    login.set_defaults(handler=cmd_login)

    export = command("export", "export runs as JSON or CSV")
    export.add_argument("runs", nargs="*", metavar="RUN", help="runs to export (default: all)")
    export.add_argument("--format", choices=("json", "csv"), default="json")
    export.add_argument("-o", "--output", help="file to write (default: stdout)")
    export.set_defaults(handler=cmd_export)

    matrix.add_commands(command, _add_run_options, run_and_show)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    compat.read_environment(args)
    compat.print_notes(err, args)
    try:
        return args.handler(args)
    except EngineError as exc:
        code = _EXIT_BY_KIND.get(exc.kind, EXIT_SERVER)
        if getattr(args, "json", False):
            print_json({"ok": False, "error": exc.to_dict(), "exit_code": code})
        err.print(f"[red]error:[/] {escape(exc.message)}")
        if exc.hint:
            err.print(f"[dim]hint:[/] {escape(exc.hint)}")
        return code
    except BundleWriteError as exc:
        err.print(f"[red]error:[/] {escape(exc.message)}")
        err.print(f"[dim]hint:[/] {escape(exc.hint)}")
        return EXIT_RUN
    except OSError as exc:
        # Disk full, permission denied, unreadable file: say so plainly, without a traceback.
        err.print(f"[red]error:[/] {escape(str(exc))}")
        return EXIT_RUN
    except RunDeclined:
        return EXIT_INTERRUPTED  # the user said no before anything ran
    except KeyboardInterrupt:
        err.print("interrupted")
        return EXIT_INTERRUPTED
