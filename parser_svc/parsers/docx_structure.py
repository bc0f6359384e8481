"""What a Word paragraph or table is, from the document's own markup (WordprocessingML).

- Headings: the paragraph style — "Title" (role "title", level 1), "heading N" (role
  "heading", level N capped at 6), a style based on one of those, or a w:outlineLvl in the
  paragraph's or a style's properties (level outlineLvl + 1; 9 is body text).
- Lists: w:numPr (from the paragraph or its style chain) names a numbering instance (numId) and
  a level (ilvl, level ilvl + 1). The numbering part's abstract definition gives each level's
  format (numFmt: bullet, decimal, lowerLetter, ...), its text (lvlText, "%1." with the
  counters of levels 1..9) and its start; counters run per numbering instance, deeper levels
  restart after a shallower item, and w:lvlOverride/w:startOverride are honoured.
- Tables: w:gridSpan → col_span, w:vMerge restart/continue → row_span, w:gridBefore shifts a
  row's cells, leading rows with w:tblHeader (repeated on each page) → header_rows.
- Captions: the "Caption" style (or one based on it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers.list_markers import bullet_marker, format_number

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_W = f"{{{W_NS}}}"
_HEADING = re.compile(r"heading\s*(\d+)$")
# "List Bullet 2", "List Number 3": built-in list styles whose depth is in the name (each is a
# one-level list of its own, indented).
_LIST_STYLE = re.compile(r"list(?: bullet| number)?\s+(\d)$")
_PLACEHOLDER = re.compile(r"%([1-9])")
_FALSE = ("0", "false", "off")
MAX_LEVELS = 9
MAX_GRID = 1000  # Word's tables have at most 63 columns: a larger span is damage
MAX_BASED_ON = 64  # a longer w:basedOn chain (a hostile file) inherits nothing past it


def _val(element: Any, path: str) -> str | None:
    """The w:val of the child at `path` (w-prefixed names separated by "/"), or None."""
    node = element
    for name in path.split("/"):
        if node is None:
            return None
        node = node.find(_W + name)
    return None if node is None else node.get(_W + "val", "")


def _int(text: str | None, default: int = 0) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


@dataclass
class Kind:
    """What a paragraph is: role, level, and for list items the marker and whether it counts."""

    role: str = ""
    level: int = 0
    marker: str = ""
    ordered: bool = False


@dataclass
class _Style:
    role: str = ""
    level: int = 0
    num_id: str | None = None
    ilvl: int | None = None
    depth: int = 0


@dataclass
class _Level:
    fmt: str = "decimal"
    text: str = "%1."
    start: int = 1


@dataclass
class _Instance:
    levels: dict[int, _Level]
    counters: list[int] = field(default_factory=lambda: [0] * MAX_LEVELS)


def _levels(parent: Any) -> dict[int, _Level]:
    levels: dict[int, _Level] = {}
    for lvl in parent.findall(_W + "lvl"):
        index = _int(lvl.get(_W + "ilvl"))
        text = _val(lvl, "lvlText")
        levels[index] = _Level(
            fmt=_val(lvl, "numFmt") or "decimal",
            text="" if text is None else text,
            start=_int(_val(lvl, "start"), 1),
        )
    return levels


class Numbering:
    """The numbering part's definitions and the running counters of each instance."""

    def __init__(self, root: Any) -> None:
        self.instances: dict[str, _Instance] = {}
        if root is None:
            return
        abstract = {
            node.get(_W + "abstractNumId", ""): _levels(node)
            for node in root.findall(_W + "abstractNum")
        }
        for num in root.findall(_W + "num"):
            levels = dict(abstract.get(_val(num, "abstractNumId") or "", {}))
            for override in num.findall(_W + "lvlOverride"):
                index = _int(override.get(_W + "ilvl"))
                levels.update(_levels(override))
                start = _val(override, "startOverride")
                if start is not None and index in levels:
                    base = levels[index]
                    levels[index] = _Level(base.fmt, base.text, _int(start, 1))
            self.instances[num.get(_W + "numId", "")] = _Instance(levels)

    def item(self, num_id: str, ilvl: int) -> Kind | None:
        """The next item of instance `num_id` at `ilvl`, counted; None when undefined."""
        instance = self.instances.get(num_id)
        if instance is None or ilvl not in instance.levels:
            return None
        ilvl = min(max(ilvl, 0), MAX_LEVELS - 1)
        level = instance.levels[ilvl]
        counters = instance.counters
        counters[ilvl] = counters[ilvl] + 1 if counters[ilvl] else level.start
        for deeper in range(ilvl + 1, MAX_LEVELS):
            counters[deeper] = 0
        kind = Kind(role="list_item", level=ilvl + 1)
        if level.fmt == "bullet":
            kind.marker = bullet_marker(level.text)
        elif level.fmt == "none":
            kind.marker = level.text.strip()
        else:
            kind.ordered = True
            kind.marker = _PLACEHOLDER.sub(lambda m: self._counter(instance, m), level.text)
        return kind

    @staticmethod
    def _counter(instance: _Instance, match: re.Match[str]) -> str:
        index = int(match.group(1)) - 1
        level = instance.levels.get(index, _Level())
        value = instance.counters[index] or level.start
        return format_number(value, level.fmt)


class WordStructure:
    """Roles and levels of a document's paragraphs, from its styles and numbering parts."""

    def __init__(self, styles_root: Any, numbering_root: Any) -> None:
        self.numbering = Numbering(numbering_root)
        self.raw: dict[str, Any] = {}
        if styles_root is not None:
            for style in styles_root.findall(_W + "style"):
                if style.get(_W + "type") in (None, "paragraph"):
                    self.raw[style.get(_W + "styleId", "")] = style
        self.resolved: dict[str, _Style] = {}
        self.default_id = next(
            (key for key, node in self.raw.items() if node.get(_W + "default") in ("1", "true")),
            "",
        )

    def style(self, style_id: str, depth: int = 0) -> _Style:
        """A paragraph style with what it inherits through w:basedOn (the nearest wins)."""
        if style_id in self.resolved:
            return self.resolved[style_id]
        out = _Style()
        self.resolved[style_id] = out  # a basedOn cycle ends here
        node = self.raw.get(style_id)
        if node is None or depth > MAX_BASED_ON:
            return out
        name = (_val(node, "name") or "").strip().lower()
        heading = _HEADING.match(name)
        outline = _int(_val(node, "pPr/outlineLvl"), MAX_LEVELS)
        base = self.style(_val(node, "basedOn") or "", depth + 1)
        if name == "title":
            out.role, out.level = "title", 1
        elif heading:
            out.role, out.level = "heading", min(max(int(heading.group(1)), 1), 6)
        elif name == "caption":
            out.role = "caption"
        elif outline < MAX_LEVELS:
            out.role, out.level = "heading", min(max(outline, 0) + 1, 6)
        else:
            out.role, out.level = base.role, base.level
        num_pr = node.find(f"{_W}pPr/{_W}numPr")
        out.num_id = _val(num_pr, "numId") if num_pr is not None else None
        out.ilvl = _int(_val(num_pr, "ilvl")) if num_pr is not None else None
        listed = _LIST_STYLE.match(name)
        out.depth = int(listed.group(1)) if listed else base.depth
        if out.num_id is None:
            out.num_id = base.num_id
        if out.ilvl is None:
            out.ilvl = base.ilvl
        return out

    def paragraph(self, p: Any) -> Kind:
        """The role and level of a w:p (list items counted: call once per paragraph, in order)."""
        ppr = p.find(_W + "pPr")
        style_id = _val(ppr, "pStyle") if ppr is not None else None
        style = self.style(self.default_id if style_id is None else style_id)
        outline = _int(_val(ppr, "outlineLvl"), MAX_LEVELS) if ppr is not None else MAX_LEVELS
        if style.role == "title":
            return Kind("title", 1)
        if outline < MAX_LEVELS:
            return Kind("heading", min(max(outline, 0) + 1, 6))
        if style.role in ("heading", "caption"):
            return Kind(style.role, style.level)
        num_pr = ppr.find(_W + "numPr") if ppr is not None else None
        num_id = _val(num_pr, "numId") if num_pr is not None else None
        ilvl = _val(num_pr, "ilvl") if num_pr is not None else None
        num_id = style.num_id if num_id is None else num_id
        level = _int(ilvl) if ilvl is not None else (style.ilvl or 0)
        if num_id and num_id != "0":
            item = self.numbering.item(num_id, level)
            nested = min(max(level, 0), MAX_LEVELS - 1) + 1
            item = item or Kind("list_item", nested, bullet_marker(""))
            if ilvl is None and style.depth > item.level:
                item.level = style.depth
            return item
        return Kind()


def table_layout(tbl: Any) -> tuple[list[list[rp.CellSpan]], int, list[int]]:
    """The merged cells of each row of a w:tbl (spans of more than one cell), how many leading
    rows are header rows (w:tblHeader), and each row's skipped grid columns (w:gridBefore),
    which python-docx leaves out of the row's cells."""
    grid: list[dict[int, tuple[int, str | None]]] = []
    before: list[int] = []
    header_rows, leading = 0, True
    for tr in tbl.findall(_W + "tr"):
        trpr = tr.find(_W + "trPr")
        col = min(max(_int(_val(trpr, "gridBefore")), 0), MAX_GRID) if trpr is not None else 0
        before.append(col)
        header = _val(trpr, "tblHeader") if trpr is not None else None
        if leading and header is not None and header.lower() not in _FALSE:
            header_rows += 1
        else:
            leading = False
        cells: dict[int, tuple[int, str | None]] = {}
        for tc in tr.findall(_W + "tc"):
            tcpr = tc.find(_W + "tcPr")
            span = min(max(_int(_val(tcpr, "gridSpan"), 1), 1), MAX_GRID) if tcpr is not None else 1
            merge = _val(tcpr, "vMerge") if tcpr is not None else None
            cells[col] = (span, None if merge is None else (merge or "continue"))
            col += span
        grid.append(cells)
    spans: list[list[rp.CellSpan]] = []
    for r, cells in enumerate(grid):
        row: list[rp.CellSpan] = []
        for col, (span, merge) in cells.items():
            if merge == "continue":
                continue
            height = 1
            if merge == "restart":
                for below in grid[r + 1 :]:
                    if below.get(col, (0, None))[1] != "continue":
                        break
                    height += 1
            if span > 1 or height > 1:
                row.append(rp.CellSpan(column=col, row_span=height, col_span=span))
        spans.append(row)
    return spans, header_rows, before
