"""The weights' identity: a GGUF file's sha256, or Ollama's digests (bundle 1.1 `model` keys).

A GGUF is hashed in a streaming way (a 20 GB file never sits in memory), and the digest is
cached in ``$BENCHLOOP_HOME/weights-sha256.json`` under the file's real path, size and
modification time, so each file is read once. Ollama stores its weights content-addressed
(``blobs/sha256-<hex>``), so their digest is read from `/api/show` without hashing anything.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

from ..rules.contract import Weights
from .paths import benchloop_home

CACHE_FILE = "weights-sha256.json"
CHUNK = 4 * 1024 * 1024
_HEX64 = re.compile(r"[0-9a-f]{64}")
_BLOB = re.compile(r"^FROM\s+\S*sha256[-:]([0-9a-f]{64})\s*$", re.MULTILINE | re.IGNORECASE)
_GGUF_MAGIC = b"GGUF"


def is_gguf(path: Path) -> bool:
    """A readable regular file that starts with the GGUF magic."""
    try:
        with path.open("rb") as handle:
            return handle.read(4) == _GGUF_MAGIC
    except OSError:
        return False


def _load_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_cache(path: Path, cache: dict) -> None:
    """Best effort, atomic: a cache that cannot be written costs a re-hash next time, no more."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def file_sha256(
    path: Path,
    *,
    home: Path | None = None,
    on_hashing: Callable[[Path, int], None] | None = None,
) -> dict:
    """``{"sha256", "size_bytes", "cached"}`` of a file, from the cache when it is unchanged.

    The cache key is the resolved path; an entry counts only while the size and mtime (in ns)
    match, so an edited or replaced file is hashed again. ``on_hashing(path, size)`` is called
    before a file is actually read, so a display can say why the start takes a while.
    """
    real = Path(os.path.realpath(path))
    info = real.stat()
    cache_path = (home or benchloop_home()) / CACHE_FILE
    cache = _load_cache(cache_path)
    entry = cache.get(str(real))
    if (
        isinstance(entry, dict)
        and entry.get("size") == info.st_size
        and entry.get("mtime_ns") == info.st_mtime_ns
        and _HEX64.fullmatch(str(entry.get("sha256", "")))
    ):
        return {"sha256": entry["sha256"], "size_bytes": info.st_size, "cached": True}
    if on_hashing is not None:
        on_hashing(real, info.st_size)
    digest = hashlib.sha256()
    with real.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    value = digest.hexdigest()
    cache[str(real)] = {"size": info.st_size, "mtime_ns": info.st_mtime_ns, "sha256": value}
    _save_cache(cache_path, cache)
    return {"sha256": value, "size_bytes": info.st_size, "cached": False}


def gguf_identity(
    candidates: list[str],
    *,
    home: Path | None = None,
    on_hashing: Callable[[Path, int], None] | None = None,
) -> Weights:
    """The model block's weight keys for the first candidate path that is a local GGUF file.

    Candidates come from the user (``--model-file``), the server's `/props` ``model_path``, its
    model id and its command line. Only the file name is recorded, never the directory.
    """
    for candidate in candidates:
        if not candidate:
            continue
        path = Path(candidate).expanduser()
        if not path.is_file() or not is_gguf(path):
            continue
        try:
            digest = file_sha256(path, home=home, on_hashing=on_hashing)
        except OSError:
            continue
        return Weights(
            sha256=digest["sha256"],
            sha256_source="gguf-file",
            file=path.name,
            file_size_bytes=digest["size_bytes"],
        )
    return Weights()


def ollama_identity(digest: str | None, show: dict | None) -> Weights:
    """Ollama's manifest digest (`/api/tags`) and its weights blob's sha256 (`/api/show`).

    The blob is the GGUF itself, stored under its own sha256, so ``sha256`` means the same thing
    as for a file hashed here; ``ollama_digest`` names the whole model (weights, template,
    parameters) as Ollama lists it.
    """
    out = Weights()
    digest = str(digest or "").lower().removeprefix("sha256:")
    if _HEX64.fullmatch(digest):
        out["ollama_digest"] = digest
    modelfile = str((show or {}).get("modelfile") or "")
    if match := _BLOB.search(modelfile):
        out["sha256"] = match.group(1).lower()
        out["sha256_source"] = "ollama-blob"
    return out
