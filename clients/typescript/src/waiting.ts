// How the SDK retries and waits, with no I/O: the same decisions as the Python SDK
// (docparse/waiting.py), so both clients behave alike.
//
// Waiting is read-only. It follows WatchJob and, when a stream breaks, resumes with
// `after_version` = the last version it handed out, on a new call (which may land on another
// replica); records at or below that cursor are never handed out again, so the versions a
// caller sees strictly increase even when a lagging replica answers. After repeated stream
// failures, or when the server cannot stream, it polls GetStatus instead. It never submits.

import { type Job, State } from "./gen/docparse/v1/job_pb.js";
import { DocparseError, JobFailed, WaitTimeout } from "./errors.js";

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
  /** Transient errors with no answer in between for this long end the wait with the last
   * error: a service that is gone is reported, not waited out. */
  unavailableBudgetMs: number;
}

export const DEFAULT_POLICY: Readonly<WaitPolicy> = Object.freeze({
  timeoutMs: 600_000,
  pollIntervalMs: 1_000,
  backoffMs: 100,
  maxBackoffMs: 5_000,
  streamFailuresBeforePolling: 3,
  unavailableBudgetMs: 30_000,
});

/** What may be retried (issue 13's table; gRFC A6): UNAVAILABLE always; DEADLINE_EXCEEDED and
 * ABORTED only for idempotent calls (reads, and SubmitJob with its request_id);
 * RESOURCE_EXHAUSTED only when the server names a retry delay (a rate limit), after that
 * delay; never INVALID_ARGUMENT, PERMISSION_DENIED, UNAUTHENTICATED, INTERNAL, NOT_FOUND or a
 * RESOURCE_EXHAUSTED without a delay (DOCUMENT_TOO_LARGE). Returns the delay the server asked
 * for (0 when none), or undefined when the error is final. */
export function retryable(err: DocparseError, idempotent: boolean): number | undefined {
  switch (err.code) {
    case "UNAVAILABLE":
      return 0;
    case "DEADLINE_EXCEEDED":
    case "ABORTED":
      return idempotent ? 0 : undefined;
    case "RESOURCE_EXHAUSTED":
      return err.retryDelayMs;
    default:
      return undefined;
  }
}

/** Full-jitter exponential backoff: a random delay up to backoffMs * 2^(failures-1), capped. */
export function backoffDelay(
  policy: WaitPolicy,
  failures: number,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(policy.backoffMs * 2 ** Math.max(0, failures - 1), policy.maxBackoffMs);
  return Math.max(1, Math.round(ceiling * (0.5 + random() / 2)));
}

export type Action = "stream" | "poll" | "done";

/** What a wait knows and decides; the client does the I/O.
 *
 * `cursor` is the last version handed out (a caller's `afterVersion` at first): only newer
 * records are new. `last` is the newest record seen, even one at or below the cursor (a
 * status read after a stream ended): a terminal `last` ends the wait. */
export class JobWaiter {
  last: Job | undefined;
  cursor: bigint;
  polling = false;
  failures = 0;
  /** Since when every read failed (undefined: the last read was answered). */
  failingSince: number | undefined;
  /** Read the status once before streaming again (a stream ended short of the end). */
  checkStatus = false;
  /** Whether the cursor is a version this waiter received (not one a caller gave). */
  cursorSeen = false;

  constructor(
    readonly jobId: string,
    readonly policy: WaitPolicy,
    readonly started: number,
    afterVersion: bigint = 0n,
    readonly random: () => number = Math.random,
  ) {
    this.cursor = afterVersion;
  }

  get afterVersion(): bigint {
    return this.cursor;
  }

  /** Any answer (a record, a heartbeat): the service is there. */
  heard(): void {
    this.failingSince = undefined;
  }

  /** Takes a record; true when it is newer than the cursor (older ones, e.g. from a lagging
   * replica, are not handed out again). Any progress resets the failure count. */
  observe(record: Job): boolean {
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
    return this.last !== undefined && TERMINAL.has(this.last.state);
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
    const asked = lagging ? 0 : retryable(err, true);
    if (asked === undefined) {
      throw err;
    }
    this.failingSince ??= now;
    if (now - this.failingSince >= this.policy.unavailableBudgetMs) {
      throw err;
    }
    this.failures += 1;
    if (!this.polling && this.failures >= this.policy.streamFailuresBeforePolling) {
      this.polling = true;
    }
    return Math.max(asked, backoffDelay(this.policy, this.failures, this.random));
  }

  left(now: number): number {
    return this.started + this.policy.timeoutMs - now;
  }

  /** The time left, or WaitTimeout carrying the id and the last state seen. */
  checkDeadline(now: number): number {
    const left = this.left(now);
    if (left <= 0) {
      throw new WaitTimeout(
        this.jobId,
        this.last ? stateName(this.last.state) : "UNKNOWN",
        this.last?.version ?? 0n,
        now - this.started,
      );
    }
    return left;
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
