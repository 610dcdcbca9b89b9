"""The load cache: the validated documents of each spec file, keyed by a hash of its content.

Parsing and validating a 7,000-document spec repo costs about a second even on the fast
path; a reconcile loop re-reads the repo every cycle while almost nothing changes. Here
each valid file's documents are stored as JSON under ``cache_dir/specs/<sha256>.json``,
where the hash covers the file's bytes plus a salt (cache format, pydantic version and
the source of the modules that decide what a document validates to), so any change to
either is a miss. JSON rather than pickle because the cache lives inside a repo that
pull requests write to: a planted entry can at worst be wrong data of the right schema,
never code. Every entry is validated on the way in; anything unreadable is a miss.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Collection
from pathlib import Path

import pydantic
from pydantic import BaseModel, ConfigDict

from specs.models import Document

FORMAT = "specs-cache/2"
_SUBDIR = "specs"
# The modules whose code decides what a file validates to (and where its names sit).
_SALTED_MODULES = (
    "models.py",
    "base.py",
    "reach.py",
    "fields.py",
    "durations.py",
    "loader.py",
    "truncation.py",
    "yaml_nodes.py",
    "diagnostics.py",
    "cache.py",
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PlacedDocument(_Frozen):
    """A validated document, the 1-based position of its ``metadata.name``, and the hash
    of what it says (:func:`document_digest`)."""

    line: int
    column: int
    document: Document
    digest: str = ""


def document_digest(document: Document) -> str:
    """The hash of what a document says: its values, defaults filled in, with no trace of
    how it was written (comments, layout, key order, which file)."""
    said = json.dumps(document.model_dump(mode="json", by_alias=True), sort_keys=True)
    return hashlib.sha256(said.encode()).hexdigest()


class PlacedWarning(_Frozen):
    line: int
    column: int
    message: str
    field: str | None = None


class FileSpecs(_Frozen):
    """Everything a valid spec file contributes; what one cache entry holds."""

    key: str
    documents: tuple[PlacedDocument, ...] = ()
    warnings: tuple[PlacedWarning, ...] = ()


@functools.cache
def _salt() -> bytes:
    digest = hashlib.sha256(f"{FORMAT}\0{pydantic.VERSION}\0".encode())
    here = Path(__file__).parent
    for name in _SALTED_MODULES:
        digest.update(name.encode())
        with contextlib.suppress(OSError):  # installed without sources: the version must do
            digest.update((here / name).read_bytes())
    return digest.digest()


def content_key(content: bytes) -> str:
    """The cache key of a file's content."""
    return hashlib.sha256(_salt() + content).hexdigest()


def read(cache_dir: Path, key: str) -> FileSpecs | None:
    """The entry for ``key``; None when absent, unreadable, corrupt or for another key."""
    try:
        text = (cache_dir / _SUBDIR / f"{key}.json").read_bytes()
        entry = FileSpecs.model_validate_json(text)
    except (OSError, ValueError):  # ValueError covers pydantic's ValidationError
        return None
    return entry if entry.key == key else None


def write(cache_dir: Path, entry: FileSpecs) -> None:
    """Store ``entry`` atomically (write, then rename); a cache that cannot be written is
    simply not used, loading must not fail because of it."""
    folder = cache_dir / _SUBDIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # Through the json module, not model_dump_json: pydantic writes inf/nan as null,
        # which would read back as a *different* valid document (an optional field unset).
        plain = entry.model_dump(mode="python", by_alias=True, exclude_unset=True)
        data = json.dumps(plain, separators=(",", ":")).encode()
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, folder / f"{entry.key}.json")
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except (OSError, TypeError, ValueError):
        return


def prune(cache_dir: Path, keep: Collection[str]) -> None:
    """Drop entries no current file uses, so edits do not grow the cache forever."""
    folder = cache_dir / _SUBDIR
    try:
        stale = [p for p in folder.glob("*.json") if p.stem not in keep]
        for path in stale:
            path.unlink(missing_ok=True)
    except OSError:
        return
