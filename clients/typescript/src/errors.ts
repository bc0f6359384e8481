// The SDK's errors, under one root, DocparseError: a failed call (the gRPC status code plus the
// stable reason of the google.rpc.ErrorInfo detail the server sends in grpc-status-details-bin,
// README "Error model"), and, as its subclass ClientError, the outcomes that are not one failed
// call: a job that ended FAILED, a wait that ran out of time, an answer the contract rules out.

import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema, RetryInfoSchema } from "./gen/google/rpc/error_details_pb.js";

/** gRPC status code names, indexed by code number (google.rpc.Code). */
export const STATUS_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
] as const;

export type StatusName = (typeof STATUS_NAMES)[number];

/** The name of a gRPC status code number ("UNKNOWN" for numbers outside the table). */
export function statusName(code: number): StatusName {
  return STATUS_NAMES[code] ?? "UNKNOWN";
}

/** The domain of the server's ErrorInfo details. */
export const DOMAIN = "docparse";

/** A failed call: its gRPC status and the server's ErrorInfo (reason "" when none was sent). */
export class DocparseError extends Error {
  override readonly name: string = "DocparseError";
  /** The gRPC status code number (5 = NOT_FOUND, ...). */
  readonly grpcCode: number;
  /** The gRPC status code name: "NOT_FOUND", "UNAUTHENTICATED", ... */
  readonly code: StatusName;
  /** ErrorInfo.reason: "JOB_NOT_FOUND", "API_KEY_MISSING", ... ("" when the server sent none). */
  readonly reason: string;
  /** ErrorInfo.metadata, e.g. `expire_time` of an expired job, `limit` of a rate limit. */
  readonly metadata: Readonly<Record<string, string>>;
  /** The server's message (the status message without code and reason). */
  readonly detail: string;
  /** The wait the server asked for (google.rpc.RetryInfo, or `retry_after_s`), in ms. */
  readonly retryDelayMs: number | undefined;

  constructor(
    code: number,
    reason: string,
    detail: string,
    metadata: Record<string, string> = {},
    retryDelayMs?: number,
  ) {
    super(`${statusName(code)}${reason ? ` ${reason}` : ""}: ${detail}`);
    this.grpcCode = code;
    this.code = statusName(code);
    this.reason = reason;
    this.detail = detail;
    this.metadata = Object.freeze({ ...metadata });
    this.retryDelayMs = retryDelayMs ?? retryAfterFromMetadata(metadata);
  }

  /** NOT_FOUND because the job's retention ended (not because it never existed). */
  get expired(): boolean {
    return this.reason === "JOB_EXPIRED";
  }

  /** Any failure of a call as a DocparseError: ConnectError details decoded, others UNKNOWN. */
  static from(err: unknown): DocparseError {
    if (err instanceof DocparseError) {
      return err;
    }
    const connect = ConnectError.from(err);
    let reason = "";
    let metadata: Record<string, string> = {};
    for (const info of safeDetails(connect, "info")) {
      if (info.domain === DOMAIN || reason === "") {
        reason = info.reason;
        metadata = { ...info.metadata };
      }
    }
    let retryDelayMs: number | undefined;
    for (const retry of safeDetails(connect, "retry")) {
      if (retry.retryDelay) {
        retryDelayMs =
          Number(retry.retryDelay.seconds) * 1000 + Math.round(retry.retryDelay.nanos / 1e6);
      }
    }
    const error = new DocparseError(
      connect.code ?? Code.Unknown,
      reason,
      connect.rawMessage,
      metadata,
      retryDelayMs,
    );
    error.cause = err;
    return error;
  }
}

function safeDetails(err: ConnectError, kind: "info"): ReturnType<typeof infoDetails>;
function safeDetails(err: ConnectError, kind: "retry"): ReturnType<typeof retryDetails>;
function safeDetails(err: ConnectError, kind: "info" | "retry") {
  try {
    return kind === "info" ? infoDetails(err) : retryDetails(err);
  } catch {
    return []; // a detail that does not decode is no reason to hide the status itself
  }
}

function infoDetails(err: ConnectError) {
  return err.findDetails(ErrorInfoSchema);
}

function retryDetails(err: ConnectError) {
  return err.findDetails(RetryInfoSchema);
}

function retryAfterFromMetadata(metadata: Record<string, string>): number | undefined {
  const raw = metadata.retry_after_s ?? "";
  return /^\d{1,6}$/.test(raw) ? Number(raw) * 1000 : undefined;
}

/** An outcome of an SDK call that is not one call's failure, under the same root: never
 * retried, never rewritten on the way out. */
export class ClientError extends DocparseError {
  override readonly name: string = "ClientError";
}

/** The server answered something the API contract rules out: a bug to report, raised at once.
 * INTERNAL UPSTREAM_CONTRACT. */
export class ContractError extends ClientError {
  override readonly name = "ContractError";
  constructor(detail: string) {
    super(13, "UPSTREAM_CONTRACT", detail); // INTERNAL
    this.message = detail;
  }
}

/** The job ended FAILED or CANCELLED: FAILED_PRECONDITION (as GetResult would answer) with the
 * job's own `reason` (CORRUPT_DOCUMENT, ..., CANCELLED); metadata `job_id` and `state`. */
export class JobFailed extends ClientError {
  override readonly name = "JobFailed";
  constructor(
    readonly jobId: string,
    readonly state: string,
    reason: string,
    detail: string,
  ) {
    super(9, reason, detail, { job_id: jobId, state }); // FAILED_PRECONDITION
    this.message = `job ${jobId} ended ${state}: ${reason}: ${detail}`;
  }
}

/** Waiting ran out of time; the job goes on: DEADLINE_EXCEEDED with no reason (no server sent
 * it), carrying what was last seen of the job. */
export class WaitTimeout extends ClientError {
  override readonly name = "WaitTimeout";
  constructor(
    readonly jobId: string,
    readonly lastState: string,
    readonly lastVersion: bigint,
    readonly waitedMs: number,
  ) {
    const seen =
      lastVersion > 0n ? `still ${lastState} (version ${lastVersion})` : "no new record received";
    const detail = `job ${jobId} ${seen} after ${(waitedMs / 1000).toFixed(1)} s; it goes on`;
    super(4, "", detail, { job_id: jobId, state: lastState, version: String(lastVersion) });
    this.message = detail;
  }
}
