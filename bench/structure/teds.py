"""Tree-Edit-Distance-based Similarity (TEDS) between two tables, as its authors define it
(Zhong et al., "Image-based table recognition", 2020): each table a tree (table, thead/tbody,
tr, td); renaming a td costs 1 if its colspan or rowspan differs, else the normalised
Levenshtein distance of the two cells' texts; TEDS = 1 - distance / the larger tree's size."""

from __future__ import annotations

from dataclasses import dataclass, field

from apted import APTED, Config

from tests.fixtures.scans import levenshtein

# A table as the scorer holds it: its header row count and its rows, each a list of cells
# (text, row span, column span), a cell in the row it starts in (as HTML holds it).
CellT = tuple[str, int, int]


@dataclass
class ParsedTable:
    rows: list[list[CellT]]
    header_rows: int = 1


@dataclass
class Node:
    tag: str
    text: str = ""
    spans: tuple[int, int] = (1, 1)
    children: list[Node] = field(default_factory=list)

    def size(self) -> int:
        return 1 + sum(child.size() for child in self.children)


class TedsConfig(Config):  # type: ignore[misc]
    def rename(self, node1: Node, node2: Node) -> float:
        if node1.tag != node2.tag or node1.spans != node2.spans:
            return 1.0
        if node1.tag == "td" and (node1.text or node2.text):
            longest = max(len(node1.text), len(node2.text))
            return levenshtein(node1.text, node2.text) / longest
        return 0.0

    def children(self, node: Node) -> list[Node]:
        return node.children


def tree(table: ParsedTable) -> Node:
    def part(tag: str, rows: list[list[CellT]]) -> Node:
        trs = [Node("tr", children=[Node("td", t, (r, c)) for t, r, c in row]) for row in rows]
        return Node(tag, children=trs)

    head, body = table.rows[: table.header_rows], table.rows[table.header_rows :]
    return Node("table", children=[part("thead", head), part("tbody", body)])


def teds(predicted: ParsedTable, truth: ParsedTable) -> float:
    one, two = tree(predicted), tree(truth)
    distance = APTED(one, two, TedsConfig()).compute_edit_distance()
    return float(max(0.0, 1.0 - distance / max(one.size(), two.size())))
