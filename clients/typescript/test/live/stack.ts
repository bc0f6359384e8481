// What the live tests are given by tests/docparse/test_ts_sdk.py, which starts the stack: its gateway,
// an API key it accepts, the CA of its TLS certificate and a folder of documents.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type ClientOptions, DocparseClient, type RetryEvent } from "../../src/index.js";

function required(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run the live tests through tests/docparse/test_ts_sdk.py`);
  }
  return value;
}

export const target = (): string => required("DOCPARSE_TARGET");
export const apiKey = (): string => required("DOCPARSE_API_KEY");
export const ca = (): Buffer => readFileSync(required("DOCPARSE_TLS_CA"));
/** The signing secret (whsec_...) the stack knows for this tenant as "local"; it may call
 * back to 127.0.0.1. */
export const webhookSecret = (): string => required("DOCPARSE_TEST_WEBHOOK_SECRET");
export const document = (name: string): Buffer =>
  readFileSync(join(required("DOCPARSE_TEST_FILES"), name));

/** A client of the test stack (TLS, the test's API key) that records its retries. */
export function client(options: ClientOptions = {}): {
  client: DocparseClient;
  retries: RetryEvent[];
} {
  const retries: RetryEvent[] = [];
  const made = new DocparseClient({
    target: target(),
    apiKey: apiKey(),
    tls: { ca: ca() },
    onRetry: (event) => retries.push(event),
    ...options,
  });
  return { client: made, retries };
}
