import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, test } from "node:test";
import { DocparseError, State } from "../../src/index.js";
import { client, document } from "./stack.js";

const { client: docparse } = client();
after(() => docparse.close());

test("listAssets names each image and its page; getAsset brings its checked bytes", async () => {
  const answer = await docparse.submit("photo.pdf", document("photo.pdf"), {
    images: "all",
    waitTimeoutMs: 60_000,
  });
  const job = await docparse.wait(answer.job);
  assert.equal(job.state, State.SUCCEEDED);
  const listed = await docparse.listAssets(job.jobId);
  const pkg = await docparse.result(job.jobId);
  assert.deepEqual(
    listed.map(({ asset }) => asset.assetId),
    pkg.assets.map((asset) => asset.assetId),
  );
  assert.deepEqual(
    listed.map(({ page }) => page),
    [1, 2],
    "the JPEG is on page 1, the raw pixels on page 2",
  );
  for (const { asset } of listed) {
    const got = await docparse.getAsset(job.jobId, asset.assetId);
    assert.equal(got.asset.sha256, asset.sha256);
    assert.equal(createHash("sha256").update(got.data).digest("hex"), asset.sha256);
    assert.equal(BigInt(got.data.length), asset.sizeBytes);
    assert.ok(got.asset.mimeType.startsWith("image/"), got.asset.mimeType);
  }
  await assert.rejects(docparse.getAsset(job.jobId, `${"0".repeat(32)}.png`), (err: unknown) => {
    assert.ok(err instanceof DocparseError);
    assert.equal(`${err.code} ${err.reason}`, "NOT_FOUND ASSET_NOT_FOUND");
    return true;
  });
});
