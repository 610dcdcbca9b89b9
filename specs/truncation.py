"""A spec file that ends a few characters into a document: one saved half-written.

A file caught while it is written (copied over a slow link, rewritten in place, read by
``cp watch`` between two writes) ends wherever the writer had got to. Cut inside a
document's fields it fails to validate, and cut inside ``apiVersion: controlp`` it is an
error already (specs/loader.py). Cut earlier in the first line it was not: ``apiVer`` is a
plain scalar and ``apiVersion:`` a key without a value, both read as some other tool's
document and skipped with a warning, so the specs loaded and every workload the rest of
the file held was pruned. Only the last document of a file can be cut like that; one in
the middle was written whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from yaml.nodes import Node, ScalarNode

from specs.models import KINDS

FIRST_KEYS = ("apiVersion", "kind")  # what a document of ours starts with


# what a file of empty documents holds: document markers and null
_NOTHING = frozenset({"", "---", "...", "~", "null", "Null", "NULL"})


def blank(text: str) -> bool:
    """A file with nothing in it: no document with content, and no comment (a file whose
    every document is commented out is one somebody wrote). Empty, whitespace, ``---``,
    ``null``: what a file truncated for a two-step save holds, or one being written."""
    return all(line.strip() in _NOTHING for line in text.splitlines())


def cut_short(value: object) -> str | None:
    """How the last document of a file (its built ``value``) shows it was cut in its first
    line, or None: the start of a first key and nothing more, such a key with no value,
    or ``kind:`` and the start of one of our kinds."""
    if isinstance(value, str):
        text = value.strip()
        if text and any(key.startswith(text) for key in FIRST_KEYS):
            return f"{text!r}, the start of a document"
        return None
    if not isinstance(value, dict) or len(value) != 1:
        return None
    ((key, item),) = value.items()
    if key in FIRST_KEYS and item is None:
        return f"'{key}:' with no value"
    partial_kind = isinstance(item, str) and item not in KINDS
    if key == "kind" and partial_kind and any(k.startswith(str(item)) for k in KINDS):
        return f"'kind: {item}', the start of a document"
    return None


def separator_at_end(text: str, documents: Sequence[Node]) -> tuple[int, str] | None:
    """Where and how a file shows it was cut just after a ``---``: its last document is
    empty and an earlier one has content (the line of that ``---``, the message), or None.
    A comment after it (a document commented out) and a file of comments and markers only
    are written so (:func:`blank` has the empty ones)."""
    if len(documents) < 2 or not _empty(documents[-1]) or all(map(_empty, documents[:-1])):
        return None
    lines = text.splitlines()
    line = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith("---")), 0)
    if any(rest.lstrip().startswith("#") for rest in lines[line + 1 :]):
        return None  # a document commented out after it: written so
    return line + 1, (
        "the file ends in '---' and nothing after it: it looks cut short at the start of a "
        "document (a file saved half-written?); if the file is whole, remove that last '---'"
    )


def _empty(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == "tag:yaml.org,2002:null" and not node.value
