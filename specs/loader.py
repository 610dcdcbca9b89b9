"""Loading a spec repo: YAML files -> validated documents -> DesiredState, or every error at once.

Why it is built this way (DESIGN "Loading at scale"): ruamel's round-trip loader keeps
positions but costs ~3 ms a document, far too slow for 7,000 documents on every plan.
Instead each file is *composed* with libyaml (PyYAML's C parser), which yields nodes that
carry their line and column, and plain values are built from those nodes here. That is
faster than PyYAML's own constructor, keeps positions for every key and value without a
second parse, lets us reject duplicate keys (which PyYAML silently overwrites), and fixes
the scalar rules to YAML 1.2's core schema — the one ruamel and most tools use — so
``no`` stays a string and ``12:30`` is not read as a base-60 integer.

Each document is then validated with pydantic; each pydantic error's ``loc`` is walked
down the node tree to the deepest key or value that exists, giving ``file:line:col``.
Valid files are cached by content hash (specs/cache.py), so an unchanged repo is not
parsed at all. Cross-document checks run last (specs/validate.py); their diagnostics
point at a document's ``metadata.name`` and are refined here to the exact field by
re-composing only the files concerned.
"""

from __future__ import annotations

import hashlib
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import ValidationError
from yaml.nodes import Node

from specs import broken_docs, cache, truncation
from specs.collecting import paused
from specs.desired import DesiredState, Document, SourceRef, document_name
from specs.diagnostics import (
    Diagnostic,
    Loc,
    SpecError,
    describe_errors,
    did_you_mean,
    dotted,
    edits,
    sort_diagnostics,
)
from specs.fields import WRITTEN
from specs.files import display, spec_files
from specs.models import API_GROUP, API_VERSION, KINDS, Cluster, Department, Project, Workload
from specs.validate import errors_of_duplicates, find_duplicates, validate
from specs.yaml_nodes import (
    Builder,
    compose,
    locate,
    name_position,
    path_to,
)

__all__ = ["MAX_FILE_BYTES", "MAX_TOTAL_BYTES", "LoadResult", "load_specs"]

# Limits on what is read at all (a 7,000-document repo is 2.5 MB; ten times that is fine)
MAX_FILE_BYTES = 16 * 1024**2
MAX_TOTAL_BYTES = 256 * 1024**2


@dataclass(frozen=True)
class LoadResult:
    desired: DesiredState
    warnings: list[Diagnostic]


# ------------------------------------------------------------------ documents


@dataclass(frozen=True)
class _Read:
    """What reading one file produced."""

    specs: cache.FileSpecs
    errors: list[Diagnostic]
    # (kind, name, line, column of metadata.name) of documents that failed to validate
    broken: list[tuple[str, str, int, int]]
    # such documents as they validate without the fields that failed, and those fields
    shadows: list[broken_docs.Shadow] = field(default_factory=list)


def _read_file(path: str, key: str, text: str) -> _Read:
    if truncation.blank(text):  # truncated and not yet written again, most likely
        message = "the file is empty: one caught while it was saved? (to remove its workloads, delete the file)"
        return _Read(cache.FileSpecs(key=key, documents=()), [Diagnostic(path, 1, 1, message)], [])
    composed = compose(text)
    ends = truncation.separator_at_end(text, composed.documents)  # cut just after a ---
    placed: list[cache.PlacedDocument] = []
    warnings: list[cache.PlacedWarning] = []
    errors: list[Diagnostic] = []
    broken: list[tuple[str, str, int, int]] = []
    shadows: list[broken_docs.Shadow] = []
    for node in composed.documents:
        builder = Builder()
        value = builder.build(node)
        if node is composed.documents[-1] and (cut := truncation.cut_short(value)):
            line, column = locate(node, ())
            message = f"the file ends in {cut}: it looks cut short (a file saved half-written?)"
            errors.append(Diagnostic(path, line, column, message))
            continue
        outcome = _read_document(path, node, value, builder.problems)
        if outcome.placed is not None:
            placed.append(outcome.placed)
        warnings.extend(outcome.warnings)
        errors.extend(outcome.errors)
        if outcome.broken is not None:
            broken.append((*outcome.broken, *name_position(node)))
        if outcome.shadow is not None:
            shadows.append(outcome.shadow)
    if composed.syntax_error is not None:
        line, column, message = composed.syntax_error
        errors.append(Diagnostic(path, line + 1, column + 1, message))
    errors += [Diagnostic(path, ends[0], 1, ends[1])] if ends else []
    specs = cache.FileSpecs(key=key, documents=tuple(placed), warnings=tuple(warnings))
    return _Read(specs, errors, broken, shadows)


@dataclass(frozen=True)
class _DocumentOutcome:
    placed: cache.PlacedDocument | None = None
    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[cache.PlacedWarning] = field(default_factory=list)
    broken: tuple[str, str] | None = None
    shadow: broken_docs.Shadow | None = None


def _read_document(
    path: str, node: Node, value: object, problems: Sequence[tuple[Node, str]]
) -> _DocumentOutcome:
    """Classify and validate one document (steps in the order a reader checks them)."""
    if value is None:  # an empty document, e.g. a trailing '---'
        return _DocumentOutcome()

    def error(loc: Loc, message: str, *, at_key: bool = False) -> Diagnostic:
        line, column = locate(node, loc, at_key=at_key)
        return Diagnostic(path, line, column, message, dotted(loc) or None)

    def skipped(loc: Loc, message: str) -> _DocumentOutcome:
        line, column = locate(node, loc)
        return _DocumentOutcome(
            warnings=[
                cache.PlacedWarning(
                    line=line,
                    column=column,
                    message=f"{message}; document skipped",
                    field=dotted(loc) or None,
                )
            ]
        )

    # 1. Only mappings with apiVersion controlplane/... are ours; the rest belongs to other
    #    tools, but for near misses of our group: typos of ours.
    if not isinstance(value, dict):
        return skipped((), "not a controlplane document (no apiVersion)")
    api_version = value.get("apiVersion")
    kind = value.get("kind")
    if "apiVersion" not in value:
        if isinstance(kind, str) and kind in KINDS:
            return _DocumentOutcome(
                errors=[
                    error(
                        ("apiVersion",),
                        f"missing apiVersion; add 'apiVersion: {API_VERSION}' to this {kind}",
                    )
                ]
            )
        return skipped((), "not a controlplane document (no apiVersion)")
    if not isinstance(api_version, str) or not api_version.startswith(f"{API_GROUP}/"):
        # the file ends inside it (nothing after it, no kind): half saved, not foreign
        cut = isinstance(api_version, str) and api_version and kind is None
        if cut and API_VERSION.startswith(str(api_version)):
            message = f"apiVersion {api_version!r} is cut short: the start of {API_VERSION}"
            half = "(a file saved half-written?)"
            return _DocumentOutcome(errors=[error(("apiVersion",), f"{message} {half}")])
        if isinstance(api_version, str) and _near_ours(api_version):
            message = f"unknown apiVersion {api_version!r}; did you mean {API_VERSION}?"
            reason = "(too close to ours to skip as another tool's)"
            return _DocumentOutcome(errors=[error(("apiVersion",), f"{message} {reason}")])
        return skipped(("apiVersion",), f"apiVersion {api_version!r} belongs to another tool")

    # 2. Our document from here on: every problem is an error.
    errors = [
        Diagnostic(
            path,
            bad.start_mark.line + 1,
            bad.start_mark.column + 1,
            message,
            dotted(path_to(node, bad) or ()) or None,
        )
        for bad, message in problems
    ]
    if api_version != API_VERSION:
        errors.append(
            error(
                ("apiVersion",),
                f"unsupported apiVersion '{api_version}'; this version reads {API_VERSION}",
            )
        )
        return _DocumentOutcome(errors=errors)
    if not isinstance(kind, str) or kind not in KINDS:
        text = "missing kind" if kind is None else f"unknown kind {kind!r}"
        hint = did_you_mean(kind, KINDS) if isinstance(kind, str) else ""
        errors.append(error(("kind",), f"{text}; valid kinds are {', '.join(KINDS)}{hint}"))
        return _DocumentOutcome(errors=errors)

    # 3. The schema of the kind; locs come back as camelCase aliases.
    model = KINDS[kind]
    try:
        document = model.model_validate(
            value, by_alias=True, by_name=False, context={WRITTEN: True}
        )
    except ValidationError as err:
        issues = describe_errors(err.errors(include_url=False), value, model)
        for issue in issues:
            errors.append(error(issue.loc, issue.message, at_key=issue.at_key))
        identity = broken_docs.identity(kind, value)
        shadow, across = broken_docs.shadow(node, value, model, [i.loc for i in issues], path)
        for issue in across:
            errors.append(error(issue.loc, issue.message, at_key=issue.at_key))
        return _DocumentOutcome(errors=errors, broken=identity, shadow=shadow)
    assert isinstance(document, (Cluster, Department, Project, Workload))  # KINDS holds no other
    line, column = name_position(node)
    placed = cache.PlacedDocument.model_construct(
        line=line, column=column, document=document, digest=cache.document_digest(document)
    )
    return _DocumentOutcome(placed=placed, errors=errors)


def _near_ours(api_version: str) -> bool:
    """Whether an apiVersion not ours is a typo of ours rather than another tool's: its
    group within two edits of ours, in any case. Skipped as foreign, a typo on a running
    workload had it pruned by the next apply; Kueue's ``kueue.x-k8s.io`` or Cluster API's
    ``controlplane.cluster.x-k8s.io`` are far from it."""
    group = api_version.partition("/")[0].lower()
    return abs(len(group) - len(API_GROUP)) <= 2 and edits(group, API_GROUP) <= 2


def _read_bounded(path: Path, shown: str, budget: int, errors: list[Diagnostic]) -> bytes | None:
    """The bytes of one spec file, or None with the reason in ``errors``.

    Only regular files are read (a symlink to /dev/zero or a FIFO named x.yaml would never
    end), and each file, and all of them together, must stay within a size limit; the
    size is checked before reading, and the read itself stops at the limit (a file may
    grow in between)."""
    try:
        info = path.stat()  # follows symlinks: a link to a regular file is fine
    except OSError as err:
        errors.append(Diagnostic(shown, 1, 1, f"cannot read: {err.strerror}"))
        return None
    if not stat.S_ISREG(info.st_mode):
        errors.append(
            Diagnostic(
                shown,
                1,
                1,
                (
                    "not a regular file (a device, FIFO or socket); only regular files are read as "
                    "specs: remove it or rename it away from .yaml/.yml"
                ),
            )
        )
        return None
    limit = min(MAX_FILE_BYTES, budget)
    if info.st_size > limit:
        errors.append(Diagnostic(shown, 1, 1, _too_big(info.st_size, limit, budget)))
        return None
    try:
        with path.open("rb") as f:
            content = f.read(limit + 1)
    except OSError as err:
        errors.append(Diagnostic(shown, 1, 1, f"cannot read: {err.strerror}"))
        return None
    if len(content) > limit:
        errors.append(Diagnostic(shown, 1, 1, _too_big(len(content), limit, budget)))
        return None
    return content


def _too_big(size: int, limit: int, budget: int) -> str:
    mib = 1024**2
    if limit == MAX_FILE_BYTES:
        return (
            f"the file is {size / mib:,.1f} MiB, above the {MAX_FILE_BYTES // mib} MiB "
            "limit for one spec file; split it"
        )
    return (
        f"the spec files add up to more than {MAX_TOTAL_BYTES // mib} MiB; is this the "
        "right directory?"
    )


def _undecodable(path: str, content: bytes, err: UnicodeDecodeError) -> Diagnostic:
    line = content.count(b"\n", 0, err.start) + 1
    column = err.start - (content.rfind(b"\n", 0, err.start) + 1) + 1
    return Diagnostic(path, line, column, "not UTF-8 text; save the file as UTF-8")


def load_specs(root: Path, *, cache_dir: Path | None = None) -> LoadResult:
    """Load and validate every spec under ``root``; raise SpecError listing every error.

    With ``cache_dir``, valid files are remembered by content hash and not re-read. The
    collector is paused meanwhile (specs/collecting.py): a load's few hundred thousand
    objects, none of them cyclic garbage, made collections cost as much as the parse.
    """
    with paused():
        return _load(Path(root), cache_dir)


def _load(root: Path, cache_dir: Path | None) -> LoadResult:
    errors: list[Diagnostic] = []
    warnings: list[Diagnostic] = []
    if not root.exists():
        raise SpecError([Diagnostic(display(root), 1, 1, "no such spec directory or file")])

    # 1. Read each file: from the cache when its content is known, else parse and validate.
    placed: list[tuple[str, cache.PlacedDocument]] = []
    broken: list[tuple[str, str]] = []
    broken_at: list[tuple[str, str, SourceRef]] = []  # where each was written
    shadows: list[tuple[str, cache.PlacedDocument, frozenset[str]]] = []
    contents: dict[str, bytes] = {}
    used: set[str] = set()
    budget = MAX_TOTAL_BYTES
    for path in spec_files(root, errors):
        shown = display(path)
        content = _read_bounded(path, shown, budget, errors)
        if content is None:
            continue
        budget -= len(content)
        contents[shown] = content
        key = cache.content_key(content)
        specs = cache.read(cache_dir, key) if cache_dir is not None else None
        if specs is None:
            try:
                text = content.decode("utf-8-sig")
            except UnicodeDecodeError as err:
                errors.append(_undecodable(shown, content, err))
                continue
            read = _read_file(shown, key, text)
            specs = read.specs
            errors.extend(read.errors)
            for kind, name, line, column in read.broken:
                broken.append((kind, name))
                broken_at.append((kind, name, SourceRef(shown, line, column)))
            shadows += [(shown, placed_doc, failed) for placed_doc, failed in read.shadows]
            if cache_dir is not None and not read.errors:
                cache.write(cache_dir, specs)
        used.add(key)
        placed.extend((shown, doc) for doc in specs.documents)
        warnings.extend(
            Diagnostic(shown, w.line, w.column, w.message, w.field, "warning")
            for w in specs.warnings
        )

    if not placed and not errors and not broken:  # a wrong directory, most likely
        warnings.append(
            Diagnostic(
                display(root),
                1,
                1,
                "no spec documents here (YAML files of apiVersion controlplane/v1): "
                "nothing to plan; is this the spec directory?",
                severity="warning",
            )
        )

    # 2. Assemble; duplicates are only visible here, while both documents are at hand,
    #    those that failed their schema among them (in reading order: files, then lines)
    desired, entries, duplicates = _assemble(placed, specs_digest(doc for _, doc in placed))
    read_order = {path: i for i, path in enumerate(contents)}
    entries = sorted(
        entries + broken_at, key=lambda e: (read_order[e[2].path], e[2].line, e[2].column)
    )
    errors.extend(find_duplicates(entries))

    # 3. Cross-document checks, pointed at the exact field; a duplicate's own errors come
    #    now too, not once its name is fixed.
    checked = validate(desired, broken=broken)
    for found in _refine(checked, contents):
        (errors if found.severity == "error" else warnings).append(found)
    errors.extend(_refine(errors_of_duplicates(desired, duplicates, broken=broken), contents))
    errors.extend(_refine(broken_docs.references(desired, shadows, broken, checked), contents))
    if errors:
        raise SpecError(errors, warnings)
    if cache_dir is not None:
        cache.prune(cache_dir, used)
    return LoadResult(desired=desired, warnings=sort_diagnostics(warnings))


def specs_digest(placed: Iterable[cache.PlacedDocument]) -> str:
    """The specs' digest, recorded in every plan: over what each document says, not how
    or where it is written, so a comment or a document moved to another file leaves a
    plan made of them good (a saved plan, a reviewed one)."""
    said = sorted(
        (p.document.kind, document_name(p.document), p.digest or cache.document_digest(p.document))
        for p in placed
    )
    digest = hashlib.sha256()
    for kind, name, doc in said:
        digest.update(f"{kind}\0{name}\0{doc}\n".encode())
    return digest.hexdigest()


def _assemble(
    placed: Iterable[tuple[str, cache.PlacedDocument]], digest: str
) -> tuple[DesiredState, list[tuple[str, str, SourceRef]], list[tuple[Document, SourceRef]]]:
    """The desired state (the first document of each kind and name), every (kind, name,
    where), and the later documents of a name taken already (duplicates)."""
    desired = DesiredState(digest=digest)
    entries: list[tuple[str, str, SourceRef]] = []
    duplicates: list[tuple[Document, SourceRef]] = []
    for path, item in placed:
        doc = item.document
        ref = SourceRef(path, item.line, item.column)
        name = document_name(doc)
        entries.append((doc.kind, name, ref))
        if (doc.kind, name) in desired.sources:  # a duplicate: the first stands, and is reported
            duplicates.append((doc, ref))
            continue
        desired.put(doc, ref)
    return desired, entries, duplicates


def _refine(found: list[Diagnostic], contents: dict[str, bytes]) -> list[Diagnostic]:
    """Move cross-document diagnostics from a document's name to the field they concern.

    Only the files that have such diagnostics are composed again, which is cheap next to
    validation and happens only when something is wrong (or worth a warning)."""
    by_path: dict[str, list[Diagnostic]] = {}
    for diagnostic in found:
        by_path.setdefault(diagnostic.path, []).append(diagnostic)
    refined: list[Diagnostic] = []
    for path, diagnostics in by_path.items():
        content = contents.get(path)
        text = content.decode("utf-8-sig", errors="replace") if content is not None else ""
        documents = {name_position(node): node for node in compose(text).documents}
        for diagnostic in diagnostics:
            node = documents.get((diagnostic.line, diagnostic.column))
            if node is None or not diagnostic.field:
                refined.append(diagnostic)
                continue
            line, column = locate(node, _parse_field(diagnostic.field))
            refined.append(replace(diagnostic, line=line, column=column))
    return refined


def _parse_field(text: str) -> Loc:
    return tuple(int(part) if part.isdigit() else part for part in text.split("."))
