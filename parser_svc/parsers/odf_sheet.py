"""ODS (OpenDocument spreadsheet) → ReadingPackage: one Sheet per table:table with typed cells
(office:value-type float / percentage / currency → number_value, date → datetime_value, time
→ a time of day, boolean → bool_value, string and untyped text → string_value, formula
errors → error_value), merged ranges from number-columns-spanned / number-rows-spanned, and
visibility from the table's style (table:display="false" → "hidden").

content.xml is streamed (iterparse; each row is dropped once read), and repeated cells and
rows (number-columns-repeated / number-rows-repeated) cost nothing when empty: the million
empty rows a spreadsheet pads its sheets with are one counter step. Repeated cells with values
are paid for in the cell budget (options.max_cells) before they are expanded.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseOptions, ProgressFn, corrupt, safe
from parser_svc.parsers.odf_common import (
    UNPACK_ERRORS,
    OdfPackage,
    attr,
    count,
    fill_metadata,
    inline_text,
    open_odf,
    q,
)
from parser_svc.parsers.xlsx import ERRORS, CellBudget

CALCEXT_TYPE = "{urn:org:documentfoundation:names:experimental:calc:xmlns:calcext:1.0}value-type"
MAX_INDEX = 2**31  # rows or columns numbered past this are damage
_TABLE, _ROW = q("table:table"), q("table:table-row")
_CELL, _COVERED = q("table:table-cell"), q("table:covered-table-cell")
_SHEETS_PARENT = q("office:spreadsheet")
_STYLE, _AUTO = q("style:style"), q("office:automatic-styles")
_ROWS_REPEATED, _COLUMNS_REPEATED = (
    q("table:number-rows-repeated"),
    q("table:number-columns-repeated"),
)
_COLUMNS_SPANNED, _ROWS_SPANNED = q("table:number-columns-spanned"), q("table:number-rows-spanned")
_VALUE_TYPE, _VALUE = q("office:value-type"), q("office:value")
_STRING_VALUE, _P = q("office:string-value"), q("text:p")
_DURATION = re.compile(r"-?P(?:(\d+)D)?T?(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?$")


def column_letters(number: int) -> str:
    letters = ""
    while number > 0:
        number, rest = divmod(number - 1, 26)
        letters = chr(ord("A") + rest) + letters
    return letters


def _date(value: str) -> str:
    value = value.strip().removesuffix("Z")
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return value
    return parsed.date().isoformat() if parsed.time() == dt.time(0) else parsed.isoformat()


Value = tuple[str, str | float | bool]  # (the rp.Cell field, its value)


def _time(value: str) -> Value:
    """An ODF duration ("PT12H30M00S"): a time of day when under a day, else days as a number."""
    found = _DURATION.match(value.strip())
    if found is None:
        return "string_value", safe(value)
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in found.groups())
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if value.strip().startswith("-") or total >= 86400:
        return "number_value", (-total if value.strip().startswith("-") else total) / 86400
    whole = int(total)
    return "datetime_value", f"{whole // 3600:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _cell_text(cell: Any) -> str:
    lines = (inline_text(p) for p in cell.findall(_P))
    return safe("\n".join(lines))


def cell_value(cell: Any) -> Value | None:
    """The typed value of a table:table-cell, or None when it is empty."""
    kind = cell.get(_VALUE_TYPE) or ""
    if cell.get(CALCEXT_TYPE) == "error":
        return "error_value", _cell_text(cell)
    if kind in ("float", "percentage", "currency"):
        try:
            return "number_value", float(cell.get(_VALUE) or "")
        except ValueError:
            return "string_value", _cell_text(cell)
    if kind == "date":
        return "datetime_value", safe(_date(attr(cell, "office:date-value")))
    if kind == "time":
        return _time(attr(cell, "office:time-value"))
    if kind == "boolean":
        return "bool_value", attr(cell, "office:boolean-value").strip().lower() in ("true", "1")
    text = cell.get(_STRING_VALUE)
    text = _cell_text(cell) if text is None else safe(str(text))
    if not text:
        return None
    return ("error_value" if not kind and text in ERRORS else "string_value"), text


class _Reader:
    def __init__(self, package: rp.ReadingPackage, options: ParseOptions, total: int) -> None:
        self.package = package
        self.budget = CellBudget(options)
        self.total = total
        self.hidden_styles: set[str] = set()
        self.sheet: rp.Sheet | None = None
        self.element: Any = None
        self.row = 0  # rows read so far in the sheet

    def style(self, node: Any) -> None:
        if attr(node, "style:family") == "table":
            props = node.find(q("style:table-properties"))
            if props is not None and attr(props, "table:display") == "false":
                self.hidden_styles.add(attr(node, "style:name"))

    def start_sheet(self, node: Any, progress: ProgressFn) -> None:
        number = len(self.package.sheets) + 1
        self.sheet = self.package.sheets.add(number=number, name=safe(attr(node, "table:name")))
        hidden = attr(node, "table:style-name") in self.hidden_styles
        self.sheet.visibility = "hidden" if hidden else "visible"
        self.element, self.row = node, 0
        progress(number - 1, max(self.total, number), "text")

    def end_sheet(self, progress: ProgressFn) -> None:
        if self.sheet is not None:
            self.sheet.cell_count = sum(len(r.cells) for r in self.sheet.rows)
            number = self.sheet.number
            progress(number, max(self.total, number), "text")
        self.sheet, self.element = None, None

    def in_sheet(self, row: Any) -> bool:
        parent = row.getparent()
        while parent is not None and parent.tag != _TABLE:
            parent = parent.getparent()
        return self.sheet is not None and parent is self.element

    def read_row(self, row: Any) -> None:
        assert self.sheet is not None
        times = max(count(row.get(_ROWS_REPEATED)), 1)
        column, values = 1, []
        for cell in row:
            if cell.tag not in (_CELL, _COVERED):
                continue
            repeat = max(count(cell.get(_COLUMNS_REPEATED)), 1)
            if cell.tag == _CELL:
                found = cell_value(cell)
                if found is not None:
                    values.append((column, repeat, found))
                self.merge(cell, column)
            column += repeat
        if values:
            self.budget.spend(sum(repeat for _, repeat, _ in values) * times)
            if self.row + times >= MAX_INDEX or column >= MAX_INDEX:
                raise corrupt(f"sheet {self.sheet.name!r} numbers its cells past {MAX_INDEX}")
            for number in range(self.row + 1, self.row + times + 1):
                out = self.sheet.rows.add(number=number)
                for first, repeat, (name, value) in values:
                    for col in range(first, first + repeat):
                        out.cells.add(column=col, **{name: value})
        self.row += times

    def merge(self, cell: Any, column: int) -> None:
        spanned_cols, spanned_rows = cell.get(_COLUMNS_SPANNED), cell.get(_ROWS_SPANNED)
        if spanned_cols is None and spanned_rows is None:
            return
        cols, rows = max(count(spanned_cols), 1), max(count(spanned_rows), 1)
        if (cols > 1 or rows > 1) and self.sheet is not None and self.row < MAX_INDEX:
            first = f"{column_letters(column)}{self.row + 1}"
            last = f"{column_letters(column + cols - 1)}{self.row + rows}"
            self.sheet.merged_ranges.append(f"{first}:{last}")


def parse_ods(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    from lxml import etree  # type: ignore[import-untyped]

    odf = open_odf(data, options, "ods", "spreadsheet")
    package = rp.ReadingPackage(content_type="ods", decrypted=odf.decrypted)
    fill_metadata(odf.xml("meta.xml"), package)
    reader = _Reader(package, options, _count_sheets(odf))
    try:
        with odf.open("content.xml") as content:
            events = etree.iterparse(
                content,
                events=("start", "end"),
                tag=(_TABLE, _ROW, _STYLE),
                resolve_entities=False,
                no_network=True,
                huge_tree=False,
            )
            for event, node in events:
                _event(reader, event, node, progress)
    except etree.XMLSyntaxError as err:
        raise corrupt(f"the spreadsheet's content.xml is not well-formed XML: {err}") from err
    except UNPACK_ERRORS as err:
        raise corrupt(f"the spreadsheet's content.xml is damaged: {err}") from err
    if not package.sheets:
        raise corrupt("the spreadsheet has no sheets")
    if reader.budget.used == 0:
        package.warnings.append("the workbook has no cells with values")
    return package


def _count_sheets(odf: OdfPackage) -> int:
    """How many sheets content.xml holds (for progress), from a scan of its bytes: streamed,
    never held whole."""
    marker, found, tail = b"<table:table ", 0, b""
    try:
        with odf.open("content.xml") as content:
            while chunk := content.read(1 << 20):
                window = tail + chunk
                found += window.count(marker)
                tail = window[-(len(marker) - 1) :]
    except UNPACK_ERRORS as err:
        raise corrupt(f"the spreadsheet's content.xml is damaged: {err}") from err
    return found


def _event(reader: _Reader, event: str, node: Any, progress: ProgressFn) -> None:
    tag = node.tag
    if event == "start":
        parent = node.getparent() if tag == _TABLE else None
        if parent is not None and parent.tag == _SHEETS_PARENT:
            reader.start_sheet(node, progress)
        return
    if tag == _ROW and reader.in_sheet(node):
        reader.read_row(node)
        _drop(node)
    elif tag == _TABLE and node is reader.element:
        reader.end_sheet(progress)
        _drop(node)
    elif tag == _STYLE and node.getparent() is not None and node.getparent().tag == _AUTO:
        reader.style(node)


def _drop(node: Any) -> None:
    """Frees a read element and the siblings before it (iterparse keeps the tree it built)."""
    node.clear(keep_tail=False)
    parent = node.getparent()
    if parent is not None:
        while node.getprevious() is not None:
            del parent[0]
