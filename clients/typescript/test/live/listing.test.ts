import assert from "node:assert/strict";
import { after, test } from "node:test";
import { DocparseError, State } from "../../src/index.js";
import { client, document } from "./stack.js";

const { client: docparse, retries } = client();
after(() => docparse.close());

test("listJobs pages newest first; iterJobPages and iterJobs go through every page", async () => {
  const batch = await docparse.createBatch(
    ["a", "b", "c"].map((name) => ({
      fileName: `${name}.pdf`,
      content: document("two-pages.pdf"),
    })),
  );
  const inBatch = [];
  for await (const job of docparse.iterJobs({ batchId: batch.batchId, pageSize: 2 })) {
    inBatch.push(job.jobId);
  }
  assert.deepEqual([...inBatch].sort(), batch.jobs.map((job) => job.jobId).sort());

  const everything = [];
  for await (const job of docparse.iterJobs()) {
    everything.push(job.jobId);
  }
  assert.ok(everything.length >= 3 && new Set(everything).size === everything.length);
  const pages = [];
  for await (const page of docparse.iterJobPages({ pageSize: 2 })) {
    pages.push(page);
  }
  assert.deepEqual(
    pages.flatMap((page) => page.jobs.map((job) => job.jobId)),
    everything,
  );
  assert.ok(pages.every((page) => page.jobs.length <= 2));
  assert.equal(pages.at(-1)?.nextPageToken, "");

  // A limit: no page asks for more than is left, so the last token goes on right after them.
  const limited = [];
  for await (const page of docparse.iterJobPages({ pageSize: 2, limit: 3 })) {
    limited.push(page);
  }
  assert.deepEqual(
    limited.map((page) => page.jobs.length),
    [2, 1],
  );
  const rest = await docparse.listJobs({ pageToken: limited[1].nextPageToken, pageSize: 500 });
  assert.deepEqual(
    rest.jobs.map((job) => job.jobId),
    everything.slice(3),
  );

  const first = await docparse.listJobs({ pageSize: 1 });
  assert.deepEqual(
    first.jobs.map((job) => job.jobId),
    everything.slice(0, 1),
  );
  const none = await docparse.listJobs({ batchId: batch.batchId, states: [State.CANCELLED] });
  assert.deepEqual(none.jobs, []);
});

test("a bad page token is INVALID_ARGUMENT INVALID_PAGE_TOKEN, never retried", async () => {
  const token = (await docparse.listJobs({ pageSize: 1 })).nextPageToken;
  assert.ok(token, "the stack holds more than one job");
  const before = retries.length;
  for (const options of [
    { pageToken: "not a token" },
    { pageToken: token, states: [State.FAILED] }, // other filters than the token's
  ]) {
    await assert.rejects(docparse.listJobs(options), (err: unknown) => {
      assert.ok(err instanceof DocparseError);
      assert.equal(err.code, "INVALID_ARGUMENT");
      assert.equal(err.reason, "INVALID_PAGE_TOKEN");
      return true;
    });
  }
  assert.equal(retries.length, before);
});
