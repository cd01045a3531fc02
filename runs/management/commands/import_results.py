"""manage.py import_results: load historical BenchLoop files, each one atomically."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.importers import FormatError, parse_path
from runs.services import import_records

DATA_SUFFIXES = (".json", ".jsonl")


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
        for path in files:
            try:
                records = parse_path(path, model_id=model)
                result = import_records(records, source_name=path.name)
            except FormatError as exc:
                rejected += 1
                self.stderr.write(f"rejected {path}: {exc}")
                continue
            except OSError as exc:
                rejected += 1
                self.stderr.write(f"rejected {path}: cannot read ({exc.strerror})")
                continue
            created += len(result.created)
            skipped += len(result.skipped)
            self.stdout.write(
                f"{path}: created {len(result.created)}, skipped {len(result.skipped)} "
                f"already present"
            )
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
