// toMarkdown and toHtml: the structure of a reading package printed as the Python SDK prints it
// (tests/docparse/test_ts_render_parity.py compares the bytes of both over many packages and
// the corpus). `npm test` runs this file.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import {
  type ReadingPackage,
  ReadingPackageSchema,
  type TextBlock,
  TextBlockSchema,
  toHtml,
  toMarkdown,
} from "../src/index.js";
import { oneLine, pythonFloat, splitLines, strip } from "../src/render_layout.js";

const block = (text: string, role = "", level = 0, marker = "", ordered = false): TextBlock =>
  create(TextBlockSchema, { text, role, level, marker, ordered });

function report(): ReadingPackage {
  const blocks = [
    block("Quarterly", "header"),
    block("Field guide", "title"),
    block("Birds", "heading", 2),
    block("Owls", "list_item", 1, "•"),
    block("3. Barn owl", "list_item", 2, "3.", true),
    block("Wrens", "list_item", 1, "•"),
    block("After <the> list."),
  ];
  const rows = [
    { cells: ["Region", "Sales", "Sales"], spans: [{ column: 1, rowSpan: 1, colSpan: 2 }] },
    { cells: ["North", "1", "2"], spans: [] },
  ];
  return create(ReadingPackageSchema, {
    contentType: "pdf",
    pages: [{ number: 1, blocks, tables: [{ rows, headerRows: 1 }], text: "" }],
  });
}

describe("toMarkdown", () => {
  it("prints headings, nested lists and a merged-cell table as HTML, furniture left out", () => {
    assert.equal(
      toMarkdown(report()),
      `${[
        "<!-- page 1 -->",
        "# Field guide",
        "## Birds",
        "- Owls\n  3. Barn owl\n- Wrens",
        "After <the> list.",
        '<table>\n<thead>\n<tr><th>Region</th><th colspan="2">Sales</th></tr>\n</thead>\n' +
          "<tbody>\n<tr><td>North</td><td>1</td><td>2</td></tr>\n</tbody>\n</table>",
      ].join("\n\n")}\n`,
    );
    assert.match(toMarkdown(report(), { furniture: true }), /^<!-- page 1 -->\n\nQuarterly\n/);
  });
});

describe("toHtml", () => {
  it("nests lists inside their items and escapes every text", () => {
    const html = toHtml(report());
    assert.ok(html.startsWith('<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n'));
    assert.ok(html.includes("<title>Field guide</title>"));
    assert.ok(
      html.includes('<ul><li>Owls<ol><li value="3">Barn owl</li></ol></li><li>Wrens</li></ul>'),
    );
    assert.ok(html.includes("<p>After &lt;the&gt; list.</p>"));
    assert.ok(!html.includes("Quarterly"));
    assert.ok(toHtml(report(), { furniture: true }).includes("<header><p>Quarterly</p></header>"));
  });
});

describe("Python's string rules", () => {
  it("formats floats as repr does", () => {
    assert.deepEqual(
      [1e-5, 1.5e-7, 0.0001, 2.5, 1e20, -0, Number.NaN, -Infinity, 0.1 + 0.2].map(pythonFloat),
      [
        "1e-05",
        "1.5e-07",
        "0.0001",
        "2.5",
        "100000000000000000000",
        "0",
        "nan",
        "-inf",
        "0.30000000000000004",
      ],
    );
  });

  it("takes str.isspace's whitespace and splitlines' line breaks", () => {
    assert.equal(oneLine("\u00a0a\x1cb\u3000 c\ufeff "), "a b c\ufeff");
    assert.equal(strip("\x85 x \u2028"), "x");
    assert.deepEqual(splitLines("a\r\nb\x0bc\x85d\n"), ["a", "b", "c", "d"]);
    assert.deepEqual(splitLines("\n"), [""]);
  });
});
