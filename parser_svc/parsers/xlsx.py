"""XLSX → ReadingPackage with openpyxl in read-only mode: rows are streamed from the sheet XML,
so a 1,000,000-cell sheet is never loaded whole; the package holds each non-empty cell with its
type. Dates come out converted with the workbook's own date system (1900 or 1904).

A Strict Open XML workbook (ISO/IEC 29500 Strict namespaces) loads in openpyxl with 0 sheets;
that, and any workbook without worksheets, is a precise failure, never an empty success.
"""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from typing import Any

from docparse.reasons import ErrorReason
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import (
    ParseFailure,
    ParseOptions,
    ProgressFn,
    corrupt,
    safe,
    too_large,
)
from parser_svc.parsers.office import check_zip
from parser_svc.parsers.xlsx_merges import WorkbookMerges, open_merges

STRICT_NS = b"http://purl.oclc.org/ooxml/spreadsheetml/main"
ERRORS = frozenset({"#NULL!", "#DIV/0!", "#VALUE!", "#REF!", "#NAME?", "#NUM!", "#N/A"})


def iso(value: dt.datetime | dt.date | dt.time) -> str:
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0):
            return value.date().isoformat()
        return value.isoformat()
    return value.isoformat()


class CellBudget:
    def __init__(self, options: ParseOptions) -> None:
        self.limit = options.max_cells
        self.used = 0

    def spend(self, count: int) -> None:
        self.used += count
        if self.used > self.limit:
            raise too_large(f"the workbook has more than {self.limit} cells with values")


def set_value(cell: rp.Cell, value: Any, data_type: str = "") -> int:
    """Stores a Python cell value with its type; returns the characters of its text form."""
    if isinstance(value, bool):
        cell.bool_value = value
        return 5
    if isinstance(value, int | float):
        cell.number_value = float(value)
        return len(repr(value))
    if isinstance(value, dt.datetime | dt.date | dt.time):
        cell.datetime_value = iso(value)
        return len(cell.datetime_value)
    if isinstance(value, dt.timedelta):
        cell.number_value = value.total_seconds() / 86400
        return len(repr(cell.number_value))
    text = safe(str(value))
    if data_type == "e" or (not data_type and text in ERRORS):
        cell.error_value = text
    else:
        cell.string_value = text
    return len(text)


def parse_xlsx(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    import openpyxl  # type: ignore[import-untyped]

    check_zip(data, options, "workbook")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            workbook_xml = archive.read("xl/workbook.xml")[:4096]
    except KeyError:
        workbook_xml = b""
    except (zipfile.BadZipFile, OSError, ValueError) as err:
        raise corrupt(f"the workbook is damaged: {err}") from err
    if STRICT_NS in workbook_xml:
        raise ParseFailure(
            ErrorReason.UNSUPPORTED_FORMAT,
            "the workbook is in Strict Open XML (ISO/IEC 29500 Strict), which the XLSX reader "
            "does not read (it sees 0 sheets); save it as a regular Excel workbook",
        )
    try:
        book = openpyxl.load_workbook(
            io.BytesIO(data), read_only=True, data_only=True, keep_links=False
        )
    except Exception as err:
        raise corrupt(f"the workbook cannot be opened: {type(err).__name__}: {err}") from err
    merges = open_merges(data)
    try:
        return _read(book, progress, options, merges)
    finally:
        book.close()
        if merges is not None:
            merges.close()


def _read(
    book: Any, progress: ProgressFn, options: ParseOptions, merges: WorkbookMerges | None = None
) -> rp.ReadingPackage:
    from openpyxl.utils.datetime import CALENDAR_MAC_1904  # type: ignore[import-untyped]

    package = rp.ReadingPackage(content_type="xlsx")
    package.date_system = "1904" if book.epoch == CALENDAR_MAC_1904 else "1900"
    props = book.properties
    if props is not None:
        package.metadata.title = safe(props.title or "")
        package.metadata.author = safe(props.creator or "")
        package.metadata.subject = safe(props.subject or "")
    worksheets = [ws for ws in book.worksheets if hasattr(ws, "iter_rows")]
    if not book.sheetnames:
        raise corrupt("the workbook has no sheets")
    if not worksheets:
        raise ParseFailure(ErrorReason.UNSUPPORTED_FORMAT, "the workbook has only chart sheets")
    budget = CellBudget(options)
    total = len(worksheets)
    progress(0, total, "text")
    for number, ws in enumerate(worksheets, start=1):
        sheet = package.sheets.add(number=number, name=safe(ws.title))
        sheet.visibility = ws.sheet_state or "visible"
        count = 0
        try:
            for row in ws.iter_rows():
                cells = [c for c in row if c.value is not None]
                if not cells:
                    continue
                budget.spend(len(cells))
                out = sheet.rows.add(number=cells[0].row)
                for c in cells:
                    set_value(out.cells.add(column=c.column), c.value, c.data_type)
                count += len(cells)
        except (ParseFailure, MemoryError, SystemError):
            raise  # SystemError: an allocation in upb failed (the memory limit)
        except zipfile.BadZipFile as err:
            raise corrupt(f"sheet {ws.title!r} is damaged: {err}") from err
        except Exception as err:
            raise corrupt(
                f"sheet {ws.title!r} cannot be read: {type(err).__name__}: {err}"
            ) from err
        sheet.cell_count = count
        if merges is not None:
            sheet.merged_ranges.extend(merges.of(ws.title))
        progress(number, total, "text")
    if budget.used == 0:
        package.warnings.append("the workbook has no cells with values")
    return package
