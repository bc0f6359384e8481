import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { DocparseError } from "../../src/index.js";
import { client, document, webhookSecret } from "./stack.js";

const { client: docparse, retries } = client();

/** A webhook receiver on 127.0.0.1 that checks each delivery's Standard Webhooks signature. */
type Event = { type: string; data: Record<string, unknown> };
const events: Event[] = [];
const waiting: Array<() => void> = [];
const receiver = createServer((request, response) => {
  const parts: Buffer[] = [];
  request.on("data", (part: Buffer) => parts.push(part));
  request.on("end", () => {
    const body = Buffer.concat(parts).toString("utf8");
    assert.ok(signed(request.headers, body), "a delivery with a wrong signature");
    events.push(JSON.parse(body) as Event);
    response.writeHead(204).end();
    for (const wake of waiting.splice(0)) wake();
  });
});
before(() => new Promise<void>((listening) => receiver.listen(0, "127.0.0.1", listening)));
after(() => {
  docparse.close();
  receiver.close();
});

function signed(headers: IncomingHttpHeaders, body: string): boolean {
  const key = Buffer.from(webhookSecret().slice("whsec_".length), "base64");
  const content = `${headers["webhook-id"]}.${headers["webhook-timestamp"]}.${body}`;
  const expected = `v1,${createHmac("sha256", key).update(content).digest("base64")}`;
  return String(headers["webhook-signature"]).split(" ").includes(expected);
}

const url = () => `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

/** The first delivery `matches` accepts, as deliveries arrive (60 s at most). */
async function delivered(matches: (event: Event) => boolean): Promise<Event> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const found = events.find(matches);
    if (found) return found;
    assert.ok(Date.now() < deadline, "no delivery within 60 s");
    await new Promise<void>((wake) => {
      waiting.push(wake);
      setTimeout(wake, 1_000);
    });
  }
}

test("submit with a callback: the job's webhook arrives, signed", async () => {
  const callback = { url: url(), secretName: "local" };
  const answer = await docparse.submit("two-pages.pdf", document("two-pages.pdf"), { callback });
  const event = await delivered((e) => e.data.job_id === answer.job.jobId);
  assert.equal(event.type, "job.succeeded");
  assert.equal(event.data.state, "STATE_SUCCEEDED");
});

test("createBatch with a callback: one batch.completed webhook for the whole batch", async () => {
  const files = ["one", "two"].map((name) => ({
    fileName: `${name}.pdf`,
    content: document("two-pages.pdf"),
  }));
  const batch = await docparse.createBatch(files, {
    callback: { url: url(), secretName: "local" },
  });
  const event = await delivered((e) => e.data.batch_id === batch.batchId);
  assert.equal(event.type, "batch.completed");
  assert.equal(event.data.completed, 2);
  const ids = new Set(batch.jobs.map((job) => job.jobId));
  assert.ok(!events.some((e) => ids.has(String(e.data.job_id))), "no webhook per file");
});

test("an unknown secret is refused at submit, not retried", async () => {
  const before = retries.length;
  const callback = { url: url(), secretName: "no-such-secret" };
  await assert.rejects(
    docparse.submit("two-pages.pdf", document("two-pages.pdf"), { callback }),
    (err: unknown) => {
      assert.ok(err instanceof DocparseError);
      assert.equal(`${err.code} ${err.reason}`, "INVALID_ARGUMENT CALLBACK_SECRET_UNKNOWN");
      return true;
    },
  );
  assert.equal(retries.length, before);
});
