"""CSV / TSV → ReadingPackage: one Sheet ("Sheet1") with typed cells.

- The characters: `text_charset.decode_text` (BOM, UTF-8, then detection: a cp1252 export).
- The dialect from the first 64 KB: of comma, semicolon, tab and pipe, the delimiter that
  splits the most rows into the same number (> 1) of fields (quoted fields with delimiters and
  line breaks inside read as one field, `""` as a quote).
- A header row when every cell of the first row is a distinct non-empty label that is no
  number or date while some column below it holds numbers or dates, or none of its labels comes
  back in its column.
- Types per column, below the header: numbers (number_value) where every value of the column
  is a number ("12", "-3.5", "1e3"; with a decimal comma when the delimiter is not a comma;
  "007" is an identifier, kept as text); ISO 8601 dates and times (datetime_value); else text.
- Bounded: the cells are counted as the rows stream, against options.max_cells, in a first
  pass that keeps no row (DOCUMENT_TOO_LARGE before the sheet is built).
Ragged rows keep their own length; empty cells are left out, as in every sheet.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseOptions, ProgressFn, corrupt, safe, too_large
from parser_svc.parsers.text_charset import decode_text

DELIMITERS = (",", ";", "\t", "|")
DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}
SNIFF_CHARS = 64 * 1024
SNIFF_ROWS = 200
# Columns typed as numbers (Excel's column count); text beyond them stays text.
MAX_TYPED_COLUMNS = 16384
_NUMBER = re.compile(r"[+-]?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|[+-]?0?\.\d+")
_COMMA_NUMBER = re.compile(r"[+-]?(?:0|[1-9]\d*),\d+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?)?")


def sniff_delimiter(sample: str) -> str:
    """The delimiter whose rows agree best on a field count above one (see the docstring)."""
    best, best_score = ",", (0.0, 0)
    for delimiter in DELIMITERS:
        rows = _reader(sample, delimiter)
        counts = [len(row) for _, row in zip(range(SNIFF_ROWS), rows, strict=False) if any(row)]
        if not counts:
            continue
        common = max(set(counts), key=counts.count)
        if common < 2:
            continue
        score = (counts.count(common) / len(counts), common)
        if score > best_score:
            best, best_score = delimiter, score
    return best


def _reader(text: str, delimiter: str) -> Iterator[list[str]]:
    return csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quotechar='"')


def _comma_number(value: str) -> bool:
    """A number written with a decimal comma, or an integer."""
    if "." in value:
        return False
    return bool(_NUMBER.fullmatch(value) or _COMMA_NUMBER.fullmatch(value))


def is_date(value: str) -> bool:
    if len(value) < 10 or value[4] != "-" or not _DATE.fullmatch(value):
        return False
    try:
        dt.datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


@dataclass(slots=True)
class _Column:
    dot: bool = True  # every value a number written with a decimal point (or none)
    comma: bool = True  # every value a number written with a decimal comma (or none)
    dates: int = 0
    values: int = 0
    seen: set[str] = field(default_factory=set)  # the first values (for the header check)

    def add(self, value: str, comma_decimals: bool) -> None:
        self.values += 1
        if self.dot:
            self.dot = bool(_NUMBER.fullmatch(value))
        if self.comma:
            self.comma = comma_decimals and _comma_number(value)
        if self.dates == self.values - 1:  # every value so far a date
            self.dates += is_date(value)
        if len(self.seen) < 100:
            self.seen.add(value)

    @property
    def numeric(self) -> str:
        """ "dot", "comma" or "" (not a number column)."""
        if not self.values:
            return ""
        return "dot" if self.dot else "comma" if self.comma else ""


def _header(first: list[str], columns: dict[int, _Column]) -> bool:
    labels = [cell.strip() for cell in first]
    if not labels or any(not label for label in labels) or len(set(labels)) < len(labels):
        return False
    if any(_NUMBER.fullmatch(label) or is_date(label) for label in labels):
        return False
    typed = any(c.numeric or (c.values and c.dates == c.values) for c in columns.values())
    repeated = any(label in columns[i].seen for i, label in enumerate(labels) if i in columns)
    return typed or not repeated


def _survey(text: str, delimiter: str, limit: int) -> tuple[list[str], dict[int, _Column], int]:
    """First pass: the first row, the types below it of each column (of the first
    MAX_TYPED_COLUMNS), and the cell count (checked against `limit` as rows come)."""
    first: list[str] | None = None
    columns: dict[int, _Column] = {}
    cells = 0
    comma_decimals = delimiter != ","
    for row in _reader(text, delimiter):
        if first is None:
            if any(cell.strip() for cell in row):
                first = row
                cells += sum(1 for cell in row if cell.strip())
            continue
        for index, cell in enumerate(row):
            value = cell.strip()
            if not value:
                continue
            cells += 1
            if index < MAX_TYPED_COLUMNS:
                columns.setdefault(index, _Column()).add(value, comma_decimals)
        if cells > limit:
            raise too_large(f"the table has more than {limit} cells with values")
    return first or [], columns, cells


def _set(cell: rp.Cell, value: str, kind: str) -> None:
    if kind == "dot":
        cell.number_value = float(value)
    elif kind == "comma":
        cell.number_value = float(value.replace(",", "."))
    elif is_date(value):
        cell.datetime_value = dt.datetime.fromisoformat(value).isoformat()
        if len(value) == 10:
            cell.datetime_value = value
    else:
        cell.string_value = safe(value)


def parse_csv(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    progress(0, 1, "text")
    decoded = decode_text(data, "CSV file")
    text = decoded.text
    csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    delimiter = sniff_delimiter(text[:SNIFF_CHARS].rpartition("\n")[0] or text[:SNIFF_CHARS])
    try:
        first, columns, cells = _survey(text, delimiter, options.max_cells)
    except csv.Error as err:
        raise corrupt(f"the CSV file cannot be read: {err}") from err
    header = _header(first, columns)
    package = rp.ReadingPackage(content_type="csv")
    extra = package.metadata.extra
    extra["delimiter"] = DELIMITER_NAMES[delimiter]
    extra["header_row"] = "true" if header else "false"
    extra["charset"] = decoded.encoding
    sheet = package.sheets.add(number=1, name="Sheet1", visibility="visible")
    kinds = {index: column.numeric for index, column in columns.items()}
    in_body = False
    for number, row in enumerate(_reader(text, delimiter), start=1):
        values = [(i, cell.strip()) for i, cell in enumerate(row) if cell.strip()]
        if not values:
            continue
        out = sheet.rows.add(number=number)
        for index, value in values:
            kind = kinds.get(index, "") if in_body or not header else ""
            if not in_body and not header and not _fits(value, kind):
                kind = ""
            _set(out.cells.add(column=index + 1), value, kind)
        in_body = True
    sheet.cell_count = cells
    if not cells:
        package.warnings.append("the CSV file has no cells with values")
    progress(1, 1, "text")
    return package


def _fits(value: str, kind: str) -> bool:
    if kind == "dot":
        return bool(_NUMBER.fullmatch(value))
    if kind == "comma":
        return _comma_number(value)
    return True
