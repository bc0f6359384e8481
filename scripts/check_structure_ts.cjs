// Lines per file and per function of TypeScript sources, for scripts/check_structure.py.
// node check_structure_ts.cjs NODE_MODULES SOURCES EXCLUDED_FOLDERS(comma-separated)
// prints [{file, lines, functions: [{name, line, lines}]}] as JSON; parses with the
// `typescript` package found in NODE_MODULES (the SDK's own, pinned by its lock file).
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const [modules, sources, excluded] = process.argv.slice(2);
const ts = require(path.join(path.resolve(modules), "typescript"));
const skip = new Set((excluded || "").split(",").filter(Boolean));

function* files(folder) {
  for (const entry of fs.readdirSync(folder, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const full = path.join(folder, entry.name);
    if (entry.isDirectory()) {
      if (!skip.has(path.relative(sources, full))) yield* files(full);
    } else if (/\.(ts|tsx|mts|cts)$/.test(entry.name) && !entry.name.endsWith(".d.ts")) {
      yield full;
    }
  }
}

function nameOf(node, source) {
  if (node.name) return node.name.getText(source);
  if (ts.isConstructorDeclaration(node)) return "constructor";
  const parent = node.parent;
  if (parent && (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))) {
    return parent.name.getText(source);
  }
  return "<anonymous>";
}

function measure(file) {
  const text = fs.readFileSync(file, "utf8");
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const functions = [];
  const lineOf = (pos) => source.getLineAndCharacterOfPosition(pos).line + 1;
  const visit = (node) => {
    if (ts.isFunctionLike(node) && node.body) {
      const first = lineOf(node.getStart(source));
      const last = lineOf(node.getEnd());
      functions.push({ name: nameOf(node, source), line: first, lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  const lines = text.length === 0 ? 0 : text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
  return { file, lines, functions };
}

process.stdout.write(JSON.stringify([...files(sources)].map(measure)));
