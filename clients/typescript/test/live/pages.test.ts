import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, test } from "node:test";
import { equals, fromBinary } from "@bufbuild/protobuf";
import {
  PageSchema,
  ReadingPackageSchema,
  State,
  type StreamResultResponse,
} from "../../src/index.js";
import { client, document } from "./stack.js";

const { client: docparse, retries } = client();
after(() => docparse.close());

const PAGES = 30;

test("streamPages: drafts while the job runs, a cut stream resumed from its cursor, then the package's pages", async (t) => {
  // The stack's parser_svc ends every connection after 1.5 s; this parse takes about 3 s, so
  // the stream breaks under us (UNAVAILABLE) and the SDK opens it again after its cursor.
  const answer = await docparse.submit("thirty-pages.pdf", document("thirty-pages.pdf"));
  const jobId = answer.job.jobId;
  const messages: StreamResultResponse[] = [];
  let stateAtFirstPage: State | undefined;
  for await (const message of docparse.streamPages(jobId)) {
    if (messages.length === 0) {
      stateAtFirstPage = (await docparse.getStatus(jobId)).job.state;
    }
    messages.push(message);
  }
  const end = messages.at(-1)!;
  assert.equal(end.job?.state, State.SUCCEEDED);
  assert.equal(end.pagePart.length, 0);
  assert.equal(stateAtFirstPage, State.RUNNING, "the first page came before the job ended");
  const pages = messages.slice(0, -1);
  for (const message of pages) {
    assert.equal(createHash("sha256").update(message.pagePart).digest("hex"), message.sha256);
  }
  const drafts = pages.filter((m) => !m.final).map((m) => m.pageNumber);
  assert.ok(drafts.length > 0, "no drafts: the job ended before the stream began");
  assert.equal(new Set(drafts).size, drafts.length, `a draft came twice: ${drafts}`);

  // The finals are the pages of result(), in order.
  const finals = pages.filter((m) => m.final);
  const pkg = await docparse.result(jobId);
  assert.deepEqual(
    finals.map((m) => m.pageNumber),
    Array.from({ length: PAGES }, (_, i) => i + 1),
  );
  finals.forEach((message, i) => {
    const part = fromBinary(ReadingPackageSchema, message.pagePart);
    assert.equal(part.pages.length, 1);
    assert.ok(equals(PageSchema, part.pages[0]!, pkg.pages[i]!), `page ${i + 1} differs`);
  });

  const resumed = retries.filter((event) => event.method === "StreamResult");
  t.diagnostic(`messages=${messages.length} drafts=${drafts.length} resumes=${resumed.length}`);
  assert.ok(resumed.length >= 1, "the 3 s stream was never cut: the test proves nothing");
  const cursors = messages.map((m) => m.cursor);
  for (const event of resumed) {
    assert.equal(event.error.code, "UNAVAILABLE");
    const cursor = event.cursor!; // "" when cut before the first message
    assert.ok(cursor === "" || cursors.includes(cursor), `resumed after ${cursor}, never yielded`);
  }

  // A stream from the cursor of the 10th final: the 20 after it, then the end.
  const rest: number[] = [];
  for await (const message of docparse.streamPages(jobId, { cursor: finals[9]!.cursor })) {
    rest.push(message.pageNumber);
  }
  assert.deepEqual(rest, [...Array.from({ length: 20 }, (_, i) => i + 11), 0]);
});

test("readPages: the pages read so far while the job runs, marked partial, then the package's", async () => {
  const answer = await docparse.submit("thirty-pages.pdf", document("thirty-pages.pdf"));
  const jobId = answer.job.jobId;
  let read = await docparse.readPages(jobId, "1-2");
  while (read.package.pages.length < 2) {
    assert.ok(read.partial, "the job ended before pages 1-2 were read while it ran");
    await new Promise((resolve) => setTimeout(resolve, 20));
    read = await docparse.readPages(jobId, "1-2");
  }
  assert.equal(read.partial, true, "pages 1-2 came only after the job ended");
  assert.deepEqual(read.draftPages, [1, 2]);
  assert.deepEqual(
    read.package.pages.map((p) => p.number),
    [1, 2],
  );
  const job = await docparse.wait(jobId);
  assert.equal(job.state, State.SUCCEEDED);
  assert.equal(job.progress?.readyPages, `1-${PAGES}`);
  const done = await docparse.readPages(jobId, "2,30-");
  assert.equal(done.partial, false);
  assert.deepEqual(done.draftPages, []);
  const pkg = await docparse.result(jobId);
  assert.deepEqual(
    done.package.pages.map((p) => p.number),
    [2, 30],
  );
  assert.ok(equals(PageSchema, done.package.pages[0]!, pkg.pages[1]!));
  const bad = await docparse.readPages(jobId, "3-1").catch((err: unknown) => err);
  assert.equal((bad as { reason?: string }).reason, "INVALID_PAGE_RANGE");
});
