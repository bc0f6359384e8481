"""What a careful reader sees in some public documents of the shared corpus (../shared/corpus,
SOURCES.tsv names where each comes from), written down by hand, for test_corpus_structure.py.

How the facts were checked: every PDF page named below was rendered with pymupdf
(`page.get_pixmap(dpi=60)`) and looked at, and its text read with `page.get_text()`; the
Word and PowerPoint files were read with python-docx and from their XML (numbering.xml for
list markers, the slide's `a:buChar` / `a:buAutoNum`). Only facts docparse gets right are
pinned: what it gets wrong on these documents is listed in bench/README.md ("Public documents")
and not asserted here, so that the test passes and is never xfail.

Matching (test_corpus_structure.py): texts compare with whitespace collapsed, case folded and
Markdown emphasis and escapes dropped; a heading, list item or block *starts with* the text
given; tables compare cell for cell.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TableFacts:
    header: tuple[str, ...]  # the header row, cell for cell
    body_rows: int  # rows under the header
    row: tuple[str, ...] = ()  # one of the body rows, cell for cell
    caption: str = ""  # the block right before the table starts with it


@dataclass(frozen=True)
class DocumentFacts:
    path: str  # under the corpus
    pages: int  # pages (slides) of the package
    title: str = ""  # the level-1 heading the document starts with
    # (level, text) Markdown headings, in this order (others may stand between them)
    headings: tuple[tuple[int, str], ...] = ()
    no_headings: bool = False  # the document has no heading at all
    # (nesting depth, Markdown marker, text) list items, in this order
    items: tuple[tuple[int, str, str], ...] = ()
    no_items: bool = False
    tables: tuple[TableFacts, ...] = ()  # each once, in this order
    table_count: int | None = None  # tables in the Markdown, when every one is known
    no_tables_on: tuple[int, ...] = ()  # pages holding no table (displayed maths, figures)
    order: tuple[str, ...] = ()  # starts of blocks, in reading order
    left_out: tuple[str, ...] = ()  # page numbers, running heads and feet: no block is one
    kept: tuple[str, ...] = ()  # text that stays in the Markdown (maths not lost to a table)


DOCUMENTS: tuple[DocumentFacts, ...] = (
    # Looked at pages 1-3. Page 1: a centred title, author and date, an "Abstract" heading,
    # then two columns of lorem ipsum; page 2 continues both columns; page 3 holds one
    # booktabs table (caption above, rules above and under the header and under the last
    # row, five countries) and nothing else. A page number centred at the foot of each page,
    # a sixth of the page up from the edge (LaTeX's plain style).
    DocumentFacts(
        path="text_pdf/multicolumn.pdf",
        pages=3,
        title="Two-Column Document with Lorem Ipsum",
        headings=((1, "Two-Column Document with Lorem Ipsum"), (2, "Abstract")),
        no_items=True,
        tables=(
            TableFacts(
                header=(
                    "Country",
                    "Population (millions)",
                    "Area (km2)",
                    "Capital",
                    "Official Language",
                ),
                body_rows=5,
                row=("Belgium", "11.5", "30,689", "Brussels", "Dutch, French, German"),
                caption="Table 1: EU Countries Information",
            ),
        ),
        table_count=1,
        order=(
            "This is a sample document with two columns",
            "Lorem ipsum dolor sit amet, consectetuer adip-",
            "Nam dui ligula, fringilla a, euismod sodales",
            "Nulla malesuada porttitor diam.",
            "pellentesque ante. Phasellus adipiscing",  # the right column, after the left
            "Quisque ullamcorper placerat ipsum.",
            "Fusce mauris.",
            "lacus vel est. Curabitur consectetuer.",  # page 2, left column
            "Suspendisse vel felis.",
            "luctus et ultrices posuere cubilia Curae",  # page 2, right column
            "Table 1: EU Countries Information",
        ),
        left_out=("1", "2", "3"),
    ),
    # Looked at pages 1 and 4: one paragraph of blind text ("Hello, here is some text without
    # a meaning...") running over four pages, no heading, no list, no table; a page number
    # centred at each foot.
    DocumentFacts(
        path="text_pdf/pdflatex-4-pages.pdf",
        pages=4,
        no_headings=True,
        no_items=True,
        table_count=0,
        order=("Hello, here is some text without a meaning.",),
        left_out=("1", "2", "3", "4"),
    ),
    # Looked at pages 1, 2, 3, 6 and 12; the section headings and their numbering read from
    # the text of every page. A two-column ACM paper: title over two lines, authors and
    # affiliations centred across the page, then "Abstract" heading the left column;
    # numbered sections ("1. Introduction", bold) and subsections ("3.1 Traces"). Page 1
    # reads the left column (abstract, categories, general terms, keywords, introduction)
    # before the right. Page 2: three bulleted contributions. Page 12: Figure 13, a table of
    # the 26 SunSpider benchmarks under a header row (the first header cell empty).
    DocumentFacts(
        path="text_pdf/tracemonkey.pdf",
        pages=14,
        headings=(
            (2, "Abstract"),
            (2, "1. Introduction"),
            (2, "2. Overview: Example Tracing Run"),
            (2, "3. Trace Trees"),
            (3, "3.1 Traces"),
            (3, "3.2 Trace Trees"),
            (3, "3.3 Blacklisting"),
            (2, "4. Nested Trace Tree Formation"),
            (3, "4.1 Nesting Algorithm"),
            (3, "4.2 Blacklisting with Nesting"),
            (2, "5. Trace Tree Optimization"),
            (3, "5.1 Optimizations"),
            (3, "5.2 Register Allocation"),
            (2, "6. Implementation"),
            (3, "6.1 Calling Compiled Traces"),
            (3, "6.2 Trace Stitching"),
            (3, "6.3 Trace Recording"),
            (3, "6.4 Preemption"),
            (3, "6.5 Calling External Functions"),
            (3, "6.6 Correctness"),
            (2, "7. Evaluation"),
            (2, "8. Related Work"),
            (2, "9. Conclusions"),
            (2, "10. Future Work"),
            (2, "Acknowledgments"),
            (2, "References"),
        ),
        items=(
            (1, "-", "We explain an algorithm for dynamically forming trace trees"),
            (1, "-", "We explain how to speculatively generate efficient type-specialized"),
            (1, "-", "We validate our tracing techniques in an implementation"),
        ),
        tables=(
            TableFacts(
                header=(
                    "",
                    "Loops",
                    "Trees",
                    "Traces",
                    "Aborts",
                    "Flushes",
                    "Trees/Loop",
                    "Traces/Tree",
                    "Traces/Loop",
                    "Speedup",
                ),
                body_rows=26,
                row=("3d-cube", "25", "27", "29", "3", "0", "1.1", "1.1", "1.2", "2.20x"),
            ),
        ),
        order=(
            "Abstract",
            "Dynamic languages such as JavaScript are more difficult",
            "Categories and Subject Descriptors",
            "General Terms",
            "Keywords",
            "1. Introduction",
            "Dynamic languages such as JavaScript, Python, and Ruby",
            "and is used for the application logic of browser-based",  # right column
            "Compilers for statically typed languages rely on type",
            "We present a trace-based compilation technique",
            "Unlike method-based dynamic compilers",
            "Each compiled trace covers one path",
            "Hence, recording and compiling a trace speculates",  # page 2
        ),
    ),
    # Looked at pages 1, 7, 9 and 10. An IEEE-style two-column paper. Page 1 reads the
    # abstract, keywords and the introduction's first paragraphs down the left column, then
    # the right column. Page 9: "Table 1" comparing five steering-arm designs, a header row
    # of the five names over an empty corner cell, five rows.
    DocumentFacts(
        path="text_pdf/testJournalParser.pdf",
        pages=10,
        tables=(
            TableFacts(
                header=("", "NHG", "STRING", "SESat", "String-Cluster", "SESATC"),
                body_rows=5,
                row=("Reconfigurable", "YES", "NO", "NO", "YES", "YES"),
            ),
        ),
        order=(
            "Abstract— In this paper we present control strategies",
            "Keywords:",
            "Microscale robotic systems have many applications",
            "controlled by a single global control signal), makes the",  # right column
            "Controlling a distributed system of many devices",
        ),
    ),
    # Looked at pages 1, 5, 11, 17, 21, 41 and 50; chapter and section titles read from the
    # table of contents and checked where they start. A German maths lecture script (A4,
    # one column): chapters ("1 Topologische Grundbegriffe") over numbered sections ("1.1
    # Topologische Räume"); a running head on every page of the chapters: the page number
    # and the section in capitals ("14" left, "1.4. ZUSAMMENHANG" right). The pages named
    # in no_tables_on hold displayed maths only (aligned equations with underbraces, case
    # distinctions, matrices, sums with limits): no table.
    DocumentFacts(
        path="text_pdf/GeoTopo-komprimiert.pdf",
        pages=117,
        headings=(
            (1, "Vorwort"),
            (1, "Inhaltsverzeichnis"),
            (1, "1 Topologische Grundbegriffe"),
            (2, "1.1 Topologische Räume"),
            (2, "1.2 Metrische Räume"),
            (2, "1.3 Stetigkeit"),
            (2, "1.4 Zusammenhang"),
            (2, "1.5 Kompaktheit"),
            (2, "1.6 Wege und Knoten"),
            (1, "2 Mannigfaltigkeiten und Simplizialkomplexe"),
            (2, "2.1 Topologische Mannigfaltigkeiten"),
            (2, "2.2 Differenzierbare Mannigfaltigkeiten"),
            (2, "2.3 Simplizialkomplex"),
            (1, "3 Fundamentalgruppe und Überlagerungen"),
            (2, "3.1 Homotopie von Wegen"),
            (2, "3.2 Fundamentalgruppe"),
            (2, "3.3 Überlagerungen"),
            (2, "3.4 Gruppenoperationen"),
            (1, "4 Euklidische und nichteuklidische Geometrie"),
            (2, "4.1 Axiome für die euklidische Ebene"),
            (2, "4.2 Weitere Eigenschaften einer euklidischen Ebene"),
            (2, "4.3 Hyperbolische Geometrie"),
            (1, "5 Krümmung"),
            (2, "5.1 Krümmung von Kurven"),
            (2, "5.2 Tangentialebene"),
            (2, "5.3 Gauß-Krümmung"),
            (2, "5.4 Erste und zweite Fundamentalform"),
            (1, "Symbolverzeichnis"),
            (1, "Stichwortverzeichnis"),
        ),
        no_tables_on=(15, 17, 18, 19, 36, 45, 46, 50, 51, 55, 102, 104, 106),
        left_out=("4 1.1. TOPOLOGISCHE RÄUME", "14 1.4. ZUSAMMENHANG"),
        kept=("ist unerlaubte Zerlegung", "Z(x) heißt Zusammenhangskomponente"),
    ),
    # Read with python-docx and from word/numbering.xml: a header and a footer on every
    # section ("This is the header text.", "This is the footer text."), three bullets
    # (numFmt bullet) and three items numbered "%1)" (numFmt decimal), one 2 x 3 table after
    # "Subject is here".
    DocumentFacts(
        path="docx/testWORD_various.docx",
        pages=1,
        items=(
            (1, "-", "Bullet 1"),
            (1, "-", "Bullet 2"),
            (1, "-", "Bullet 3"),
            (1, "1)", "Number bullet 1"),
            (1, "2)", "Number bullet 2"),
            (1, "3)", "Number bullet 3"),
        ),
        tables=(
            TableFacts(
                header=("Row 1 Col 1", "Row 1 Col 2", "Row 1 Col 3"),
                body_rows=1,
                row=("Row 2 Col 1", "Row 2 Col 2", "Row 2 Col 3"),
            ),
        ),
        table_count=1,
        order=(
            "Here is a list:",
            "Bullet 1",
            "Here is a numbered list:",
            "Number bullet 1",
            "Keyword1 Keyword2",
            "Subject is here",
            "Suddenly some Japanese text:",
            "ゾルゲと尾崎、淡々と最期",
            "Here is a citation:",
        ),
        left_out=("This is the header text.", "This is the footer text."),
    ),
    # Read with python-docx: three tables of empty cells, 2 x 2, 3 x 3 and 2 x 4, no text.
    DocumentFacts(
        path="docx/tbl-having-tables.docx",
        pages=1,
        no_headings=True,
        tables=(
            TableFacts(header=("", ""), body_rows=1),
            TableFacts(header=("", "", ""), body_rows=2),
            TableFacts(header=("", "", "", ""), body_rows=1),
        ),
        table_count=3,
    ),
    # Read with python-docx: two sections, the second linked to the first's header and footer
    # ("Header for section-1", "Footer for section 1"); two paragraphs of body text.
    DocumentFacts(
        path="docx/hdr-header-footer.docx",
        pages=1,
        no_headings=True,
        order=("section with header", "section without header of its own."),
        left_out=("Header for section-1", "Footer for section 1"),
    ),
    # Read from ppt/slides/slide1.xml: one slide; both lists are drawn with `a:buChar "•"`
    # (the second is called a numbered list but shows bullets); a 2 x 3 table.
    DocumentFacts(
        path="pptx/testPPT_various.pptx",
        pages=1,
        items=(
            (1, "-", "Bullet 1"),
            (1, "-", "Bullet 2"),
            (1, "-", "Bullet 3"),
            (1, "-", "Number bullet 1"),
            (1, "-", "Number bullet 2"),
            (1, "-", "Number bullet 3"),
        ),
        tables=(
            TableFacts(
                header=("Row 1 Col 1", "Row 1 Col 2", "Row 1 Col 3"),
                body_rows=1,
                row=("Row 2 Col 1", "Row 2 Col 2", "Row 2 Col 3"),
            ),
        ),
        table_count=1,
    ),
)
