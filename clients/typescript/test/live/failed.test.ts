import assert from "node:assert/strict";
import { after, test } from "node:test";
import { DocparseError, JobFailed, State } from "../../src/index.js";
import { client } from "./stack.js";

const { client: docparse, retries } = client();
after(() => docparse.close());

test("a document that cannot be parsed ends FAILED with its reason", async () => {
  const answer = await docparse.submit("broken.pdf", Buffer.from("%PDF-1.7\nnot really a pdf"));
  await assert.rejects(docparse.wait(answer.job), (err: unknown) => {
    assert.ok(err instanceof JobFailed, String(err));
    assert.equal(err.jobId, answer.job.jobId);
    assert.equal(err.state, "FAILED");
    assert.equal(err.reason, "CORRUPT_DOCUMENT");
    return true;
  });
  const status = await docparse.getStatus(answer.job.jobId);
  assert.equal(status.job.state, State.FAILED);
  assert.equal(status.job.error?.reason, "CORRUPT_DOCUMENT");
});

test("bytes that are no document are refused at once, with no job", async () => {
  const before = retries.length; // (the other test's wait may have resumed a cut stream)
  await assert.rejects(
    docparse.submit("archive.pdf", Buffer.from("377abcaf271c000400000000", "hex")),
    (err: unknown) => {
      assert.ok(err instanceof DocparseError, String(err));
      assert.equal(err.code, "INVALID_ARGUMENT", err.message);
      assert.equal(err.reason, "UNSUPPORTED_FORMAT");
      return true;
    },
  );
  assert.deepEqual(retries.slice(before), [], "an INVALID_ARGUMENT is never retried");
});
