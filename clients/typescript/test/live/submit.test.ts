import assert from "node:assert/strict";
import { after, test } from "node:test";
import { ImageMode, OcrMode } from "../../src/gen/docparse/v1/job_pb.js";
import { State, TERMINAL } from "../../src/index.js";
import { client, document } from "./stack.js";

const { client: docparse } = client();
after(() => docparse.close());

test("a sync answer is final; an async one is QUEUED or RUNNING and ends by waiting", async () => {
  const sync = await docparse.submit("two-pages.pdf", document("two-pages.pdf"), {
    waitTimeoutMs: 60_000,
  });
  assert.equal(sync.job.state, State.SUCCEEDED);
  assert.equal(sync.job.fileName, "two-pages.pdf");
  assert.equal(sync.job.contentType, "pdf");
  assert.equal(sync.job.progress?.done, 2);
  assert.equal(
    sync.servedBy.length,
    2,
    `x-served-by names the replica and the gateway: ${sync.servedBy}`,
  );
  assert.deepEqual(await docparse.wait(sync.job), sync.job, "a terminal answer needs no call");

  const queued = await docparse.submit("forty-pages.pdf", document("forty-pages.pdf"));
  assert.ok(
    !TERMINAL.has(queued.job.state),
    `a 4 s parse answered at once: ${State[queued.job.state]}`,
  );
  const done = await docparse.wait(queued.job);
  assert.equal(done.state, State.SUCCEEDED);
  assert.equal(done.progress?.done, 40);
  assert.ok(done.version > queued.job.version);
  const status = await docparse.getStatus(queued.job.jobId);
  assert.equal(status.job.version, done.version);
  assert.equal(status.job.result?.sha256, done.result?.sha256);
});

test("the same request_id returns the first job", async () => {
  const requestId = `ts-sdk-${Date.now()}`;
  const first = await docparse.submit("two-pages.pdf", document("two-pages.pdf"), { requestId });
  const again = await docparse.submit("two-pages.pdf", document("two-pages.pdf"), { requestId });
  assert.equal(again.job.jobId, first.job.jobId);
});

test("the parse options travel with the job and are echoed", async () => {
  const answer = await docparse.submit("two-pages.pdf", document("two-pages.pdf"), {
    pages: "2",
    images: "none",
    ocrMode: "off",
    ocrDpi: 200,
    waitTimeoutMs: 60_000,
  });
  const job = await docparse.wait(answer.job);
  assert.equal(job.state, State.SUCCEEDED);
  assert.equal(job.pages, "2");
  assert.equal(job.images, ImageMode.NONE);
  assert.equal(job.ocrMode, OcrMode.OFF);
  assert.equal(job.ocrDpi, 200);
  assert.equal(job.result?.pageCount, 1);
});
