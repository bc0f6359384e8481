import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, test } from "node:test";
import { client, document } from "./stack.js";

const { client: docparse } = client();
after(() => docparse.close());

// A process that left a stream is done this long after it said so, or the call still holds it
// (a stall bound: an open call holds it until the policy's deadline, minutes).
const EXIT_BOUND_MS = 15_000;
const STACK = new URL("./stack.js", import.meta.url).href;

/** Runs `reading` (module code that has `docparse`, a client of the test stack, and prints
 * "left" once it left its stream and closed the client) in a node process of its own: the ms
 * from "left" to the process's exit (Infinity when it had to be killed), and its output. */
async function exitAfterLeaving(reading: string): Promise<{ ms: number; out: string }> {
  const code = `const { client } = await import(${JSON.stringify(STACK)});
const { client: docparse } = client();
${reading}`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", code], { env: process.env });
  let out = "";
  let leftAt = 0;
  child.stdout.on("data", (chunk: Buffer) => {
    out += chunk.toString();
    if (!leftAt && out.includes("left")) {
      leftAt = Date.now();
    }
  });
  child.stderr.on("data", (chunk: Buffer) => {
    out += chunk.toString();
  });
  const killer = setTimeout(() => child.kill("SIGKILL"), 60_000 + EXIT_BOUND_MS);
  const signal = await new Promise<NodeJS.Signals | null>((resolve) => {
    const watchdog = setInterval(() => {
      if (leftAt && Date.now() - leftAt > EXIT_BOUND_MS) {
        child.kill("SIGKILL");
      }
    }, 200);
    child.on("exit", (_code, killed) => {
      clearInterval(watchdog);
      resolve(killed);
    });
  });
  clearTimeout(killer);
  return { ms: signal === "SIGKILL" ? Number.POSITIVE_INFINITY : Date.now() - leftAt, out };
}

test("a watch left after its first record ends its call: the process exits", async () => {
  const answer = await docparse.submit("forty-pages.pdf", document("forty-pages.pdf"));
  const { ms, out } = await exitAfterLeaving(`
for await (const job of docparse.watch(${JSON.stringify(answer.job.jobId)})) {
  console.log("record", job.state);
  break;
}
docparse.close();
console.log("left");`);
  assert.match(out, /record \d+\s+left/, out);
  assert.ok(ms < EXIT_BOUND_MS, `the process was still running ${EXIT_BOUND_MS} ms after leaving`);
  await docparse.wait(answer.job.jobId);
});

test("a page stream left after its first page ends its call: the process exits", async () => {
  const answer = await docparse.submit("thirty-pages.pdf", document("thirty-pages.pdf"));
  const { ms, out } = await exitAfterLeaving(`
for await (const message of docparse.streamPages(${JSON.stringify(answer.job.jobId)})) {
  console.log("page", message.pageNumber, message.final);
  break;
}
docparse.close();
console.log("left");`);
  assert.match(out, /page \d+ (true|false)\s+left/, out);
  assert.ok(ms < EXIT_BOUND_MS, `the process was still running ${EXIT_BOUND_MS} ms after leaving`);
  await docparse.wait(answer.job.jobId);
});
