"""StreamResult's pages one a message: a message of several pages
(StreamResultRequest.pages_per_message) read as the messages one page a message would have
been, each with its page's own cursor."""

from __future__ import annotations

from docparse.v1 import parser_service_pb2

Message = parser_service_pb2.StreamResultResponse
# What the SDK and the gateway's page events ask for: fewer, fuller messages cost the stack
# less CPU a page (bench/README.md), and a message never waits for pages to fill it.
PAGES_PER_MESSAGE = 16


def as_message(page: parser_service_pb2.StreamedPage) -> Message:
    """The one-page message that sends `page`."""
    return Message(
        page_part=page.page_part,
        page_number=page.page_number,
        final=page.final,
        sha256=page.sha256,
        attempt=page.attempt,
        cursor=page.cursor,
    )


def one_page_each(message: Message) -> list[Message]:
    """`message` itself when it holds no `pages` (one page, or the terminal record), else a
    message for each of its pages, in order."""
    if not message.pages:
        return [message]
    return [as_message(page) for page in message.pages]
