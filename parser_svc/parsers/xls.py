"""XLS (Excel 97-2003, BIFF) → ReadingPackage with xlrd. Encrypted workbooks are decrypted
with msoffcrypto first. Dates use the workbook's datemode (1900 or 1904)."""

from __future__ import annotations

from typing import Any

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseOptions, ProgressFn, corrupt, safe
from parser_svc.parsers.office import decrypt, is_encrypted
from parser_svc.parsers.xls_merges import worksheet_merges
from parser_svc.parsers.xlsx import CellBudget, iso, set_value


def parse_xls(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    import xlrd  # type: ignore[import-untyped]

    package = rp.ReadingPackage(content_type="xls")
    if is_encrypted(data):
        data = decrypt(data, options.password, "workbook")
        package.decrypted = True
    try:
        book = xlrd.open_workbook(file_contents=data, on_demand=True, logfile=_Null())
    except xlrd.XLRDError as err:
        if "encrypt" in str(err).lower():
            data = decrypt(data, options.password, "workbook")
            package.decrypted = True
            book = xlrd.open_workbook(file_contents=data, on_demand=True, logfile=_Null())
        else:
            raise corrupt(f"the workbook cannot be opened: {err}") from err
    except Exception as err:
        raise corrupt(f"the workbook cannot be opened: {type(err).__name__}: {err}") from err
    try:
        return _read(book, package, progress, options)
    finally:
        book.release_resources()


class _Null:
    def write(self, _text: str) -> int:
        return 0


def _read(
    book: Any, package: rp.ReadingPackage, progress: ProgressFn, options: ParseOptions
) -> rp.ReadingPackage:
    import xlrd

    package.date_system = "1904" if book.datemode == 1 else "1900"
    if book.user_name:
        package.metadata.extra["last_saved_by"] = safe(str(book.user_name))
    total = book.nsheets
    if total == 0:
        raise corrupt("the workbook has no sheets")
    budget = CellBudget(options)
    merges = worksheet_merges(getattr(book, "mem", b"") or b"", getattr(book, "base", 0) or 0)
    progress(0, total, "text")
    for index in range(total):
        try:
            ws = book.sheet_by_index(index)
        except Exception as err:
            raise corrupt(f"sheet {index + 1} cannot be read: {err}") from err
        sheet = package.sheets.add(number=index + 1, name=safe(ws.name))
        sheet.visibility = {0: "visible", 1: "hidden", 2: "veryHidden"}.get(
            ws.visibility, "visible"
        )
        count = 0
        for r in range(ws.nrows):
            kinds = ws.row_types(r)
            values = ws.row_values(r)
            filled = [
                c
                for c, kind in enumerate(kinds)
                if kind not in (xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK)
            ]
            if not filled:
                continue
            budget.spend(len(filled))
            row = sheet.rows.add(number=r + 1)
            for c in filled:
                cell = row.cells.add(column=c + 1)
                kind, value = kinds[c], values[c]
                if kind == xlrd.XL_CELL_DATE:
                    try:
                        cell.datetime_value = iso(
                            xlrd.xldate.xldate_as_datetime(value, book.datemode)
                        )
                    except (xlrd.xldate.XLDateError, ValueError, OverflowError):
                        cell.number_value = float(value)
                elif kind == xlrd.XL_CELL_BOOLEAN:
                    cell.bool_value = bool(value)
                elif kind == xlrd.XL_CELL_ERROR:
                    cell.error_value = xlrd.error_text_from_code.get(value, f"#ERR{value}")
                else:
                    set_value(cell, value, "s" if kind == xlrd.XL_CELL_TEXT else "")
            count += len(filled)
        sheet.cell_count = count
        sheet.merged_ranges.extend(merges[index] if index < len(merges) else [])
        book.unload_sheet(index)
        progress(index + 1, total, "text")
    if budget.used == 0:
        package.warnings.append("the workbook has no cells with values")
    return package
