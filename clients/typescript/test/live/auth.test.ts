import assert from "node:assert/strict";
import { test } from "node:test";
import { DocparseClient, DocparseError, type RetryEvent } from "../../src/index.js";
import { apiKey, ca, client, document, target } from "./stack.js";

function refusedWith(reason: string) {
  return (err: unknown): boolean => {
    assert.ok(err instanceof DocparseError, String(err));
    assert.equal(err.code, "UNAUTHENTICATED", err.message);
    assert.equal(err.reason, reason);
    return true;
  };
}

test("calls without a valid API key are refused UNAUTHENTICATED, at once", async () => {
  const retries: RetryEvent[] = [];
  const anonymous = new DocparseClient({
    target: target(),
    apiKey: "",
    tls: { ca: ca() },
    onRetry: (e) => retries.push(e),
  });
  const wrong = new DocparseClient({
    target: target(),
    apiKey: "not-a-key",
    tls: { ca: ca() },
    onRetry: (e) => retries.push(e),
  });
  try {
    const started = Date.now();
    await assert.rejects(
      anonymous.submit("two-pages.pdf", document("two-pages.pdf")),
      refusedWith("API_KEY_MISSING"),
    );
    await assert.rejects(anonymous.getStatus("0".repeat(32)), refusedWith("API_KEY_MISSING"));
    await assert.rejects(wrong.wait("0".repeat(32)), refusedWith("API_KEY_INVALID"));
    assert.deepEqual(retries, [], "UNAUTHENTICATED is never retried");
    assert.ok(Date.now() - started < 10_000);
  } finally {
    anonymous.close();
    wrong.close();
  }
  // The same call with the key gets through to the service.
  const { client: keyed } = client({ apiKey: apiKey() });
  try {
    await assert.rejects(keyed.getStatus("0".repeat(32)), {
      code: "NOT_FOUND",
      reason: "JOB_NOT_FOUND",
    });
  } finally {
    keyed.close();
  }
});

test("the gateway speaks TLS only: a client without its CA or without TLS gets nowhere", async () => {
  const policy = { unavailableBudgetMs: 1_000 };
  const untrusted = new DocparseClient({ target: target(), apiKey: apiKey(), tls: true, policy });
  const plaintext = new DocparseClient({ target: target(), apiKey: apiKey(), policy });
  try {
    for (const wrongWay of [untrusted, plaintext]) {
      await assert.rejects(wrongWay.getStatus("0".repeat(32)), (err: unknown) => {
        assert.ok(err instanceof DocparseError, String(err));
        assert.equal(err.code, "UNAVAILABLE", err.message); // never NOT_FOUND: no call got through
        assert.equal(err.reason, "TARGET_UNREACHABLE", err.message);
        assert.equal(err.metadata.target, target());
        return true;
      });
    }
  } finally {
    untrusted.close();
    plaintext.close();
  }
});
