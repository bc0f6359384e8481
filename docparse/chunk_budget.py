"""A chunk's size budget (characters, or tokens) and the cutting of a text too big for one
chunk: at sentence ends first, then between words, and inside a word only when one word alone
is over the budget. Pure functions, used by docparse/chunks.py."""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

# Counts the tokens of a text (e.g. `lambda text: len(encoding.encode(text))`).
Tokenizer = Callable[[str], int]

# Tokens per whitespace-separated word when no tokenizer is given: English prose runs at about
# 1.3 subword tokens a word in the common BPE vocabularies.
TOKENS_PER_WORD = 1.3
SEPARATOR = "\n\n"
# A sentence ends at . ! ? or … (closing quotes and brackets included) before whitespace, or
# at the CJK full stops, which take no space after them.
_SENTENCE_END = re.compile("[.!?\u2026]+[\"')\\]\u2019\u201d\u00bb]*(?=\\s)|[\u3002\uff01\uff1f]+")
_SPACE = re.compile(r"\s+")


def estimated_tokens(text: str) -> int:
    """Whitespace-separated words x 1.3, rounded up: the estimate used when no tokenizer is
    given."""
    return math.ceil(len(text.split()) * TOKENS_PER_WORD)


@dataclass(frozen=True)
class Budget:
    """At most `limit` of `measure` per chunk; `unit` names it ("chars" or "tokens")."""

    limit: int
    measure: Callable[[str], int]
    unit: str

    def fits(self, text: str) -> bool:
        return self.measure(text) <= self.limit

    def cost(self, text: str) -> int:
        return self.measure(text)

    @property
    def separator(self) -> int:
        """What the blank line between two parts of a chunk costs."""
        return self.measure(SEPARATOR)


def make_budget(
    max_chars: int, max_tokens: int | None = None, tokenizer: Tokenizer | None = None
) -> Budget:
    """The character budget, or the token budget when `max_tokens` is given (counted by
    `tokenizer`, else estimated from words)."""
    if max_tokens is not None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        return Budget(max_tokens, tokenizer or estimated_tokens, "tokens")
    if tokenizer is not None:
        raise ValueError("a tokenizer counts tokens for max_tokens: pass max_tokens with it")
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    return Budget(max_chars, len, "chars")


def _furthest(ends: list[int], first: int, fits: Callable[[int], bool]) -> int | None:
    """The index of the last end, from `first` on, for which `fits(end)` holds, assuming it
    holds up to some point and not after; None when it fails at `first`. Gallops, then
    bisects, so a long text costs a few measures of about a chunk's length each."""
    if first >= len(ends) or not fits(ends[first]):
        return None
    good, step = first, 1
    while good + step < len(ends) and fits(ends[good + step]):
        good += step
        step *= 2
    bad = min(good + step, len(ends))
    while bad - good > 1:
        middle = (good + bad) // 2
        if fits(ends[middle]):
            good = middle
        else:
            bad = middle
    return good


def _next_end(text: str, start: int, room: int, budget: Budget, cuts: list[list[int]]) -> int:
    """Where the piece starting at `start` ends: the furthest sentence end, else word end, that
    keeps it within `room`; else as many characters of the word as fit (at least one); -1
    when `room` is short of the budget and no sentence or word fits in it."""

    def fits(end: int) -> bool:
        return budget.measure(text[start:end].strip()) <= room

    for ends in cuts:
        found = _furthest(ends, bisect.bisect_right(ends, start), fits)
        if found is not None:
            return ends[found]
    if room < budget.limit:
        return -1
    words = cuts[-1]
    word_end = words[bisect.bisect_right(words, start)]
    chars = list(range(start + 1, word_end + 1))
    found = _furthest(chars, 0, fits)
    return chars[found] if found is not None else start + 1


def split_text(text: str, budget: Budget, first_room: int | None = None) -> list[str]:
    """`text` in pieces each within the budget, cut at sentence ends, else between words,
    else inside a word. The first piece is held to `first_room` when given (the room left in
    a chunk already started) if a sentence or a word fits in it, else to the budget: the caller
    compares. Whitespace at the cuts goes; every other character stays, in
    order."""
    text = text.strip()
    if not text:
        return []
    sentence_ends = [match.end() for match in _SENTENCE_END.finditer(text)] + [len(text)]
    word_ends = [match.start() for match in _SPACE.finditer(text)] + [len(text)]
    pieces: list[str] = []
    start = 0
    room = budget.limit if first_room is None else first_room
    while start < len(text):
        end = _next_end(text, start, max(room, 1), budget, [sentence_ends, word_ends])
        if end < 0:  # nothing fits the room left: the first piece takes a whole budget
            room = budget.limit
            continue
        piece = text[start:end].strip()
        if piece:
            pieces.append(piece)
        start = end
        while start < len(text) and text[start].isspace():
            start += 1
        room = budget.limit
    return pieces
