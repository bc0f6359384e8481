// How the SDK retries and waits, with no I/O: the same decisions as the Python SDK
// (docparse/waiting.py), so both clients behave alike.
//
// Waiting is read-only. It follows WatchJob and, when a stream breaks, resumes with
// `after_version` = the last version it handed out, on a new call (which may land on another
// replica); records at or below that cursor are never handed out again, so the versions a
// caller sees strictly increase even when a lagging replica answers. After repeated stream
// failures, or when the server cannot stream, it polls GetStatus instead. It never submits.

import { DocparseError, JobFailed, WaitTimeout } from "./errors.js";
import { type Job, State } from "./gen/docparse/v1/job_pb.js";
import type { Batch } from "./gen/docparse/v1/parser_service_pb.js";

export const TERMINAL: ReadonlySet<State> = new Set([
  State.SUCCEEDED,
  State.FAILED,
  State.CANCELLED,
]);

/** "QUEUED", "RUNNING", "SUCCEEDED", ... */
export function stateName(state: State): string {
  return (State[state] ?? `STATE_${state}`).replace(/^STATE_/, "");
}

export interface WaitPolicy {
  /** Give up waiting (the job goes on) after this long: WaitTimeout. */
  timeoutMs: number;
  /** GetStatus polling interval once streaming is off. */
  pollIntervalMs: number;
  /** Backoff after a transient error: first delay, doubled up to the maximum (with jitter). */
  backoffMs: number;
  maxBackoffMs: number;
  /** Stream failures in a row before waiting falls back to polling. */
  streamFailuresBeforePolling: number;
  /** Retried errors with no answer in between for this long end the call or the wait with
   * the last error: a service that is gone is reported, not waited out. */
  unavailableBudgetMs: number;
  /** The longest retry delay a server may name (RATE_LIMITED) that is still waited out. */
  maxRetryDelayMs: number;
}

export const DEFAULT_POLICY: Readonly<WaitPolicy> = Object.freeze({
  timeoutMs: 600_000,
  pollIntervalMs: 1_000,
  backoffMs: 100,
  maxBackoffMs: 5_000,
  streamFailuresBeforePolling: 3,
  unavailableBudgetMs: 30_000,
  maxRetryDelayMs: 60_000,
});

/** Calls that may run twice with the same outcome (as docparse/retries.py's): reads, and
 * SubmitJob and CreateBatch (their request_id makes a repeat answer with the first job or batch). */
export const IDEMPOTENT: ReadonlySet<string> = new Set([
  "SubmitJob",
  "GetStatus",
  "WatchJob",
  "CreateBatch",
  "GetBatch",
  "WatchBatch",
  "GetResult",
  "GetAsset",
  "StreamResult",
  "ListJobs",
]);

/** Reasons never retried, whatever delay the error names. */
export const NEVER_RETRIED_REASONS: ReadonlySet<string> = new Set([
  "DOCUMENT_TOO_LARGE",
  "MESSAGE_TOO_LARGE",
]);

/** The retry table, the same as the Python SDK's (docparse/retries.py; gRFC A6):
 *
 * | failure                                  | retried                                         |
 * |------------------------------------------|-------------------------------------------------|
 * | UNAVAILABLE (any reason)                 | "backoff": jittered exponential backoff, within |
 * |                                          | the policy's unavailableBudgetMs (30 s)         |
 * | DEADLINE_EXCEEDED, ABORTED               | "backoff" for idempotent calls only             |
 * | RESOURCE_EXHAUSTED with a retry delay    | "after-delay": once that delay has passed, if   |
 * | (RetryInfo / `retry_after_s`)            | it is at most maxRetryDelayMs                   |
 * | RESOURCE_EXHAUSTED without one,          | "final" (DOCUMENT_TOO_LARGE; MESSAGE_TOO_LARGE, |
 * | INVALID_ARGUMENT, PERMISSION_DENIED,     | a message over the size limit), as is every     |
 * | UNAUTHENTICATED, INTERNAL, NOT_FOUND, ...| other code: the same call fails the same way    |
 */
export type Verdict = "backoff" | "after-delay" | "final";

export function classify(err: DocparseError, idempotent: boolean): Verdict {
  if (NEVER_RETRIED_REASONS.has(err.reason)) {
    return "final";
  }
  switch (err.code) {
    case "UNAVAILABLE":
      return "backoff";
    case "DEADLINE_EXCEEDED":
    case "ABORTED":
      return idempotent ? "backoff" : "final";
    case "RESOURCE_EXHAUSTED":
      return err.retryDelayMs === undefined ? "final" : "after-delay";
    default:
      return "final";
  }
}

/** `err` saying what was tried before it became final (unchanged after a first try). */
export function gaveUp(
  err: DocparseError,
  what: string,
  attempts: number,
  spentMs: number,
): DocparseError {
  if (attempts <= 1) {
    return err;
  }
  const error = new DocparseError(
    err.grpcCode,
    err.reason,
    `${err.detail} (${what} tried ${attempts} times over ${(spentMs / 1000).toFixed(1)} s)`,
    { ...err.metadata, attempts: String(attempts) },
    err.retryDelayMs,
  );
  error.cause = err.cause;
  return error;
}

/** The retry decisions of one unary call (all its attempts); the client does the I/O. */
export class Retrier {
  attempts = 0;
  failures = 0;

  constructor(
    readonly method: string,
    readonly policy: WaitPolicy,
    readonly started: number,
    readonly random: () => number = Math.random,
  ) {}

  /** The delay before the next attempt, or throws the error that ends the call. */
  onError(err: DocparseError, now: number): number {
    this.attempts += 1;
    const spent = now - this.started;
    const verdict = classify(err, IDEMPOTENT.has(this.method));
    if (verdict === "final") {
      throw gaveUp(err, this.method, this.attempts, spent);
    }
    if (verdict === "after-delay") {
      const delay = err.retryDelayMs ?? 0;
      if (delay > this.policy.maxRetryDelayMs || spent + delay > this.policy.timeoutMs) {
        throw gaveUp(err, this.method, this.attempts, spent);
      }
      return delay;
    }
    this.failures += 1;
    const delay = backoffDelay(this.policy, this.failures, this.random);
    if (spent + delay > this.policy.unavailableBudgetMs) {
      throw gaveUp(err, this.method, this.attempts, spent);
    }
    return delay;
  }
}

/** The delay after the `failures`-th failure in a row: backoffMs doubled each time up to
 * maxBackoffMs, with "equal jitter" (half fixed, half random) so that many clients failing
 * together do not retry in step. */
export function backoffDelay(
  policy: WaitPolicy,
  failures: number,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(policy.backoffMs * 2 ** Math.max(0, failures - 1), policy.maxBackoffMs);
  return Math.max(1, Math.round(ceiling / 2 + (random() * ceiling) / 2));
}

export type Action = "stream" | "poll" | "done";

/** A record a wait follows: a job or a batch, each new state a higher version. */
export interface Versioned {
  version: bigint;
}

/** What a wait knows and decides; the client does the I/O (JobWaiter, BatchWaiter).
 *
 * `cursor` is the last version handed out (a caller's `afterVersion` at first): only newer
 * records are new. `last` is the newest record seen, even one at or below the cursor (a
 * status read after a stream ended): a final `last` ends the wait. */
export abstract class Waiter<R extends Versioned> {
  last: R | undefined;
  cursor: bigint;
  polling = false;
  failures = 0;
  /** Since when every read failed (undefined: the last read was answered). */
  failingSince: number | undefined;
  /** Read the status once before streaming again (a stream ended short of the end). */
  checkStatus = false;
  /** Whether the cursor is a version this waiter received (not one a caller gave). */
  cursorSeen = false;
  /** "job" or "batch", for messages. */
  abstract readonly kind: string;

  constructor(
    readonly id: string,
    readonly policy: WaitPolicy,
    readonly started: number,
    afterVersion: bigint = 0n,
    readonly random: () => number = Math.random,
  ) {
    this.cursor = afterVersion;
  }

  /** Whether the wait ends with this record. */
  abstract isFinal(record: R): boolean;

  /** The record's state as WaitTimeout names it ("RUNNING", "at 2/3 files ended"). */
  abstract stateText(record: R): string;

  get afterVersion(): bigint {
    return this.cursor;
  }

  /** Any answer (a record, a heartbeat): the service is there. */
  heard(): void {
    this.failingSince = undefined;
  }

  /** Takes a record; true when it is newer than the cursor (older ones, e.g. from a lagging
   * replica, are not handed out again). Any progress resets the failure count. */
  observe(record: R): boolean {
    this.heard();
    if (this.last === undefined || record.version > this.last.version) {
      this.last = record;
    }
    if (record.version <= this.cursor) {
      return false;
    }
    this.cursor = record.version;
    this.cursorSeen = true;
    this.failures = 0;
    return true;
  }

  get finished(): boolean {
    return this.last !== undefined && this.isFinal(this.last);
  }

  nextAction(): Action {
    if (this.finished) {
      return "done";
    }
    return this.polling || this.checkStatus ? "poll" : "stream";
  }

  /** A stream ended OK. Unless it brought the terminal record, read the status once before
   * streaming again (the job may have ended at the cursor); a stream that brought nothing
   * new counts as a failure, so reconnects back off instead of spinning. */
  onStreamEnd(progressed: boolean): number {
    if (this.finished) {
      return 0;
    }
    this.checkStatus = true;
    if (progressed) {
      return 0;
    }
    this.failures += 1;
    return backoffDelay(this.policy, this.failures, this.random);
  }

  /** The delay after a GetStatus answer: none after the one read that follows a stream end
   * (streaming resumes at once), the polling interval when polling. */
  afterPoll(): number {
    const quick = this.checkStatus && !this.polling;
    this.checkStatus = false;
    return this.finished || quick ? 0 : this.policy.pollIntervalMs;
  }

  /** Decides what a failed read means: the delay before the next try, or throws (NOT_FOUND
   * and other final errors; transient ones after `unavailableBudgetMs` without an answer). */
  onError(err: DocparseError, now: number): number {
    const cannotStream = err.code === "UNIMPLEMENTED";
    if ((cannotStream || err.reason === "TOO_MANY_STREAMS") && !this.polling) {
      this.polling = true; // poll instead (at our stream limit: poll, not knock again)
      return 0;
    }
    const lagging = err.reason === "AFTER_VERSION_AHEAD" && this.cursorSeen; // a stale read
    const verdict = lagging ? "backoff" : classify(err, true);
    this.failingSince ??= now;
    const spent = now - this.failingSince;
    this.failures += 1;
    if (verdict === "final") {
      throw err;
    }
    if (verdict === "after-delay") {
      const delay = err.retryDelayMs ?? 0;
      if (delay > this.policy.maxRetryDelayMs) {
        throw err;
      }
      return delay;
    }
    if (spent >= this.policy.unavailableBudgetMs) {
      throw gaveUp(err, `the wait for ${this.kind} ${this.id}`, this.failures, spent);
    }
    if (!this.polling && this.failures >= this.policy.streamFailuresBeforePolling) {
      this.polling = true;
    }
    return backoffDelay(this.policy, this.failures, this.random);
  }

  left(now: number): number {
    return this.started + this.policy.timeoutMs - now;
  }

  /** The time left, or WaitTimeout carrying the id and the last state seen. */
  checkDeadline(now: number): number {
    const left = this.left(now);
    if (left <= 0) {
      throw new WaitTimeout(
        this.id,
        this.last ? this.stateText(this.last) : "UNKNOWN",
        this.last?.version ?? 0n,
        now - this.started,
      );
    }
    return left;
  }
}

/** A job's wait: it ends with a terminal record. */
export class JobWaiter extends Waiter<Job> {
  readonly kind = "job";

  get jobId(): string {
    return this.id;
  }

  isFinal(record: Job): boolean {
    return TERMINAL.has(record.state);
  }

  stateText(record: Job): string {
    return stateName(record.state);
  }

  /** The terminal record, or JobFailed with the job's reason. */
  outcome(): Job {
    const job = this.last;
    if (job === undefined || !TERMINAL.has(job.state)) {
      throw new Error(`job ${this.jobId} has not ended`);
    }
    if (job.state !== State.SUCCEEDED) {
      throw new JobFailed(
        job.jobId,
        stateName(job.state),
        job.error?.reason ?? "",
        job.error?.message ?? "",
      );
    }
    return job;
  }
}

/** A batch's wait: it ends once every file ended (as docparse/waiting.py's BatchWaiter). */
export class BatchWaiter extends Waiter<Batch> {
  readonly kind = "batch";

  isFinal(record: Batch): boolean {
    return record.total > 0 && record.completed >= record.total;
  }

  stateText(record: Batch): string {
    return `at ${record.completed}/${record.total} files ended`;
  }
}
