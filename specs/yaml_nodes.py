"""YAML 1.2 documents as nodes that keep positions: composing, building values, locating fields.

Split out of the loader because it is the one place that knows libyaml's node tree:
composing a file (C parser when it is safe, the pure-Python one for pathological nesting),
turning nodes into plain values under YAML 1.2's core schema with duplicate keys and
alias bombs rejected, and walking a pydantic error location down the tree to a line and
column.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import yaml
from yaml.composer import Composer
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.scanner import Scanner

from specs.diagnostics import Loc

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


# libyaml's composer recurses in C and crashes the interpreter on absurdly deep nesting
# ("[[[[...", or "- - - - ..." on one line); the Python composer raises RecursionError
# instead, which we report. Nesting comes from flow brackets, from indentation, and from
# block indicators ("- ", "? ", ": ") that open a level on the same line; the two checks
# below over-estimate each, so a file that passes them is safe for the C composer.
_SAFE_C_DEPTH = 2000
_BRACKETS = re.compile(r"[^\[\]{}]+")
_BLOCK_PREFIX = re.compile(r"^[ \-?:]+", re.MULTILINE)
MAX_DOCUMENTS = 100_000  # per file


def _may_nest_deeply(text: str) -> bool:
    if any(len(m.group()) >= _SAFE_C_DEPTH for m in _BLOCK_PREFIX.finditer(text)):
        return True
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


def compose(text: str) -> _Composed:
    """Compose every document of ``text``; on a syntax error keep the documents before it."""
    fast = _HAVE_LIBYAML and not _may_nest_deeply(text)
    composer = _Composer(text) if fast else _PyComposer(text)
    documents: list[Node] = []
    try:
        while composer.check_node():
            if len(documents) == MAX_DOCUMENTS:
                line = composer.get_node().start_mark.line
                return _Composed(
                    documents,
                    (
                        line,
                        0,
                        f"more than {MAX_DOCUMENTS:,} documents in "
                        "one file; split it into several files",
                    ),
                )
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
        shown = repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text):,} characters)"
        return text, f"cannot read {shown} as {_short(tag)}"
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
class Builder:
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
        found: tuple[Node, Node] | None = None
        for key_node, value_node in mapping.value:
            if key_node.tag == _MERGE:
                merged.extend(
                    value_node.value if isinstance(value_node, SequenceNode) else [value_node]
                )
            elif isinstance(key_node, ScalarNode) and _scalar(key_node)[0] == key:
                found = key_node, value_node  # the last of equal keys: the one YAML keeps
        if found is not None:
            return found
        pending[:0] = merged  # explicit keys first, then merges in the order listed
    return None


def locate(document: Node, loc: Loc, *, at_key: bool = False) -> tuple[int, int]:
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


def path_to(document: Node, target: Node) -> Loc | None:
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


def name_position(document: Node) -> tuple[int, int]:
    """Where a document's ``metadata.name`` is written: the anchor of all its positions."""
    return locate(document, ("metadata", "name"))
