import assert from "node:assert/strict";
import { after, test } from "node:test";
import { DocparseError } from "../../src/index.js";
import { client } from "./stack.js";

const { client: docparse, retries } = client();
after(() => docparse.close());

const notFound = (err: unknown): boolean => {
  assert.ok(err instanceof DocparseError, String(err));
  assert.equal(err.code, "NOT_FOUND", err.message);
  assert.equal(err.grpcCode, 5);
  assert.equal(err.reason, "JOB_NOT_FOUND");
  assert.equal(err.expired, false);
  return true;
};

test("an unknown job is NOT_FOUND JOB_NOT_FOUND for status, wait and result", async () => {
  const unknown = "0".repeat(32);
  await assert.rejects(docparse.getStatus(unknown), notFound);
  await assert.rejects(docparse.wait(unknown), notFound);
  await assert.rejects(docparse.result(unknown), notFound);
  assert.deepEqual(retries, [], "NOT_FOUND is final: no retry");
});
