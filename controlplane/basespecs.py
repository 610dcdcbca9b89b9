"""The specs a change is measured against (``cp plan --base REF`` / ``--base-dir DIR``).

With a git ref, the spec directory as of that commit is read straight from git (``git
archive``, no checkout, the working tree untouched) into a temporary directory and loaded
there; a spec error in it names the ref and the file (``main:specs/quota.yaml:4:7``), not
the temporary copy. git runs with argument lists, never through a shell.
"""

from __future__ import annotations

import dataclasses
import io
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from controlplane.errors import ControlPlaneError
from specs.diagnostics import Diagnostic, SpecError
from specs.loader import LoadResult, load_specs


class BaseSpecsError(ControlPlaneError):
    """The base of a comparison cannot be read: no git, not a repository, an unknown ref."""


@dataclasses.dataclass(frozen=True)
class BaseSpecs:
    label: str  # how the plan names the base: the ref as given, or the directory
    loaded: LoadResult


@contextmanager
def base_specs(spec_dir: Path, *, ref: str | None, directory: Path | None) -> Iterator[BaseSpecs]:
    """The base specs, loaded; a git ref is extracted to a temporary directory that lives
    as long as the context."""
    if directory is not None:
        yield BaseSpecs(str(directory), _load(directory, None, directory))
        return
    assert ref is not None
    with tempfile.TemporaryDirectory(prefix="cp-base-") as tmp:
        where, shown = extract(spec_dir, ref, Path(tmp))
        yield BaseSpecs(ref, _load(where, f"{ref}:{shown}", where))


def unloadable_base(label: str, exc: SpecError) -> Diagnostic:
    """A warning for a base whose specs do not load, at its first error: the working specs
    are planned alone (the change that fixes a broken base still gets its plan)."""
    first = sorted(exc.diagnostics, key=lambda d: (d.path, d.line, d.column))[0]
    errors = len(exc.diagnostics)
    return Diagnostic(
        first.path,
        first.line,
        first.column,
        f"the base {label} does not load ({errors} error{'s' if errors != 1 else ''}, the "
        f"first: {first.message}); the working specs are planned alone, without the "
        "change's impact",
        first.field,
        "warning",
    )


def extract(spec_dir: Path, ref: str, into: Path) -> tuple[Path, str]:
    """Write the spec directory as of ``ref`` under ``into``; returns where it is and its
    path inside the repository (for messages)."""
    top = Path(_git(spec_dir, "rev-parse", "--show-toplevel").decode().strip())
    inside = spec_dir.resolve().relative_to(top.resolve())
    commit = _git(top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    commit_id = commit.decode().strip()
    paths = [] if str(inside) == "." else ["--", str(inside)]
    try:
        tar = _git(top, "archive", "--format=tar", commit_id, *paths)
    except BaseSpecsError:
        raise BaseSpecsError(f"{ref} has no {inside}/ (the specs did not exist there)") from None
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(into, filter="data")
    where = into / inside
    where.mkdir(parents=True, exist_ok=True)
    return where, "" if str(inside) == "." else f"{inside}/"


def _git(cwd: Path, *args: str) -> bytes:
    git = shutil.which("git")
    if git is None:
        raise BaseSpecsError("--base needs git on PATH (or use --base-dir DIR)")
    try:
        res = subprocess.run(
            [git, "-C", str(cwd), *args], capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise BaseSpecsError(f"git {args[0]} failed: {exc}") from None
    if res.returncode != 0:
        detail = res.stderr.decode(errors="replace").strip().splitlines()
        if args[0] == "rev-parse" and "--show-toplevel" in args:
            raise BaseSpecsError(f"{cwd} is not in a git repository (use --base-dir DIR)")
        if args[0] == "rev-parse":
            raise BaseSpecsError(f"{args[-1].removesuffix('^{commit}')!r} is not a git commit")
        raise BaseSpecsError(f"git {args[0]}: {detail[0] if detail else 'failed'}")
    return res.stdout


def _load(where: Path, shown: str | None, root: Path) -> LoadResult:
    """Load the base specs (no cache: they are read once); errors name ``shown`` paths."""
    try:
        return load_specs(where, cache_dir=None)
    except SpecError as exc:
        if shown is None:
            raise
        raise SpecError(
            [_renamed(d, root, shown) for d in exc.diagnostics],
            [_renamed(d, root, shown) for d in exc.warnings],
        ) from None


def _renamed(d: Diagnostic, root: Path, shown: str) -> Diagnostic:
    try:
        inside = Path(d.path).resolve().relative_to(root.resolve())
    except ValueError:
        return d
    return dataclasses.replace(d, path=f"{shown}{inside}")
