import assert from "node:assert/strict";
import { after, test } from "node:test";
import { isMessage } from "@bufbuild/protobuf";
import {
  DocparseError,
  type GetTenantSharesResponse,
  GetTenantSharesResponseSchema,
  type Job,
  State,
} from "../../src/index.js";
import { client, document } from "./stack.js";

/** The stack's second key, marked `"admin": true` in its keys file (tenant "typescript-ops"). */
function adminKey(): string {
  const value = process.env.DOCPARSE_TEST_ADMIN_API_KEY;
  if (!value) {
    throw new Error(
      "DOCPARSE_TEST_ADMIN_API_KEY is not set: run through tests/docparse/test_ts_sdk.py",
    );
  }
  return value;
}

const { client: docparse, retries } = client();
const { client: operator } = client({ apiKey: adminKey() });
after(() => {
  docparse.close();
  operator.close();
});

test("with an admin key tenantShares answers: fair admission on, a running job counted", async () => {
  // About 4 s of parsing (the stack's 100 ms a page): read while it runs, it is counted for
  // its tenant, queued (not yet claimed) or running.
  const { job } = await docparse.submit("forty-pages.pdf", document("forty-pages.pdf"));
  // The watch is followed to its end, not left with `break` (an abandoned watch keeps node
  // from exiting); the shares are read at the first RUNNING record.
  let shares: GetTenantSharesResponse | undefined;
  let last: Job | undefined;
  for await (const record of docparse.watch(job.jobId)) {
    if (record.state === State.RUNNING && shares === undefined) {
      shares = await operator.tenantShares();
    }
    last = record;
  }
  assert.equal(last?.state, State.SUCCEEDED);
  assert.ok(shares, "the job was never seen running");
  assert.ok(isMessage(shares, GetTenantSharesResponseSchema));
  assert.equal(shares.fairAdmission, true); // the stack's default
  assert.equal(shares.interactiveReserve, 0); // DOCPARSE_ADMIT_RESERVE unset
  assert.ok(shares.bulkSlots >= 1, "the replicas register their parse slots as they start");
  assert.ok(shares.active >= 1, "our job is active in the queue");
  const names = shares.tenants.map((share) => share.tenant);
  assert.deepEqual(names, [...new Set(names)].sort(), "each tenant once, by name");
  const ours = shares.tenants.find((share) => share.tenant === "typescript");
  assert.ok(ours, `the running job's tenant is not listed: ${names}`);
  assert.ok(ours.queued + ours.running >= 1);
  assert.equal(ours.weight, 1); // no weight in the keys file

  // Once it ended the read answers the same way (the tenant's other jobs, of other tests,
  // may still run: what it counts then is not asserted).
  const later = await operator.tenantShares();
  assert.ok(isMessage(later, GetTenantSharesResponseSchema));
  assert.equal(later.fairAdmission, true);
});

test("with a tenant's key tenantShares is PERMISSION_DENIED ADMIN_ONLY, never retried", async () => {
  const before = retries.length;
  await assert.rejects(docparse.tenantShares(), (err: unknown) => {
    assert.ok(err instanceof DocparseError, String(err));
    assert.equal(err.code, "PERMISSION_DENIED");
    assert.equal(err.reason, "ADMIN_ONLY");
    assert.match(err.detail, /"admin": true/);
    return true;
  });
  assert.equal(retries.length, before);
});
