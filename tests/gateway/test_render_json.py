"""The HTTP API's JSON of a reading package is rendered piece by piece (docparse.render.iter_json)
so that a big workbook does not cost its renderer 40 times its size: it must say exactly what
json_format.MessageToJson says, for every kind of content."""

from __future__ import annotations

import json

from google.protobuf import json_format

from docparse.render import render, to_json
from docparse.v1 import reading_package_pb2 as rp


def reference(package: rp.ReadingPackage) -> object:
    return json.loads(
        json_format.MessageToJson(
            package, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
    )


def full_package() -> rp.ReadingPackage:
    package = rp.ReadingPackage(warnings=["w1", 'quote " and \u2028 line separator'])
    package.metadata.title = "T\u00edtulo"
    page = package.pages.add(number=1, width=612.5, height=792, text="caf\u00e9\n\ttab")
    page.blocks.add(text="block", bbox=rp.BoundingBox(x0=1, y0=2, x1=3.25, y1=4))
    page.tables.add().rows.add(cells=["a", "", "c"])
    page.images.add()
    package.pages.add()  # an empty page: every scalar field present, empty lists
    sheet = package.sheets.add(name="S", cell_count=3)
    row = sheet.rows.add(number=1)
    row.cells.add(column=1, string_value="x")
    row.cells.add(column=2, number_value=2**53 + 0.5)
    row.cells.add(column=3, bool_value=False)
    sheet.rows.add(number=2)
    package.slides.add(number=1, title="slide", notes="n").comments.add()
    package.assets.add(asset_id="0" * 32 + ".png", size_bytes=2**40)
    return package


def test_pieces_say_what_message_to_json_says() -> None:
    for package in (rp.ReadingPackage(), full_package()):
        assert json.loads(to_json(package)) == reference(package)
        assert json.loads(render(package.SerializeToString(), "json")) == reference(package)
