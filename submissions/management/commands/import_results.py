"""manage.py import_results: load historical BenchLoop files, each one atomically."""

from __future__ import annotations

import multiprocessing
import os
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction

from runs.importers import FormatError, RunRecord, is_results_file, read_file
from runs.importers.hardware_text import parse_hardware_text
from runs.services import refresh_stack_stats, resolve_identities
from submissions.intake import import_batch, records_problem
from submissions.models import Submission
from submissions.seeding import describe

# Files imported between two commits: one commit per file spent most of its time waiting for
# the disk, and refreshing the same stacks after every file repeated the same queries.
FILES_PER_COMMIT = 50
# Below this many files, starting parser processes costs more than it saves.
PARALLEL_FROM = 100
# Batches written at once, each by a thread with its own connection: while one waits for
# Postgres, the other prepares its rows.
WRITERS = 2


class Command(BaseCommand):
    help = "Import run.json, publish envelopes, leaderboard exports and speed-probe JSONL files."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path, help="files, or folders to search")
        parser.add_argument(
            "--model", default="", help="model id for speed-probe JSONL, which does not name one"
        )
        parser.add_argument(
            "--hardware",
            default="",
            help="the machine a file that names none was measured on (e.g. 'RTX 4090 24 GB')",
        )
        parser.add_argument(
            "--jobs",
            type=int,
            default=os.cpu_count() or 1,
            help="processes that parse files while this one writes (1: parse here)",
        )

    def handle(
        self, *args, paths: list[Path], model: str, hardware: str, jobs: int, **options
    ) -> None:
        try:
            self.hardware = parse_hardware_text(hardware) if hardware else None
        except FormatError as exc:
            raise CommandError(f"--hardware: {exc.message}") from None
        files = self._expand(paths)
        parallel = jobs > 1 and len(files) >= PARALLEL_FROM
        self.created = self.skipped = self.rejected = 0
        self.run_ids: list[int] = []
        touched: set[int] = set()
        try:
            with ThreadPoolExecutor(max_workers=WRITERS) as writers:
                pending: deque = deque()
                for batch in self._parsed_batches(files, model, jobs if parallel else 1):
                    good = [(path, records) for path, records, problem in batch if not problem]
                    if not parallel:
                        touched |= self._report(batch, _write(good))
                        continue
                    # Writers in two transactions at once must not both create one stack
                    # (each would wait on the other's row): create new ones first.
                    resolve_identities([r for _path, records in good for r in records])
                    pending.append((batch, writers.submit(_write_in_thread, good)))
                    # One batch is written while the next is prepared; no more are held.
                    while len(pending) > WRITERS:
                        batch, future = pending.popleft()
                        touched |= self._report(batch, future.result())
                while pending:
                    batch, future = pending.popleft()
                    touched |= self._report(batch, future.result())
        finally:
            # Once for the whole import, and also after a failure, for what was committed.
            refresh_stack_stats(stack_ids=touched)
        self.stdout.write(
            f"total: {self.created} created, {self.skipped} skipped, "
            f"{self.rejected} file(s) rejected"
        )
        # What the upload's plausibility checks held back, per source (runs.methods).
        statuses = Submission.objects.filter(run_id__in=self.run_ids)
        for line in describe(Counter(statuses.values_list("run__method", "status"))):
            self.stdout.write(line)
        if self.rejected:
            raise CommandError(f"{self.rejected} file(s) rejected; nothing from them was imported")

    def _report(self, batch, results: list) -> set[int]:
        """One line per file once its batch is written, in file order across both streams:
        rejected files (unreadable or unparsable, so they changed nothing) on stderr."""
        touched: set[int] = set()
        written = iter(results)
        for path, _records, problem in batch:
            if problem:
                self.rejected += 1
                self.stderr.write(f"rejected {path}: {problem}")
                continue
            result = next(written)
            touched |= result.stack_ids
            self.run_ids += [run.id for run in result.created]
            self.created += len(result.created)
            self.skipped += len(result.skipped)
            self.stdout.write(
                f"{path}: created {len(result.created)}, skipped "
                f"{len(result.skipped)} already present"
            )
        return touched

    def _parsed_batches(
        self, files: list[Path], model: str, jobs: int
    ) -> Iterator[list[tuple[Path, list[RunRecord], str]]]:
        """Files in batches of FILES_PER_COMMIT, in order, parsed by `jobs` processes."""
        if jobs <= 1:
            parsed: Iterable[tuple[list[RunRecord], str]] = (
                read_file(path, model, self.hardware) for path in files
            )
            yield from _batches(files, parsed)
            return
        # Spawned, not forked: a forked child would share this process's database socket.
        # read_file's module needs no Django, so the children start in a fraction of a second.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            parsed = pool.map(
                read_file, files, [model] * len(files), [self.hardware] * len(files), chunksize=8
            )
            yield from _batches(files, parsed)

    def _expand(self, paths: list[Path]) -> list[Path]:
        files: list[Path] = []
        for path in paths:
            if path.is_dir():
                files.extend(sorted(p for p in path.rglob("*") if is_results_file(p)))
            elif path.exists():
                files.append(path)
            else:
                raise CommandError(f"{path}: no such file or folder")
        return files


def _write(good: list[tuple[Path, list[RunRecord]]]) -> list:
    """One batch in one transaction: one commit and one COPY per table for all its files."""
    with transaction.atomic():
        return import_batch([(path.name, records) for path, records in good])


def _write_in_thread(good: list[tuple[Path, list[RunRecord]]]) -> list:
    try:
        return _write(good)
    finally:
        connection.close()  # the writer thread's own connection


def _batches(files, parsed) -> Iterator[list[tuple[Path, list[RunRecord], str]]]:
    batch = []
    for path, (records, problem) in zip(files, parsed, strict=True):
        # What no column can hold is found here, in the one process that knows the models,
        # before any row (a new stack included) is written for the file.
        batch.append((path, records, problem or records_problem(records)))
        if len(batch) == FILES_PER_COMMIT:
            yield batch
            batch = []
    if batch:
        yield batch
