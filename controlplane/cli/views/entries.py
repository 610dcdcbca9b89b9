"""Long lists of entries (a plan's actions and waiting work, history) as aligned lines.

Each entry is a marker, a *what* line and a *why* line below it, wrapped to the terminal
with the marker in a column of its own, so wrapped text stays aligned under the name;
names never break (they hold no spaces, and fold only if wider than the terminal).

Laid out here rather than as a rich table: a plan lists thousands of entries, and a
table measures every cell of every row (5 s for 8,000 entries). Plain ASCII, the usual
case, is wrapped by offsets and turned into segments straight from the text's style
spans; rich's own wrap and render (exact for wide characters, far slower) serve the
rest. Where no style is drawn at all (output to a file, a pipe or a CI log), the lines
are joined as plain text without segments. The output is the same either way.
"""

from __future__ import annotations

import re
from itertools import pairwise

from rich.console import Console
from rich.segment import Segment, Segments
from rich.style import Style
from rich.text import Text

from controlplane.cli.views.tables import TEXT_MIN_WIDTH

_WORD = re.compile(r"\S+\s*")


def print_entries(console: Console, rows: list[tuple[Text, Text, Text]]) -> None:
    """Print (marker, what, why) entries, two lines or more each, in a single print."""
    if not rows:
        return
    indent = max(m.cell_len for m, _, _ in rows) + 1
    width = max(console.width - indent, TEXT_MIN_WIDTH)
    styles = _Styles(console)
    if console.color_system is None:  # no style is drawn: the text alone, laid out alike
        text = _plain_entries(console, styles, rows, indent, width)
        console.print(Segments([Segment(text)]), soft_wrap=True, highlight=False)
        return
    pad = Segment(" " * indent)
    out: list[Segment] = []
    for n, (marker, what, why) in enumerate(rows):
        if n:
            out.append(Segment.line())
        out += _line(console, styles, marker)
        out.append(Segment(" " * (indent - marker.cell_len)))
        for i, line in enumerate(_lines(console, styles, what, width)):
            if i:
                out += (Segment.line(), pad)
            out += line
        for line in _lines(console, styles, why, width):
            out += (Segment.line(), pad)
            out += line
    out.append(Segment.line())
    console.print(Segments(out), soft_wrap=True, highlight=False)


def _plain_entries(
    console: Console, styles: _Styles, rows: list[tuple[Text, Text, Text]], indent: int, width: int
) -> str:
    """The entries as ``print_entries`` lays them out, as plain text."""
    pad = "\n" + " " * indent
    parts: list[str] = []
    for n, (marker, what, why) in enumerate(rows):
        if n:
            parts.append("\n")
        parts += (marker.plain, " " * (indent - marker.cell_len))
        parts.append(pad.join(_plain_lines(console, styles, what, width)))
        for line in _plain_lines(console, styles, why, width):
            parts += (pad, line)
    parts.append("\n")
    return "".join(parts)


def _plain_lines(console: Console, styles: _Styles, text: Text, width: int) -> list[str]:
    """``_lines`` as plain text."""
    plain = text.plain
    if not plain.isascii() or "\n" in plain:
        return ["".join(s.text for s in line) for line in _lines(console, styles, text, width)]
    if len(plain) <= width:
        return [plain]
    return [plain[a:b].rstrip() for a, b in _breaks(plain, width)]


class _Styles:
    """Styles of one print, parsed and combined once each."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._combined: dict[tuple[str | Style, ...], Style] = {}

    def of(self, names: tuple[str | Style, ...]) -> Style:
        style = self._combined.get(names)
        if style is None:
            get = self.console.get_style
            style = Style.combine(get(name, default=Style.null()) for name in names)
            self._combined[names] = style
        return style


def _line(console: Console, styles: _Styles, text: Text) -> list[Segment]:
    """A text of one line as segments, its own style included."""
    if not _flat(text):
        return list(_rich_segments(console, text))
    return _cut(styles, text, 0, len(text.plain))


def _lines(console: Console, styles: _Styles, text: Text, width: int) -> list[list[Segment]]:
    """``text`` in lines of at most ``width`` cells, broken at spaces (a word wider than the
    line folds), each line as segments."""
    plain = text.plain
    if not plain.isascii() or "\n" in plain:
        if len(plain) <= width and plain.isascii():
            return [_line(console, styles, text)]
        return [
            _rich_segments(console, line) for line in text.wrap(console, width, overflow="fold")
        ]
    if len(plain) <= width:
        bounds = [(0, len(plain))]
    else:
        bounds = [(a, a + len(plain[a:b].rstrip())) for a, b in _breaks(plain, width)]
    if _flat(text):
        return [_cut(styles, text, a, b) for a, b in bounds]
    return [_rich_segments(console, text[a:b]) for a, b in bounds]


def _breaks(plain: str, width: int) -> list[tuple[int, int]]:
    """Where an ASCII text's lines start and end (trailing spaces included)."""
    lines, start, end = [], 0, 0  # the line so far is plain[start:end], spaces included
    for m in _WORD.finditer(plain):
        word_end = m.start() + len(m.group().rstrip())
        if word_end - start > width and end > start:
            lines.append((start, end))
            start = m.start()
        while word_end - start > width:  # a word wider than a line folds
            lines.append((start, start + width))
            start += width
        end = m.end()
    lines.append((start, end))
    return lines


def _flat(text: Text) -> bool:
    """Whether no two style spans overlap (then a cut needs no stack of styles)."""
    spans = sorted(text.spans, key=lambda s: s.start)
    return all(a.end <= b.start for a, b in pairwise(spans))


def _cut(styles: _Styles, text: Text, start: int, end: int) -> list[Segment]:
    """The segments of ``text.plain[start:end]``: one per stretch under the same spans,
    styled by the text's own style then its spans, as rich renders a line of it."""
    plain = text.plain
    if not text.spans and not text.style:
        return [Segment(plain[start:end])] if end > start else []
    cuts = {start, end}
    for span in text.spans:
        cuts.update(c for c in (span.start, span.end) if start < c < end)
    out = []
    bounds = sorted(cuts)
    for a, b in pairwise(bounds):
        names = (text.style, *(s.style for s in text.spans if s.start <= a < s.end))
        out.append(Segment(plain[a:b], styles.of(names)))
    return out


def _rich_segments(console: Console, text: Text) -> list[Segment]:
    """One line's segments by rich, its own style included (``Text.render`` applies only
    spans)."""
    if text.style:
        styled = Text()
        styled.append_text(text)  # the style becomes a span
        text = styled
    return list(text.render(console))
