"""StreamResult's grouping of the pages ready at once (`pages_per_message`): the pages, their
order and cursors are what one page a message sends; a message holds at most the asked number
(32 at most) and stops before 1 MiB of parts, a bigger page going alone."""

from __future__ import annotations

from docparse.streamed_pages import one_page_each
from docparse.v1.parser_service_pb2 import StreamedPage
from parser_svc.api.page_stream import MESSAGE_BYTES, MOST_PAGES_PER_MESSAGE, grouped


def pages(*sizes: int) -> list[StreamedPage]:
    return [
        StreamedPage(page_part=bytes([n % 256]) * size, page_number=n, cursor=f"d{n}", sha256="x")
        for n, size in enumerate(sizes, 1)
    ]


def shape(ready: list[StreamedPage], per_message: int) -> list[int]:
    """How many pages each message holds (0: a one-page message of its own fields)."""
    return [len(message.pages) for message in grouped(ready, per_message)]


def test_one_page_a_message_unless_asked_and_the_same_pages_either_way() -> None:
    ready = pages(10, 20, 30, 40, 50)
    for per_message in (0, 1, 2, 3, 16):
        messages = list(grouped(ready, per_message))
        flat = [one for message in messages for one in one_page_each(message)]
        assert [(m.page_number, m.cursor, m.page_part, m.sha256) for m in flat] == [
            (p.page_number, p.cursor, p.page_part, p.sha256) for p in ready
        ]
        # a message of several pages resumes after its last one
        assert all(m.cursor == m.pages[-1].cursor for m in messages if m.pages)
    assert shape(ready, 0) == shape(ready, 1) == [0, 0, 0, 0, 0]
    assert shape(ready, 2) == [2, 2, 1]
    assert shape(ready, 16) == [5]


def test_a_message_stops_before_a_mebibyte_and_a_bigger_page_goes_alone() -> None:
    third = MESSAGE_BYTES // 3
    assert shape(pages(third, third, third, third, 10), 16) == [3, 2]
    assert shape(pages(10, MESSAGE_BYTES + 1, 10, 10), 16) == [1, 1, 2]


def test_more_than_the_most_a_message_is_read_as_the_most() -> None:
    assert MOST_PAGES_PER_MESSAGE == 32
    assert shape(pages(*[1] * 100), 1_000) == [32, 32, 32, 4]
