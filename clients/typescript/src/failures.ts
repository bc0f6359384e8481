// What a failed call becomes: the server's DocparseError, or one the SDK names for a failure
// that no docparse process answered (as the Python SDK's transport does).

import { Code, ConnectError } from "@connectrpc/connect";
import { DocparseError } from "./errors.js";

export const SERVED_BY = "x-served-by";

/** The DocparseError of a failed call. An UNAVAILABLE that no docparse process answered (no
 * ErrorInfo, no x-served-by: nothing listening, a refused or broken connection, a TLS
 * mismatch or an untrusted certificate) is UNAVAILABLE TARGET_UNREACHABLE naming the target;
 * a message over the size limit gets MESSAGE_TOO_LARGE (both as in the Python SDK). */
export function failureOf(err: unknown, target: string): DocparseError {
  const error = DocparseError.from(err);
  if (error.reason) {
    return error;
  }
  const answered = err instanceof ConnectError && err.metadata.get(SERVED_BY) !== null;
  let translated: DocparseError | undefined;
  if (error.code === "RESOURCE_EXHAUSTED" && /larger than|exceeds|MaxBytes/i.test(error.detail)) {
    translated = new DocparseError(
      8,
      "MESSAGE_TOO_LARGE",
      `a message to or from ${target} is over the size limit: ${error.detail}`,
      { target },
    );
  } else if ((error.code === "UNAVAILABLE" || connectionFailed(err)) && !answered) {
    translated = new DocparseError(
      14,
      "TARGET_UNREACHABLE",
      `no docparse server answered at ${target}: ${error.detail || "no details"}`,
      { target },
    );
  }
  if (translated === undefined) {
    return error;
  }
  translated.cause = err;
  return translated;
}

/** A failure of the connection itself, before any server answered: connect-node reports a
 * TLS handshake that failed (an untrusted certificate) as INTERNAL with the Node error (which
 * has a `code`) as its cause, and plaintext spoken to a TLS port as a CANCELLED stream with no
 * response at all (no headers, no trailers). A server's own error always has trailers. */
function connectionFailed(err: unknown): boolean {
  if (!(err instanceof ConnectError)) {
    return false;
  }
  if (err.code === Code.Unavailable) {
    return true;
  }
  if (![Code.Internal, Code.Unknown, Code.Canceled].includes(err.code)) {
    return false;
  }
  const cause: unknown = err.cause;
  const nodeError =
    cause instanceof Error && typeof (cause as { code?: unknown }).code === "string";
  return nodeError || [...err.metadata.keys()].length === 0;
}

/** The `x-served-by` values of a call's trailers: the replica, then the gateway. */
export function servedByOf(trailers: Headers): string[] {
  const raw = trailers.get(SERVED_BY);
  return raw ? raw.split(",").map((value) => value.trim()) : [];
}
