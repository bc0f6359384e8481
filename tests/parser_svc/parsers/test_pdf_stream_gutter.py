"""The gutter between two columns of a page's prose (pdf_stream_tables._gutter): found where
two columns stand, none on a page of one column, and found by bisection in the lines' sorted
edges, so a page of thousands of lines costs its lines, not their square."""

from __future__ import annotations

import random
import time

from parser_svc.parsers.pdf_lines import Segment
from parser_svc.parsers.pdf_stream_tables import _gutter

PROSE = "a line of prose with words"


def _column(x0: float, width: float, lines: int, seed: int) -> list[Segment]:
    rng = random.Random(seed)
    return [
        (x0, 20 + i * 12.0, x0 + width - rng.random() * 30, 30 + i * 12.0, PROSE)
        for i in range(lines)
    ]


def test_the_gutter_between_two_columns_and_none_in_one() -> None:
    left, right = _column(50, 220, 30, 1), _column(320, 220, 30, 2)
    gutter = _gutter(left + right, [], 2)
    assert gutter is not None and max(s[2] for s in left) < gutter < 320
    assert _gutter(left, [], 2) is None
    # A line of other text across the gap (not a taller title) means no gutter.
    across: list[Segment] = [(200.0, 500.0, 400.0, 510.0, "x")]
    assert _gutter(left + right, across, 2) is None


def test_thousands_of_lines_of_one_column_cost_no_square() -> None:
    rng = random.Random(3)
    lines: list[Segment] = []
    for i in range(6000):  # every line's end is another candidate x, and none is a gutter
        x0 = 20 + rng.random()
        lines.append((x0, i * 0.1, x0 + 100 + rng.random() * 400, i * 0.1 + 0.09, PROSE))
    started = time.process_time()
    assert _gutter(lines, [], 2) is None
    # A stall bound, not a benchmark: counting each candidate's sides anew took 1.8 s here.
    assert time.process_time() - started < 0.5
