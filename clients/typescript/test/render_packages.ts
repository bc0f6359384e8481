// Renders serialized reading packages with the SDK, for tests/docparse/test_ts_render_parity.py
// (which compares the bytes with the Python SDK's renderings): `node render_packages.js DIR`
// reads every DIR/*.pb and prints one JSON object, file name -> its Markdown and HTML, with
// page furniture left out and kept.

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fromBinary } from "@bufbuild/protobuf";
import { ReadingPackageSchema, toHtml, toMarkdown } from "../src/index.js";

const folder = process.argv[2];
if (!folder) throw new Error("usage: node render_packages.js DIR");
const out: Record<string, Record<string, string>> = {};
for (const name of readdirSync(folder).filter((n) => n.endsWith(".pb"))) {
  const pkg = fromBinary(ReadingPackageSchema, readFileSync(join(folder, name)));
  out[name] = {
    markdown: toMarkdown(pkg),
    html: toHtml(pkg),
    markdown_furniture: toMarkdown(pkg, { furniture: true }),
    html_furniture: toHtml(pkg, { furniture: true }),
  };
}
process.stdout.write(JSON.stringify(out));
