"""How a page's text layer is counted (parser_svc/parsers/textlayer.py): `visible_count` tells
the characters that are not whitespace, and whether they are all printable, as the text without
its whitespace (`"".join(text.split())`) would, for every whitespace character Python knows and
the characters a broken text layer brings (controls, U+FFFD, private use, lone surrogates)."""

from __future__ import annotations

import random
import sys

import pytest

from parser_svc.parsers.textlayer import judge_page, visible_count

WHITESPACE = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
ODD = ["\ufffd", "\x00", "\x07", "\u200b", "\ue000", "\ud800", "\u00ad", "é", "中", "1"]


def _expected(text: str) -> tuple[int, bool]:
    visible = "".join(text.split())
    return len(visible), visible.isprintable()


def test_only_the_ascii_space_is_whitespace_and_printable() -> None:
    """What the count's fast path stands on."""
    assert [c for c in WHITESPACE if c.isprintable()] == [" "]


@pytest.mark.parametrize("seed", range(6))
def test_the_count_is_that_of_the_text_without_its_whitespace(seed: int) -> None:
    rng = random.Random(seed)
    pool = [*WHITESPACE, *ODD, *"abcdefgh .,\n"]
    for _ in range(400):
        text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 40)))
        assert visible_count(text) == _expected(text), repr(text)
    prose = "A line of prose.\nAnother line, with 12 words and more.\n\n  Indented."
    assert visible_count(prose) == _expected(prose) == (53, True)


def test_a_page_of_controls_is_garbage_with_or_without_the_count() -> None:
    text = "Page text \x01\x02\x03\x04\x05\x06\x07\x08" * 10
    reason = judge_page(text, lambda: [])
    assert "have no Unicode meaning" in reason
    assert judge_page(text, lambda: [], counted=visible_count(text)) == reason
    assert judge_page("Plain readable text.\nMore of it.", lambda: []) == ""
