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

import contextlib
import gc
import hashlib
import math
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml
from pydantic import ValidationError
from yaml.composer import Composer
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.scanner import Scanner

from specs import cache
from specs.desired import DesiredState, SourceRef
from specs.diagnostics import (
    Diagnostic,
    Loc,
    SpecError,
    describe_errors,
    did_you_mean,
    dotted,
    sort_diagnostics,
)
from specs.models import API_GROUP, API_VERSION, KINDS, Cluster, Department, Project, Workload
from specs.validate import find_duplicates, validate

__all__ = ["LoadResult", "load_specs"]


@dataclass(frozen=True)
class LoadResult:
    desired: DesiredState
    warnings: list[Diagnostic]


# ------------------------------------------------------------------ YAML 1.2 composer

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_MERGE = "tag:yaml.org,2002:merge"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"


_CORE_SCHEMA: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
for _tag, _pattern, _first in (
    (_BOOL, r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    (_INT, r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        _FLOAT,
        (
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
        ),
        "-+.0123456789",
    ),
    (_NULL, r"^(?:~|null|Null|NULL)$", "~nN"),
    (_MERGE, r"^(?:<<)$", "<"),
):
    for _char in _first:
        _CORE_SCHEMA.setdefault(_char, []).append((_tag, re.compile(_pattern)))


class _CoreResolver:
    """YAML 1.2 core schema for plain scalars (plus ``<<`` merge keys, which users expect).

    Replaces PyYAML's resolver, whose generic machinery (path resolvers, YAML 1.1 rules)
    was the largest single cost of composing a big spec repo.
    """

    def resolve(self, kind: type[Node], value: str, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode:
            if implicit[0]:
                if not value:
                    return _NULL
                for tag, pattern in _CORE_SCHEMA.get(value[0], ()):
                    if pattern.match(value):
                        return tag
            return _STR
        return _SEQ if kind is SequenceNode else _MAP

    def descend_resolver(self, parent: object, index: object) -> None:
        """No path resolvers: nothing to track."""

    def ascend_resolver(self) -> None:
        """No path resolvers: nothing to track."""


class _PyComposer(Reader, Scanner, Parser, Composer, _CoreResolver):  # type: ignore[misc]
    """The pure-Python composer: for hosts without libyaml, and for pathological nesting."""

    def __init__(self, text: str) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)


try:
    from yaml.cyaml import CParser

    class _Composer(CParser, _CoreResolver):  # type: ignore[misc]
        """libyaml's parser and composer with our resolver: the fast path."""

    _HAVE_LIBYAML = True
except ImportError:  # no libyaml: the pure-Python composer gives the same nodes, slower
    _HAVE_LIBYAML = False


# libyaml's composer recurses in C and crashes the interpreter on absurdly deep flow
# nesting ("[[[[..."); the Python composer raises RecursionError instead, which we report.
_SAFE_C_DEPTH = 2000
_BRACKETS = re.compile(r"[^\[\]{}]+")


def _may_nest_deeply(text: str) -> bool:
    if text.count("[") + text.count("{") < _SAFE_C_DEPTH:
        return False
    depth = deepest = 0
    for char in _BRACKETS.sub("", text):  # brackets inside strings count too: an over-estimate
        depth += 1 if char in "[{" else -1
        deepest = max(deepest, depth)
    return deepest >= _SAFE_C_DEPTH


@dataclass(frozen=True)
class _Composed:
    documents: list[Node]
    syntax_error: tuple[int, int, str] | None  # 0-based line, column, message


def _compose(text: str) -> _Composed:
    """Compose every document of ``text``; on a syntax error keep the documents before it."""
    fast = _HAVE_LIBYAML and not _may_nest_deeply(text)
    composer = _Composer(text) if fast else _PyComposer(text)
    documents: list[Node] = []
    try:
        while composer.check_node():
            documents.append(composer.get_node())
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = (mark.line, mark.column) if mark is not None else _eof(text)
        problem = err.problem or err.context or "invalid YAML"
        if err.problem and err.context:
            start = err.context_mark
            since = f" that starts on line {start.line + 1}" if start is not None else ""
            problem = f"{err.problem} ({err.context}{since})"
        return _Composed(documents, (*where, f"YAML syntax error: {problem}"))
    except yaml.reader.ReaderError as err:
        line = text.count("\n", 0, err.position)
        column = err.position - (text.rfind("\n", 0, err.position) + 1)
        return _Composed(
            documents, (line, column, f"YAML syntax error: {err.reason} ({err.character!r})")
        )
    except yaml.YAMLError as err:
        return _Composed(documents, (0, 0, f"YAML syntax error: {err}"))
    except RecursionError:
        return _Composed(documents, (0, 0, "YAML nesting is too deep to read"))
    finally:
        composer.dispose()
    return _Composed(documents, None)


def _eof(text: str) -> tuple[int, int]:
    return text.count("\n"), len(text) - (text.rfind("\n") + 1)


# ------------------------------------------------------------------ node -> value

_MAX_DEPTH = 100
_MAX_VALUES = 200_000  # per document, after alias expansion ("billion laughs")
_FLOAT_WORDS = {".inf": math.inf, "+.inf": math.inf, "-.inf": -math.inf, ".nan": math.nan}


def _scalar(node: ScalarNode) -> tuple[object, str | None]:
    """A scalar's value under the core schema, and a problem if its tag cannot be honoured."""
    tag: str = node.tag
    text: str = node.value
    if tag == _STR:
        return text, None
    try:
        if tag == _INT:
            lowered = text.lower()
            if lowered.startswith(("0o", "0x")):
                return int(lowered[2:], 8 if lowered[1] == "o" else 16), None
            return int(text), None
        if tag == _FLOAT:
            return _FLOAT_WORDS.get(text.lower()) or float(text), None
    except ValueError:
        return text, f"cannot read {text!r} as {_short(tag)}"
    if tag == _NULL:
        return None, None
    if tag == _BOOL:
        return text.lower() == "true", None
    if tag == _MERGE:
        return text, None
    return text, f"unsupported YAML tag '{_short(tag)}'; remove it"


def _short(tag: str) -> str:
    """``!!timestamp`` rather than ``tag:yaml.org,2002:timestamp``: the spelling in the file."""
    return tag.replace("tag:yaml.org,2002:", "!!")


@dataclass
class _Builder:
    """Builds plain values from one composed document, noting what YAML itself would hide:
    duplicate keys, unsupported tags, recursive aliases, alias bombs."""

    problems: list[tuple[Node, str]] = field(default_factory=list)
    _active: set[int] = field(default_factory=set)
    _budget: int = _MAX_VALUES

    def build(self, node: Node, depth: int = 0) -> object:
        self._budget -= 1
        if self._budget < 0:
            if self._budget == -1:
                self.problems.append((node, f"document expands to over {_MAX_VALUES} values"))
            return None
        if isinstance(node, ScalarNode):
            value, problem = _scalar(node)
            if problem:
                self.problems.append((node, problem))
            return value
        if depth > _MAX_DEPTH:
            self.problems.append((node, f"nested deeper than {_MAX_DEPTH} levels"))
            return None
        if id(node) in self._active:
            self.problems.append((node, "an alias refers to a node that contains it"))
            return None
        if node.tag not in (_SEQ, _MAP):
            self.problems.append((node, f"unsupported YAML tag '{_short(node.tag)}'; remove it"))
        self._active.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                return [self.build(item, depth + 1) for item in node.value]
            return self._mapping(node, depth)
        finally:
            self._active.discard(id(node))

    def _mapping(self, node: MappingNode, depth: int) -> dict[object, object]:
        out: dict[object, object] = {}
        first_seen: dict[tuple[type, object], Node] = {}
        merges: list[Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                merges.append(value_node)
                continue
            key = self.build(key_node, depth + 1)
            if isinstance(key, (dict, list)):
                self.problems.append(
                    (key_node, "a key must be a plain value, not a mapping or list")
                )
                continue
            identity = (type(key), key)  # 1 and true are equal in Python, not in YAML
            if identity in first_seen:
                first = first_seen[identity].start_mark.line + 1
                message = (
                    f"duplicate key '{key}' (first on line {first}); "
                    "YAML would keep only the last one, remove or rename one"
                )
                self.problems.append((key_node, message))
            first_seen.setdefault(identity, key_node)
            out[key] = self.build(value_node, depth + 1)
        # Merge keys: explicit keys win, and among merged mappings the first listed wins.
        for merge in merges:
            sources = merge.value if isinstance(merge, SequenceNode) else [merge]
            for source in sources:
                merged = self.build(source, depth + 1)
                if not isinstance(merged, dict):
                    self.problems.append((source, "'<<' merges mappings only"))
                    continue
                for key, value in merged.items():
                    out.setdefault(key, value)
        return out


# ------------------------------------------------------------------ positions


def _lookup(node: MappingNode, key: str | int) -> tuple[Node, Node] | None:
    """The (key node, value node) pair for ``key``, looking through merge keys too."""
    pending: list[Node] = [node]
    visited: set[int] = set()  # a mapping may merge itself through an alias
    while pending:
        mapping = pending.pop(0)
        if not isinstance(mapping, MappingNode) or id(mapping) in visited:
            continue
        visited.add(id(mapping))
        merged: list[Node] = []
        for key_node, value_node in mapping.value:
            if key_node.tag == _MERGE:
                merged.extend(
                    value_node.value if isinstance(value_node, SequenceNode) else [value_node]
                )
            elif isinstance(key_node, ScalarNode) and _scalar(key_node)[0] == key:
                return key_node, value_node
        pending[:0] = merged  # explicit keys first, then merges in the order listed
    return None


def _locate(document: Node, loc: Loc, *, at_key: bool = False) -> tuple[int, int]:
    """1-based position of the deepest node on ``loc`` that exists.

    A scalar points at its value; a mapping or list, a missing key, or a wrong key points
    at the key that holds it, because that is where the user will type the fix.
    """
    node: Node = document
    key_node: Node | None = None
    complete = True
    for part in loc:
        if isinstance(node, MappingNode) and (found := _lookup(node, part)) is not None:
            key_node, node = found
        elif (
            isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value)
        ):
            key_node, node = None, node.value[part]
        else:
            complete = False
            break
    if complete and not at_key and isinstance(node, ScalarNode):
        target = node
    else:
        target = key_node if key_node is not None else node
    return target.start_mark.line + 1, target.start_mark.column + 1


def _path_to(document: Node, target: Node) -> Loc | None:
    """The loc of ``target`` (a key or value node) inside ``document``."""
    seen: set[int] = set()

    def walk(node: Node, loc: Loc) -> Loc | None:
        if node is target:
            return loc
        if id(node) in seen or len(loc) > _MAX_DEPTH + 1:  # the builder goes no deeper either
            return None
        seen.add(id(node))
        if isinstance(node, SequenceNode):
            for index, item in enumerate(node.value):
                if (found := walk(item, (*loc, index))) is not None:
                    return found
        elif isinstance(node, MappingNode):
            for key_node, value_node in node.value:
                key = _scalar(key_node)[0] if isinstance(key_node, ScalarNode) else "?"
                part = key if isinstance(key, (str, int)) else str(key)
                if key_node is target:
                    return (*loc, part)
                if (found := walk(value_node, (*loc, part))) is not None:
                    return found
        return None

    return walk(document, ())


def _name_position(document: Node) -> tuple[int, int]:
    """Where a document's ``metadata.name`` is written: the anchor of all its positions."""
    return _locate(document, ("metadata", "name"))


# ------------------------------------------------------------------ documents


@dataclass(frozen=True)
class _Read:
    """What reading one file produced."""

    specs: cache.FileSpecs
    errors: list[Diagnostic]
    broken: list[tuple[str, str]]  # (kind, name) of documents that failed to validate


def _read_file(path: str, key: str, text: str) -> _Read:
    composed = _compose(text)
    placed: list[cache.PlacedDocument] = []
    warnings: list[cache.PlacedWarning] = []
    errors: list[Diagnostic] = []
    broken: list[tuple[str, str]] = []
    for node in composed.documents:
        builder = _Builder()
        value = builder.build(node)
        outcome = _read_document(path, node, value, builder.problems)
        if outcome.placed is not None:
            placed.append(outcome.placed)
        warnings.extend(outcome.warnings)
        errors.extend(outcome.errors)
        if outcome.broken is not None:
            broken.append(outcome.broken)
    if composed.syntax_error is not None:
        line, column, message = composed.syntax_error
        errors.append(Diagnostic(path, line + 1, column + 1, message))
    specs = cache.FileSpecs(key=key, documents=tuple(placed), warnings=tuple(warnings))
    return _Read(specs, errors, broken)


@dataclass(frozen=True)
class _DocumentOutcome:
    placed: cache.PlacedDocument | None = None
    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[cache.PlacedWarning] = field(default_factory=list)
    broken: tuple[str, str] | None = None


def _read_document(
    path: str, node: Node, value: object, problems: Sequence[tuple[Node, str]]
) -> _DocumentOutcome:
    """Classify and validate one document (steps in the order a reader checks them)."""
    if value is None:  # an empty document, e.g. a trailing '---'
        return _DocumentOutcome()

    def error(loc: Loc, message: str, *, at_key: bool = False) -> Diagnostic:
        line, column = _locate(node, loc, at_key=at_key)
        return Diagnostic(path, line, column, message, dotted(loc) or None)

    def skipped(loc: Loc, message: str) -> _DocumentOutcome:
        line, column = _locate(node, loc)
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

    # 1. Only mappings with apiVersion controlplane/... are ours; the rest belongs to other tools.
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
        return skipped(("apiVersion",), f"apiVersion {api_version!r} belongs to another tool")

    # 2. Our document from here on: every problem is an error.
    errors = [
        Diagnostic(
            path,
            bad.start_mark.line + 1,
            bad.start_mark.column + 1,
            message,
            dotted(_path_to(node, bad) or ()) or None,
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
        document = model.model_validate(value, by_alias=True, by_name=False)
    except ValidationError as err:
        for issue in describe_errors(err.errors(include_url=False), value, model):
            errors.append(error(issue.loc, issue.message, at_key=issue.at_key))
        return _DocumentOutcome(errors=errors, broken=_identity(kind, value))
    assert isinstance(document, (Cluster, Department, Project, Workload))  # KINDS holds no other
    line, column = _name_position(node)
    placed = cache.PlacedDocument.model_construct(line=line, column=column, document=document)
    return _DocumentOutcome(placed=placed, errors=errors)


def _identity(kind: str, value: dict[object, object]) -> tuple[str, str] | None:
    """(kind, name) of a document that failed validation, when readable: references to it
    are then not reported as unknown on top of its own errors."""
    metadata = value.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str):
        return None
    if kind == "Workload":
        spec = value.get("spec")
        project = spec.get("project") if isinstance(spec, dict) else None
        return (kind, f"{project}/{name}") if isinstance(project, str) else None
    return kind, name


# ------------------------------------------------------------------ the repo


def _spec_files(root: Path, errors: list[Diagnostic]) -> list[tuple[str, Path]]:
    """(path relative to root, path) of every spec file, sorted; hidden entries and .cp/ skipped."""
    if root.is_file():
        return [(root.name, root)]

    def unreadable(err: OSError) -> None:
        errors.append(
            Diagnostic(_display(Path(err.filename or root)), 1, 1, f"cannot read: {err.strerror}")
        )

    found = []
    for folder, subfolders, names in os.walk(root, onerror=unreadable):
        subfolders[:] = [d for d in subfolders if not d.startswith(".")]  # includes .cp/
        for name in names:
            if name.endswith((".yaml", ".yml")) and not name.startswith("."):
                path = Path(folder, name)
                found.append((path.relative_to(root).as_posix(), path))
    return sorted(found)


def _display(path: Path) -> str:
    """The path as the user would type it: relative to the working directory when under it."""
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _undecodable(path: str, content: bytes, err: UnicodeDecodeError) -> Diagnostic:
    line = content.count(b"\n", 0, err.start) + 1
    column = err.start - (content.rfind(b"\n", 0, err.start) + 1) + 1
    return Diagnostic(path, line, column, "not UTF-8 text; save the file as UTF-8")


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while loading.

    A load allocates a few hundred thousand short, acyclic objects (nodes, dicts, models);
    each allocation burst triggers collections that rescan everything still alive, which
    measured as costly as the parse itself on a warm load. Nothing here creates cycles
    worth collecting, and the previous state is restored.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load_specs(root: Path, *, cache_dir: Path | None = None) -> LoadResult:
    """Load and validate every spec under ``root``; raise SpecError listing every error.

    With ``cache_dir``, valid files are remembered by content hash and not re-read.
    """
    with _collector_paused():
        return _load(Path(root), cache_dir)


def _load(root: Path, cache_dir: Path | None) -> LoadResult:
    errors: list[Diagnostic] = []
    warnings: list[Diagnostic] = []
    if not root.exists():
        raise SpecError([Diagnostic(_display(root), 1, 1, "no such spec directory or file")])

    # 1. Read each file: from the cache when its content is known, else parse and validate.
    digest = hashlib.sha256()
    placed: list[tuple[str, cache.PlacedDocument]] = []
    broken: list[tuple[str, str]] = []
    contents: dict[str, bytes] = {}
    used: set[str] = set()
    for relative, path in _spec_files(root, errors):
        shown = _display(path)
        try:
            content = path.read_bytes()
        except OSError as err:
            errors.append(Diagnostic(shown, 1, 1, f"cannot read: {err.strerror}"))
            continue
        digest.update(f"{relative}\0{len(content)}\0".encode())
        digest.update(content)
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
            broken.extend(read.broken)
            if cache_dir is not None and not read.errors:
                cache.write(cache_dir, specs)
        used.add(key)
        placed.extend((shown, doc) for doc in specs.documents)
        warnings.extend(
            Diagnostic(shown, w.line, w.column, w.message, w.field, "warning")
            for w in specs.warnings
        )

    # 2. Assemble; duplicates are only visible here, while both documents are at hand.
    desired, entries = _assemble(placed, digest.hexdigest())
    errors.extend(find_duplicates(entries))

    # 3. Cross-document checks, pointed at the exact field.
    for found in _refine(validate(desired, broken=broken), contents):
        (errors if found.severity == "error" else warnings).append(found)
    if errors:
        raise SpecError(errors, warnings)
    if cache_dir is not None:
        cache.prune(cache_dir, used)
    return LoadResult(desired=desired, warnings=sort_diagnostics(warnings))


def _assemble(
    placed: Iterable[tuple[str, cache.PlacedDocument]], digest: str
) -> tuple[DesiredState, list[tuple[str, str, SourceRef]]]:
    clusters: dict[str, Cluster] = {}
    departments: dict[str, Department] = {}
    projects: dict[str, Project] = {}
    workloads: dict[str, Workload] = {}
    sources: dict[tuple[str, str], SourceRef] = {}
    entries: list[tuple[str, str, SourceRef]] = []
    for path, item in placed:
        doc = item.document
        ref = SourceRef(path, item.line, item.column)
        name = doc.key if isinstance(doc, Workload) else doc.metadata.name
        entries.append((doc.kind, name, ref))
        if (doc.kind, name) in sources:  # a duplicate: the first one stands, and is reported
            continue
        sources[(doc.kind, name)] = ref
        if isinstance(doc, Cluster):
            clusters[name] = doc
        elif isinstance(doc, Department):
            departments[name] = doc
        elif isinstance(doc, Project):
            projects[name] = doc
        else:
            workloads[name] = doc
    desired = DesiredState(
        clusters=clusters,
        departments=departments,
        projects=projects,
        workloads=workloads,
        sources=sources,
        digest=digest,
    )
    return desired, entries


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
        documents = {_name_position(node): node for node in _compose(text).documents}
        for diagnostic in diagnostics:
            node = documents.get((diagnostic.line, diagnostic.column))
            if node is None or not diagnostic.field:
                refined.append(diagnostic)
                continue
            line, column = _locate(node, _parse_field(diagnostic.field))
            refined.append(replace(diagnostic, line=line, column=column))
    return refined


def _parse_field(text: str) -> Loc:
    return tuple(int(part) if part.isdigit() else part for part in text.split("."))
