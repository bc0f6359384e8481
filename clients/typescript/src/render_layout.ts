// What the Markdown and HTML renderings share, ported from the Python SDK's
// docparse/render_layout.py so that both SDKs print the same bytes for the same package: a
// page's blocks and tables in reading order (each table once, where it stands), tables
// continued across pages joined, merged cells, heading levels and list markers, page furniture
// left out unless kept. Python's string rules (what str.split, strip and splitlines take as
// whitespace and line breaks, repr of a float) are spelled out here, not JavaScript's.

import type {
  Cell,
  ReadingPackage,
  Sheet,
  Table,
  TextBlock,
} from "./gen/docparse/v1/reading_package_pb.js";

export const FURNITURE: ReadonlySet<string> = new Set(["header", "footer"]);
export const HEADINGS: ReadonlySet<string> = new Set(["title", "heading"]);
// A list marker Markdown and HTML keep as the document writes it: a number or a letter, then
// "." or ")".
export const COUNTED_MARKER = /^([0-9]{1,9}|[A-Za-z])([.)])$/;
// A PDF table with a cell longer than this holds paragraphs: its text stays text.
const PROSE_CELL_CHARS = 400;

// Python's str.isspace (str.split, strip): ASCII whitespace, the separators \x1c-\x1f, NEL,
// and Unicode's space separators; JavaScript's \s differs (it takes U+FEFF, not \x1c-\x1f).
const SPACES = new Set([
  0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001,
  0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f,
  0x205f, 0x3000,
]);
// Python's str.splitlines: \r\n counts as one break.
const LINE_BREAKS = new Set([0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029]);

const isSpace = (text: string, i: number): boolean => SPACES.has(text.charCodeAt(i));

export function strip(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && isSpace(text, start)) start++;
  while (end > start && isSpace(text, end - 1)) end--;
  return text.slice(start, end);
}

export function lstrip(text: string): string {
  let start = 0;
  while (start < text.length && isSpace(text, start)) start++;
  return text.slice(start);
}

/** Python's `" ".join(text.split())`. */
export function oneLine(text: string): string {
  const words: string[] = [];
  let start = -1;
  for (let i = 0; i <= text.length; i++) {
    const space = i === text.length || isSpace(text, i);
    if (space && start >= 0) {
      words.push(text.slice(start, i));
      start = -1;
    } else if (!space && start < 0) {
      start = i;
    }
  }
  return words.join(" ");
}

/** Python's str.splitlines(). */
export function splitLines(text: string): string[] {
  const lines: string[] = [];
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (!LINE_BREAKS.has(code)) continue;
    lines.push(text.slice(start, i));
    if (code === 0x0d && text.charCodeAt(i + 1) === 0x0a) i++;
    start = i + 1;
  }
  if (start < text.length) lines.push(text.slice(start));
  return lines;
}

/** Python's len() counts code points, not UTF-16 units: whether `text` has more than `n`. */
function longerThan(text: string, n: number): boolean {
  if (text.length <= n) return false;
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0xdc00 || code > 0xdfff) count++; // a low surrogate ends a pair counted once
    if (count > n) return true;
  }
  return false;
}

/** Python's str(float) (repr): the shortest digits, in exponent form below 1e-4. */
export function pythonFloat(value: number): string {
  if (Number.isNaN(value)) return "nan";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  if (Number.isInteger(value)) return BigInt(value).toString(); // str(int(value))
  if (Math.abs(value) >= 1e-4) return String(value); // the same digits, fixed, as repr
  const [mantissa, exponent] = value.toExponential().split("e") as [string, string];
  const power = Number(exponent);
  const digits = String(Math.abs(power)).padStart(2, "0");
  return `${mantissa}e${power < 0 ? "-" : "+"}${digits}`;
}

export function cellText(cell: Cell): string {
  const value = cell.value;
  switch (value.case) {
    case undefined:
      return "";
    case "boolValue":
      return value.value ? "TRUE" : "FALSE";
    case "numberValue":
      return pythonFloat(value.value);
    default:
      return value.value;
  }
}

const A1_CELL = /^\$?([A-Z]{1,3})\$?([0-9]{1,7})$/;

function column(letters: string): number {
  let number = 0;
  for (const letter of letters) number = number * 26 + letter.charCodeAt(0) - 64;
  return number;
}

/** An A1 range ("B3:D5", "$B$3:$D$5", or one cell "B3") as [top row, left column, bottom
 * row, right column], 1-based; undefined for what is no range. Corners given the other way
 * round ("D5:B3") name the same range. */
export function mergedRange(reference: string): [number, number, number, number] | undefined {
  const upper = strip(reference).toUpperCase();
  const colon = upper.indexOf(":");
  const first = colon < 0 ? upper : upper.slice(0, colon);
  const last = colon < 0 ? "" : upper.slice(colon + 1);
  const start = A1_CELL.exec(first);
  const end = A1_CELL.exec(last || first);
  if (start === null || end === null) return undefined;
  const [top, bottom] = [Number(start[2]), Number(end[2])].sort((a, b) => a - b) as [
    number,
    number,
  ];
  const [left, right] = [column(start[1]!), column(end[1]!)].sort((a, b) => a - b) as [
    number,
    number,
  ];
  return [top, left, bottom, right];
}

export function sheetRows(sheet: Sheet): string[][] {
  let width = 0;
  for (const row of sheet.rows) for (const cell of row.cells) width = Math.max(width, cell.column);
  return sheet.rows.map((row) => {
    const values: string[] = new Array(width).fill("");
    for (const cell of row.cells) {
      const index = cell.column - 1 < 0 ? width - 1 : cell.column - 1; // Python's values[-1]
      if (index < 0) throw new RangeError("list assignment index out of range");
      values[index] = cellText(cell);
    }
    return values;
  });
}

export interface Span {
  column: number;
  rowSpan: number;
  colSpan: number;
}

export interface Row {
  cells: string[];
  spans: Span[];
}

/** A table as rendered: its rows (with those of the tables continuing it on later pages),
 * its header rows and caption. */
export interface Grid {
  rows: Row[];
  headerRows: number;
  caption: string;
  texts: string[][];
}

export function makeGrid(rows: Row[], headerRows: number, caption: string): Grid {
  return { rows: [...rows], headerRows, caption, texts: rows.map((row) => [...row.cells]) };
}

/** `out.push(...items)` without spreading: a document's parts can be more than the call
 * stack takes as arguments. */
export function append<T>(out: T[], items: readonly T[]): void {
  for (const item of items) out.push(item);
}

function extend(grid: Grid, table: Table): void {
  append(grid.rows, table.rows);
  append(
    grid.texts,
    table.rows.map((row) => [...row.cells]),
  );
}

/** Each page's tables as grids; a table that continues the last table of the previous page
 * is appended to that table's grid and is undefined in its own page's list. */
export function joinedTables(tablesByPage: Table[][]): (Grid | undefined)[][] {
  const out: (Grid | undefined)[][] = [];
  let last: Grid | undefined;
  for (const tables of tablesByPage) {
    const grids: (Grid | undefined)[] = [];
    let previous = last;
    last = undefined;
    for (const table of tables) {
      if (table.continuesPrevious && previous !== undefined) {
        extend(previous, table);
        grids.push(undefined);
        last = previous;
        continue;
      }
      const grid = makeGrid(table.rows, table.headerRows, table.caption);
      grids.push(grid);
      last = previous = grid;
    }
    out.push(grids);
  }
  return out;
}

/** The merged cells: "row,column" of each top-left cell -> [rows, columns] it covers, clipped
 * to the grid (and, with `head`, a header cell to the header rows); and the cells they cover
 * besides their top-left one. */
export interface Spans {
  starts: Map<string, [number, number]>;
  covered: Set<string>;
}

export function spans(grid: Grid, head = 0): Spans {
  const starts = new Map<string, [number, number]>();
  const covered = new Set<string>();
  const height = grid.texts.length;
  grid.rows.forEach((row, r) => {
    const width = grid.texts[r]!.length;
    const bottom = r < head ? head : height;
    for (const span of row.spans) {
      const c = span.column;
      if (c >= width || covered.has(`${r},${c}`)) continue;
      const rows = Math.max(1, Math.min(span.rowSpan, bottom - r));
      const columns = Math.max(1, Math.min(span.colSpan, width - c));
      if (rows === 1 && columns === 1) continue;
      starts.set(`${r},${c}`, [rows, columns]);
      for (let dr = 0; dr < rows; dr++) {
        for (let dc = 0; dc < columns; dc++) if (dr || dc) covered.add(`${r + dr},${c + dc}`);
      }
    }
  });
  return { starts, covered };
}

/** A heading block's level, 1-6: a "title" without one is 1, a "heading" without one 2. */
export function headingLevel(block: TextBlock): number {
  const fallback = block.role === "title" ? 1 : 2;
  return Math.max(1, Math.min(6, block.level || fallback));
}

export const listLevel = (block: TextBlock): number => Math.max(1, block.level);

/** A list item's text without the marker, when the text starts with it. */
export function itemText(block: TextBlock): string {
  const marker = strip(block.marker);
  if (marker && block.text.startsWith(marker)) return lstrip(block.text.slice(marker.length));
  return block.text;
}

/** The value an ordered marker counts ("3." -> 3, "c)" -> 3), undefined if it does not. */
export function markerNumber(marker: string): number | undefined {
  const found = COUNTED_MARKER.exec(strip(marker));
  if (found === null) return undefined;
  const mark = found[1]!;
  return /^[0-9]/.test(mark) ? Number(mark) : mark.toLowerCase().charCodeAt(0) - 96;
}

function blockInTable(block: TextBlock, table: Table): boolean {
  const inner = block.bbox;
  const box = table.bbox;
  if (inner === undefined || box === undefined) return false;
  if (table.rows.some((row) => row.cells.some((cell) => longerThan(cell, PROSE_CELL_CHARS)))) {
    return false;
  }
  return (
    inner.x0 >= box.x0 - 1 &&
    inner.y0 >= box.y0 - 1 &&
    inner.x1 <= box.x1 + 1 &&
    inner.y1 <= box.y1 + 1
  );
}

export type Item = TextBlock | Grid;

export const isGrid = (item: Item): item is Grid => "texts" in item;

const hasText = (table: Table): boolean => table.rows.some((row) => row.cells.some(Boolean));

function leftOut(block: TextBlock, captions: Set<string>, furniture: boolean): boolean {
  if (FURNITURE.has(block.role)) return !furniture;
  return block.role === "caption" && captions.has(oneLine(block.text));
}

/** A page's or slide's blocks in reading order, each table once where it stands (a "table"
 * block, or the blocks inside a table's box); see docparse/render_layout.py's page_items.
 * Undefined when the page is plain text (no roles, no tables). */
export function pageItems(
  blocks: TextBlock[],
  tables: Table[],
  grids: (Grid | undefined)[],
  furniture: boolean,
): Item[] | undefined {
  if (!tables.length && !blocks.some((block) => block.role)) return undefined;
  const withText = tables.flatMap((table, i) => (hasText(table) ? [i] : []));
  let nextWithText = 0;
  const byGeometry = !blocks.some((block) => block.role === "table");
  const captions = new Set(grids.flatMap((g) => (g?.caption ? [oneLine(g.caption)] : [])));
  const out: Item[] = [];
  const placed = new Set<number>();
  const place = (index: number): void => {
    if (placed.has(index)) return;
    placed.add(index);
    const grid = grids[index];
    if (grid !== undefined) out.push(grid);
  };
  for (const block of blocks) {
    if (block.role === "table" && nextWithText < withText.length) {
      place(withText[nextWithText++]!);
      continue;
    }
    const boxed = byGeometry ? tables.findIndex((table) => blockInTable(block, table)) : -1;
    if (boxed >= 0) place(boxed);
    else if (!leftOut(block, captions, furniture)) out.push(block);
  }
  for (let index = 0; index < tables.length; index++) place(index);
  return out;
}

/** Whether the document has a title or heading of its own (a block, a slide's title). */
export function hasHeadings(pkg: ReadingPackage): boolean {
  const blocks = [...pkg.pages.flatMap((p) => p.blocks), ...pkg.slides.flatMap((s) => s.blocks)];
  return blocks.some((b) => HEADINGS.has(b.role)) || pkg.slides.some((s) => s.title);
}

/** The page's text, without its furniture blocks unless `furniture`. */
export function pageText(page: { text: string; blocks: TextBlock[] }, furniture: boolean): string {
  if (furniture || !page.blocks.some((block) => FURNITURE.has(block.role))) return page.text;
  return page.blocks
    .filter((block) => !FURNITURE.has(block.role))
    .map((block) => block.text)
    .join("\n\n");
}
