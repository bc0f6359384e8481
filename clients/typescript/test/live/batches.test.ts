import assert from "node:assert/strict";
import { after, test } from "node:test";
import { type Batch, DocparseError, State } from "../../src/index.js";
import { client, document } from "./stack.js";

const { client: docparse } = client();
after(() => docparse.close());

test("createBatch, getBatch and watchBatch until every file ended", async () => {
  const files = [
    { fileName: "twelve.pdf", content: document("twelve-pages.pdf") },
    { fileName: "forty.pdf", content: document("forty-pages.pdf") },
  ];
  const requestId = `ts-batch-${Date.now()}`;
  const batch = await docparse.createBatch(files, { requestId });
  assert.equal(batch.total, 2);
  assert.deepEqual(
    batch.jobs.map((job) => job.fileName),
    ["twelve.pdf", "forty.pdf"],
  );
  const again = await docparse.createBatch(files, { requestId });
  assert.equal(again.batchId, batch.batchId, "the same request_id answers with the first batch");

  const seen: Batch[] = [];
  for await (const state of docparse.watchBatch(batch.batchId)) {
    seen.push(state);
  }
  // A 4 s parse under connections that live 1.5 s: the watch was resumed, versions only grow.
  const versions = seen.map((state) => state.version);
  assert.ok(
    versions.every((version, i) => i === 0 || version > versions[i - 1]),
    `${versions}`,
  );
  const last = seen.at(-1);
  assert.ok(last && last.completed === 2 && last.succeeded === 2, JSON.stringify(last?.total));
  assert.ok(last.jobs.every((job) => job.state === State.SUCCEEDED));

  const read = await docparse.getBatch(batch.batchId);
  assert.equal(read.version, last.version);
  assert.equal(read.completed, 2);
  const more = [];
  for await (const state of docparse.watchBatch(batch.batchId, { afterVersion: last.version })) {
    more.push(state);
  }
  assert.deepEqual(more, [], "nothing after the final version");
});

test("an unknown batch is NOT_FOUND BATCH_NOT_FOUND", async () => {
  for (const read of [
    () => docparse.getBatch("0".repeat(32)),
    async () => {
      for await (const _ of docparse.watchBatch("0".repeat(32))) {
        // never reached
      }
    },
  ]) {
    await assert.rejects(read(), (err: unknown) => {
      assert.ok(err instanceof DocparseError);
      assert.equal(err.code, "NOT_FOUND");
      assert.equal(err.reason, "BATCH_NOT_FOUND");
      return true;
    });
  }
});
