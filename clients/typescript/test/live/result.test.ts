import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { client, document } from "./stack.js";

const { client: docparse } = client();
after(() => docparse.close());

test("the result arrives verified, as a reading package and as a file", async () => {
  const job = await docparse.parse("twelve-pages.pdf", document("twelve-pages.pdf"));
  const pkg = await docparse.result(job.jobId);
  assert.equal(pkg.pages.length, 12);
  assert.match(pkg.pages[11]!.text, /typescript 12 of 12/);

  const folder = await mkdtemp(join(tmpdir(), "docparse-ts-"));
  try {
    const path = join(folder, "result.pb");
    const ref = await docparse.downloadResult(job.jobId, path);
    const bytes = await readFile(path);
    assert.equal(BigInt(bytes.length), ref.sizeBytes);
    assert.equal(ref.sizeBytes, job.result?.sizeBytes);
    assert.equal(createHash("sha256").update(bytes).digest("hex"), job.result?.sha256);
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
});
