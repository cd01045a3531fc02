"""manage.py import_results: load historical BenchLoop files, each one atomically."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from runs.importers import FormatError, parse_path
from runs.services import import_batch, refresh_stack_stats

DATA_SUFFIXES = (".json", ".jsonl")
# Files imported between two commits: one commit per file spent most of its time waiting for
# the disk, and refreshing the same stacks after every file repeated the same queries.
FILES_PER_COMMIT = 50


class Command(BaseCommand):
    help = "Import run.json, publish envelopes, leaderboard exports and speed-probe JSONL files."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path, help="files, or folders to search")
        parser.add_argument(
            "--model", default="", help="model id for speed-probe JSONL, which does not name one"
        )

    def handle(self, *args, paths: list[Path], model: str, **options) -> None:
        files = self._expand(paths)
        created = skipped = rejected = 0
        for start in range(0, len(files), FILES_PER_COMMIT):
            # A file that cannot be read or parsed changes nothing; the others in a batch share
            # one commit, one INSERT per table and one refresh of the stacks they touched.
            with transaction.atomic():
                parsed: list[tuple[Path, list]] = []
                for path in files[start : start + FILES_PER_COMMIT]:
                    try:
                        parsed.append((path, parse_path(path, model_id=model)))
                    except FormatError as exc:
                        rejected += 1
                        self.stderr.write(f"rejected {path}: {exc}")
                    except OSError as exc:
                        rejected += 1
                        self.stderr.write(f"rejected {path}: cannot read ({exc.strerror})")
                results = import_batch([(path.name, records) for path, records in parsed])
                touched: set[int] = set()
                for (path, _records), result in zip(parsed, results, strict=True):
                    touched |= result.stack_ids
                    created += len(result.created)
                    skipped += len(result.skipped)
                    self.stdout.write(
                        f"{path}: created {len(result.created)}, skipped "
                        f"{len(result.skipped)} already present"
                    )
                refresh_stack_stats(stack_ids=touched)
        self.stdout.write(
            f"total: {created} created, {skipped} skipped, {rejected} file(s) rejected"
        )
        if rejected:
            raise CommandError(f"{rejected} file(s) rejected; nothing from them was imported")

    def _expand(self, paths: list[Path]) -> list[Path]:
        files: list[Path] = []
        for path in paths:
            if path.is_dir():
                files.extend(sorted(p for p in path.rglob("*") if p.suffix in DATA_SUFFIXES))
            elif path.exists():
                files.append(path)
            else:
                raise CommandError(f"{path}: no such file or folder")
        return files
