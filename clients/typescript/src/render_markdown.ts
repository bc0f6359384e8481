// A reading package as Markdown, byte for byte what the Python SDK's
// docparse/render_markdown.py prints (and the gateway serves as ?format=markdown): headings at
// their level, lists nested with their markers, pipe tables (HTML tables where merged cells or
// several header rows need them), page and slide breaks as comments, page furniture left out
// unless kept.

import type {
  ReadingPackage,
  Sheet,
  Table,
  TextBlock,
} from "./gen/docparse/v1/reading_package_pb.js";
import { attachmentNote, attachmentTitle, headerFields, isEmail } from "./render_email.js";
import { htmlTable, type RenderOptions, sheetGrid } from "./render_html.js";
import {
  append,
  COUNTED_MARKER,
  type Grid,
  HEADINGS,
  hasHeadings,
  headingLevel,
  isGrid,
  itemText,
  joinedTables,
  listLevel,
  oneLine,
  pageItems,
  pageText,
  sheetRows,
  spans,
  strip,
} from "./render_layout.js";

// Formats without pages of their own: the package holds them as one page.
const FLOWING = ["docx", "doc", "odt", "rtf", "html", "markdown", "text", "eml", "msg"];

/** Code as a fenced block, its fence longer than any run of backticks inside. */
export function fenced(text: string): string {
  let longest = 0;
  let run = 0;
  for (const char of text) {
    run = char === "`" ? run + 1 : 0;
    longest = Math.max(longest, run);
  }
  const fence = "`".repeat(Math.max(3, longest + 1));
  return `${fence}\n${text}\n${fence}`;
}

/** A block quote: every line behind '> ' ('>' alone on an empty line). */
export function quoted(text: string): string {
  return text
    .split("\n")
    .map((line) => (strip(line) ? `> ${line}` : ">"))
    .join("\n");
}

const row = (cells: string[]): string =>
  `| ${cells.map((c) => c.replaceAll("|", "\\|").replaceAll("\n", " ")).join(" | ")} |`;

/** Rows as a pipe table, the first row its header (Markdown requires one). */
export function markdownTable(rows: string[][]): string {
  if (!rows.length) return "";
  const width = rows.reduce((most, r) => Math.max(most, r.length), 0);
  const padded = rows.map((r) => [...r, ...new Array<string>(width - r.length).fill("")]);
  const lines = [row(padded[0]!), `|${" --- |".repeat(width)}`];
  append(lines, padded.slice(1).map(row));
  return lines.join("\n");
}

/** A pipe table where Markdown can say it (one header row, no merged cells), else an HTML
 * table; the caption as a line above it. */
function table(grid: Grid): string {
  const merged = spans(grid).starts.size > 0;
  const text =
    merged || grid.headerRows > 1 ? htmlTable({ ...grid, caption: "" }) : markdownTable(grid.texts);
  return grid.caption && text ? `${oneLine(grid.caption)}\n\n${text}` : text;
}

/** A worksheet as a table: HTML when it has merged ranges, else a pipe table. */
function sheetTable(sheet: Sheet): string {
  if (!sheet.mergedRanges.length) return markdownTable(sheetRows(sheet));
  const grid = sheetGrid(sheet);
  if (spans(grid).starts.size) return htmlTable({ ...grid, caption: "" });
  return markdownTable(grid.texts);
}

function listLine(block: TextBlock): string {
  const indent = "  ".repeat(listLevel(block) - 1);
  const marker = strip(block.marker);
  const mark = block.ordered ? (COUNTED_MARKER.test(marker) ? marker : "1.") : "-";
  const text = strip(itemText(block)).replaceAll("\n", `\n${indent}${" ".repeat(mark.length + 1)}`);
  return `${indent}${mark} ${text}`;
}

/** A page's or slide's items as Markdown parts: consecutive list items make one list.
 * `already`: a title printed above (the first block repeating it is left out). */
function section(
  blocks: TextBlock[],
  tables: Table[],
  grids: (Grid | undefined)[],
  text: string,
  furniture: boolean,
  already = "",
): string[] {
  const items = pageItems(blocks, tables, grids, furniture);
  if (items === undefined) return [text]; // plain text (OCR lines stay lines of one paragraph)
  const out: string[] = [];
  let run: string[] = [];
  for (const item of items) {
    if (!isGrid(item) && item.role === "list_item") {
      run.push(listLine(item));
      continue;
    }
    if (run.length) {
      out.push(run.join("\n"));
      run = [];
    }
    if (isGrid(item)) {
      out.push(table(item));
      continue;
    }
    const line = oneLine(item.text);
    if (already && line === oneLine(already)) {
      already = "";
    } else if (HEADINGS.has(item.role) && line) {
      out.push(`${"#".repeat(headingLevel(item))} ${line}`);
    } else if (item.role === "code") {
      out.push(fenced(item.text));
    } else if (item.role === "quote") {
      out.push(quoted(item.text));
    } else {
      out.push(item.text);
    }
  }
  if (run.length) out.push(run.join("\n"));
  return out;
}

/** Markdown of each page (or the Word document's body), slide and sheet, as
 * docparse.render_markdown.to_markdown prints it. The metadata title is a `#` heading only
 * when the document has no title or heading of its own. An e-mail: its subject and header
 * lines above the body, then each attachment under "## Attachment N: name". */
export function toMarkdown(pkg: ReadingPackage, options: RenderOptions = {}): string {
  const furniture = options.furniture ?? false;
  const out: string[] = [];
  const title = pkg.metadata?.title ?? "";
  if (isEmail(pkg)) append(out, emailHead(pkg));
  else if (title && !hasHeadings(pkg)) out.push(`# ${oneLine(title)}`);
  // A Word document is one page whose number means nothing: no page comment.
  const unpaged = FLOWING.includes(pkg.contentType) && pkg.pages.length === 1;
  const pageGrids = joinedTables(pkg.pages.map((page) => page.tables));
  pkg.pages.forEach((page, i) => {
    if (!unpaged) out.push(`<!-- page ${page.number} -->`);
    const text = pageText(page, furniture);
    append(out, section(page.blocks, page.tables, pageGrids[i]!, text, furniture));
  });
  const slideGrids = joinedTables(pkg.slides.map((slide) => slide.tables));
  pkg.slides.forEach((slide, i) => {
    out.push(`<!-- slide ${slide.number} -->`);
    const name = oneLine(slide.title);
    const headed = slide.blocks.some((b) => HEADINGS.has(b.role) && oneLine(b.text) === name);
    if (name && !headed) out.push(`# ${name}`);
    const already = headed ? "" : name;
    append(
      out,
      section(slide.blocks, slide.tables, slideGrids[i]!, slide.text, furniture, already),
    );
    if (slide.notes) out.push(`> Notes: ${slide.notes}`);
  });
  for (const sheet of pkg.sheets) out.push(`## Sheet ${sheet.name}`, sheetTable(sheet));
  for (const attachment of pkg.attachments) {
    out.push(`## ${attachmentTitle(attachment)}`);
    out.push(
      attachment.package === undefined
        ? attachmentNote(attachment)
        : toMarkdown(attachment.package, options).replace(/\n+$/, ""),
    );
  }
  return `${out.filter(Boolean).join("\n\n")}\n`;
}

/** An e-mail's subject as its heading, then its header lines (hard line breaks). */
function emailHead(pkg: ReadingPackage): string[] {
  const subject = oneLine(pkg.email?.subject ?? "");
  const lines = headerFields(pkg, false).map(([name, value]) => `**${name}:** ${value}`);
  return [subject ? `# ${subject}` : "", lines.join("  \n")];
}
