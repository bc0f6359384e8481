import assert from "node:assert/strict";
import { after, test } from "node:test";
import { type Job, State } from "../../src/index.js";
import { client, document } from "./stack.js";

const { client: docparse, retries } = client();
after(() => docparse.close());

test("a watch cut by the server resumes after the last version it yielded", async (t) => {
  // The stack's parser_svc ends every connection after 1.5 s; this parse takes about 4 s, so
  // the gateway's stream breaks under us (UNAVAILABLE) at least once.
  const answer = await docparse.submit("forty-pages.pdf", document("forty-pages.pdf"));
  const seen: Job[] = [];
  for await (const job of docparse.watch(answer.job.jobId)) {
    seen.push(job);
  }
  const versions = seen.map((job) => job.version);
  const last = seen.at(-1);
  assert.equal(last?.state, State.SUCCEEDED);
  assert.equal(last?.progress?.done, 40);
  assert.deepEqual(
    seen.filter((job) => job.state === State.SUCCEEDED),
    [last],
    "exactly one terminal record, the last one",
  );
  for (let i = 1; i < seen.length; i += 1) {
    assert.ok(versions[i]! > versions[i - 1]!, `versions not strictly increasing: ${versions}`);
    assert.ok(seen[i]!.progress!.done >= seen[i - 1]!.progress!.done, "progress went backwards");
  }
  const resumed = retries.filter((event) => event.method === "WatchJob");
  assert.ok(resumed.length >= 1, "the 4 s watch was never cut: the test proves nothing");
  for (const event of resumed) {
    assert.equal(event.error.code, "UNAVAILABLE");
    assert.ok(
      versions.includes(event.afterVersion!),
      `resumed after ${event.afterVersion}, never yielded`,
    );
    assert.ok(
      versions.some((v) => v > event.afterVersion!),
      "nothing came after the resume",
    );
  }
  assert.ok(!retries.some((event) => event.method === "SubmitJob"), "waiting never submits");

  // Watching again from a version in the middle yields only what came after it.
  const middle = versions[Math.floor(versions.length / 2)]!;
  t.diagnostic(
    `records=${seen.length} versions=${versions[0]}..${versions.at(-1)} resumes=${resumed.length} ` +
      `after_versions=${resumed.map((event) => event.afterVersion).join(",")}`,
  );
  const rest: bigint[] = [];
  for await (const job of docparse.watch(answer.job.jobId, { afterVersion: middle })) {
    rest.push(job.version);
  }
  assert.deepEqual(rest, [last!.version], "a finished job: only its terminal record is newer");
});
