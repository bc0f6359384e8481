// StreamResult's pages one a message, as the Python SDK's docparse/streamed_pages.py: a
// message of several pages (StreamResultRequest.pagesPerMessage) read as the messages one
// page a message would have been, each with its page's own cursor.

import { create } from "@bufbuild/protobuf";
import {
  type StreamResultResponse,
  StreamResultResponseSchema,
} from "./gen/docparse/v1/parser_service_pb.js";

/** What `streamPages` asks for: fewer, fuller messages cost the stack less CPU a page, and a
 * message never waits for pages to fill it. */
export const PAGES_PER_MESSAGE = 16;

/** `message` itself when it holds no `pages` (one page, or the terminal record), else a
 * message for each of its pages, in order. */
export function onePageEach(message: StreamResultResponse): StreamResultResponse[] {
  if (message.pages.length === 0) {
    return [message];
  }
  return message.pages.map((page) =>
    create(StreamResultResponseSchema, {
      pagePart: page.pagePart,
      pageNumber: page.pageNumber,
      final: page.final,
      sha256: page.sha256,
      attempt: page.attempt,
      cursor: page.cursor,
    }),
  );
}
