// The docparse client: one gRPC (HTTP/2) connection to a gateway or a parser_svc replica.

import { randomUUID } from "node:crypto";
import { open, rename, rm, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fromBinary } from "@bufbuild/protobuf";
import { type Client, createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { ClientError, ContractError, DocparseError } from "./errors.js";
import { failureOf, servedByOf } from "./failures.js";
import { type Feed, jobFeed } from "./feeds.js";
import type { Job, ResultRef } from "./gen/docparse/v1/job_pb.js";
import { ParserService } from "./gen/docparse/v1/parser_service_pb.js";
import { type ReadingPackage, ReadingPackageSchema } from "./gen/docparse/v1/reading_package_pb.js";
import type { Answer, ClientOptions, RetryEvent, SubmitOptions, WatchOptions } from "./options.js";
import { callbackField, parseOptionFields } from "./options.js";
import { checkSubmitAnswer, ResultAssembler } from "./results.js";
import {
  DEFAULT_POLICY,
  JobWaiter,
  Retrier,
  type Versioned,
  type Waiter,
  type WaitPolicy,
} from "./waiting.js";

export const DEFAULT_TARGET = "127.0.0.1:50050";
/** The largest message the server accepts (a SubmitJob carries the whole document). */
export const MESSAGE_LIMIT = 65 * 1024 * 1024;
/** A stream left at its terminal record is given this long to end by itself, when onAnswer
 * listens (docparse/transport.py's LEFT_STREAM_END_WAIT_S). */
export const LEFT_STREAM_END_WAIT_MS = 1000;

/** A GetResult answer, verified: with `pages`, `partial` and `draftPages` as it said. */
type Downloaded = { data: Uint8Array; ref: ResultRef; partial: boolean; draftPages: number[] };

/** The client's core: jobs one by one (submit, wait, watch, results, cancel) and the
 * plumbing the other calls share; DocparseClient (docparse_client.ts) is the whole SDK. */
export class BaseClient {
  readonly target: string;
  readonly policy: WaitPolicy;
  readonly callTimeoutMs: number;
  protected readonly rpc: Client<typeof ParserService>;
  private readonly session: Http2SessionManager;
  private readonly onRetry: ((event: RetryEvent) => void) | undefined;
  private readonly onAnswer: ((method: string, servedBy: string[]) => void) | undefined;
  private readonly logger: { info(message: string): void } | undefined;

  constructor(options: ClientOptions = {}) {
    this.target = options.target || process.env.DOCPARSE_TARGET || DEFAULT_TARGET;
    this.policy = { ...DEFAULT_POLICY, ...options.policy };
    this.callTimeoutMs = options.callTimeoutMs ?? 30_000;
    this.onRetry = options.onRetry;
    this.onAnswer = options.onAnswer;
    this.logger = options.logger;
    const apiKey = options.apiKey ?? process.env.DOCPARSE_API_KEY ?? "";
    const tls = options.tls === true ? {} : options.tls || undefined;
    const baseUrl = `${tls ? "https" : "http"}://${this.target}`;
    this.session = new Http2SessionManager(
      baseUrl,
      { pingIntervalMs: 30_000, idleConnectionTimeoutMs: 60_000 },
      tls ? { ca: tls.ca, servername: tls.serverName } : {},
    );
    const interceptors: Interceptor[] = [];
    if (apiKey) {
      interceptors.push((next) => (request) => {
        request.header.set("authorization", `Bearer ${apiKey}`);
        return next(request);
      });
    }
    const transport =
      options.transport ??
      createGrpcTransport({
        baseUrl,
        sessionManager: this.session,
        interceptors,
        readMaxBytes: MESSAGE_LIMIT,
        writeMaxBytes: MESSAGE_LIMIT,
      });
    this.rpc = createClient(ParserService, transport);
  }

  /** Closes the connection; calls in flight fail. */
  close(): void {
    this.session.abort();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  // --- submitting --------------------------------------------------------------------------

  /** Submits once, however often the call itself has to be retried: every try carries the
   * same request_id, so the server returns the first job instead of making a second. The
   * answer may already be terminal (with `waitTimeoutMs`) or still QUEUED/RUNNING. */
  async submit(
    fileName: string,
    content: Uint8Array,
    options: SubmitOptions = {},
  ): Promise<Answer> {
    const request = {
      fileName,
      content,
      requestId: options.requestId || randomUUID().replaceAll("-", ""),
      password: options.password ?? "",
      languages: options.languages ?? [],
      waitTimeoutMs: options.waitTimeoutMs ?? 0,
      ...parseOptionFields(options),
      callback: callbackField(options.callback),
    };
    const timeoutMs = this.callTimeoutMs + (options.waitTimeoutMs ?? 0);
    const answer = await this.retrying("SubmitJob", (onTrailer) =>
      this.rpc.submitJob(request, { timeoutMs, onTrailer }),
    );
    return { job: checkSubmitAnswer(answer.response.job), servedBy: answer.servedBy };
  }

  /** Submits and waits: the SUCCEEDED record, or JobFailed / WaitTimeout / DocparseError. */
  async parse(fileName: string, content: Uint8Array, options: SubmitOptions = {}): Promise<Job> {
    const answer = await this.submit(fileName, content, options);
    return this.wait(answer.job);
  }

  // --- reading -----------------------------------------------------------------------------

  /** The current record of a job (NOT_FOUND / JOB_NOT_FOUND or JOB_EXPIRED when there is none). */
  async getStatus(jobId: string): Promise<Answer> {
    const answer = await this.retrying("GetStatus", (onTrailer) =>
      this.rpc.getStatus({ jobId }, { timeoutMs: this.callTimeoutMs, onTrailer }),
    );
    if (!answer.response.job) {
      throw new ContractError(`GetStatus of ${jobId} answered without a job`);
    }
    return { job: answer.response.job, servedBy: answer.servedBy };
  }

  /** Waits for the job to end (read-only) and returns the SUCCEEDED record; JobFailed for a
   * FAILED or CANCELLED job. A terminal record passed in needs no call at all. */
  async wait(job: Job | string, options: Omit<WatchOptions, "afterVersion"> = {}): Promise<Job> {
    const jobId = typeof job === "string" ? job : job.jobId;
    const waiter = new JobWaiter(jobId, { ...this.policy, ...options.policy }, Date.now());
    if (typeof job !== "string") {
      waiter.observe(job);
    }
    for await (const _ of this.follow(waiter, jobFeed(this.rpc, jobId), options.signal)) {
      // every record is observed by the waiter; wait() only wants the last one
    }
    return waiter.outcome();
  }

  /** Every record newer than `afterVersion` until the terminal one, in strictly increasing
   * versions: a stream the server cuts is resumed after the last version yielded, a record
   * at or below it is never yielded again; after repeated stream failures, or when the
   * server cannot stream, GetStatus is polled. WaitTimeout after the policy's timeoutMs. */
  watch(jobId: string, options: WatchOptions = {}): AsyncGenerator<Job, void, undefined> {
    const waiter = new JobWaiter(
      jobId,
      { ...this.policy, ...options.policy },
      Date.now(),
      options.afterVersion ?? 0n,
    );
    return this.follow(waiter, jobFeed(this.rpc, jobId), options.signal);
  }

  /** The waiting loop (the decisions are the waiter's): yields each new record of `feed`. */
  protected async *follow<R extends Versioned>(
    waiter: Waiter<R>,
    feed: Feed<R>,
    signal?: AbortSignal,
  ): AsyncGenerator<R, void, undefined> {
    let attempt = 0;
    for (let action = waiter.nextAction(); action !== "done"; action = waiter.nextAction()) {
      signal?.throwIfAborted();
      const left = waiter.checkDeadline(Date.now());
      let delay: number;
      try {
        if (action === "stream") {
          delay = waiter.onStreamEnd(yield* this.streamOnce(waiter, feed, left, signal));
        } else {
          const record = await feed.poll({
            timeoutMs: Math.min(this.callTimeoutMs, Math.ceil(left)),
            signal,
            onTrailer: this.trailerSink(feed.pollMethod),
          }); // one read, not retried here: the waiter decides what a failure means
          if (waiter.observe(record)) {
            yield record;
          }
          delay = waiter.afterPoll();
        }
        attempt = 0;
      } catch (err) {
        signal?.throwIfAborted();
        if (err instanceof ClientError) {
          throw err;
        }
        const error = failureOf(err, this.target);
        delay = waiter.onError(error, Date.now());
        attempt += 1;
        this.retried({
          method: action === "stream" ? feed.watchMethod : feed.pollMethod,
          error,
          attempt,
          delayMs: delay,
          afterVersion: waiter.afterVersion,
        });
      }
      if (delay > 0) {
        await sleep(Math.min(delay, Math.max(0, waiter.left(Date.now()))), undefined, { signal });
      }
    }
  }

  /** One watch stream from the waiter's cursor: yields the records the waiter takes as new
   * and returns whether there was any. */
  private async *streamOnce<R extends Versioned>(
    waiter: Waiter<R>,
    feed: Feed<R>,
    left: number,
    signal?: AbortSignal,
  ): AsyncGenerator<R, boolean, undefined> {
    let progressed = false;
    const onTrailer = this.trailerSink(feed.watchMethod);
    const timeoutMs = Math.max(1, Math.ceil(left));
    const lingerMs = this.lingerMs();
    const options = { timeoutMs, signal, onTrailer, lingerMs };
    for await (const record of feed.watch(waiter.afterVersion, options)) {
      waiter.heard();
      if (record !== undefined && waiter.observe(record)) {
        progressed = true;
        yield record;
        if (waiter.finished) {
          break; // the terminal record: the rest adds nothing, and a cut there is no retry
        }
      }
    }
    return progressed;
  }

  /** The reading package of a SUCCEEDED job, checked against the sha256 and size its
   * ResultRef names (DocparseError DATA_LOSS / CHECKSUM_MISMATCH otherwise). */
  async result(jobId: string): Promise<ReadingPackage> {
    const { data } = await this.download(jobId);
    return fromBinary(ReadingPackageSchema, data);
  }

  /** Writes the serialized package to `path` (atomically: a temp file renamed into place),
   * verified by sha256 before it is written and by size on disk after. */
  async downloadResult(jobId: string, path: string): Promise<ResultRef> {
    const { data, ref } = await this.download(jobId);
    const tmp = join(dirname(path), `.${basename(path)}.${randomUUID()}`);
    const file = await open(tmp, "wx", 0o644);
    try {
      await file.writeFile(data);
      await file.sync();
    } finally {
      await file.close();
    }
    try {
      await rename(tmp, path);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
    const size = (await stat(path)).size;
    if (BigInt(size) !== ref.sizeBytes) {
      throw new DocparseError(
        15, // DATA_LOSS
        "WRITE_FAILED",
        `${path} holds ${size} bytes, not the ${ref.sizeBytes} just written`,
      );
    }
    return ref;
  }

  /** GetResult, assembled and verified; a stream that breaks is read again from the start
   * (GetResult is idempotent), as the retry table allows. */
  protected async download(jobId: string, pages = ""): Promise<Downloaded> {
    const assembler = await this.collected(
      "GetResult",
      () => new ResultAssembler(jobId),
      (options) => this.rpc.getResult({ jobId, pages }, options),
    );
    const { partial, draftPages } = assembler;
    return { ...assembler.verifiedBytes(), partial, draftPages };
  }

  /** A download with retries (docparse/operations.py's `collected`): the stream `open` gives
   * read into a new collector each attempt (a broken download starts over). */
  protected async collected<M, C extends { add(message: M): void }>(
    method: string,
    collector: () => C,
    open: (options: { timeoutMs: number; onTrailer: (t: Headers) => void }) => AsyncIterable<M>,
  ): Promise<C> {
    const retrier = new Retrier(method, this.policy, Date.now());
    for (;;) {
      const into = collector();
      try {
        const options = { timeoutMs: this.callTimeoutMs * 10, onTrailer: this.trailerSink(method) };
        for await (const message of open(options)) {
          into.add(message);
        }
        return into;
      } catch (err) {
        if (err instanceof ClientError) {
          throw err;
        }
        const error = failureOf(err, this.target);
        const delayMs = retrier.onError(error, Date.now());
        this.retried({ method, error, attempt: retrier.attempts, delayMs });
        await sleep(delayMs);
      }
    }
  }

  /** Cancels a job that has not ended; returns its record. */
  async cancel(jobId: string): Promise<Job> {
    const answer = await this.retrying("CancelJob", (onTrailer) =>
      this.rpc.cancelJob({ jobId }, { timeoutMs: this.callTimeoutMs, onTrailer }),
    );
    if (!answer.response.job) {
      throw new ContractError(`CancelJob of ${jobId} answered without a job`);
    }
    return answer.response.job;
  }

  // --- plumbing ----------------------------------------------------------------------------

  /** How long a stream left at its terminal record may take to end by itself: only when
   * onAnswer is to hear who answered it (its trailers say so). */
  protected lingerMs(): number {
    return this.onAnswer === undefined ? 0 : LEFT_STREAM_END_WAIT_MS;
  }

  protected trailerSink(method: string): (trailers: Headers) => void {
    return (trailers) => {
      const servedBy = servedByOf(trailers);
      this.onAnswer?.(method, servedBy);
    };
  }

  /** One unary call, retried as the retry table (waiting.ts) allows: every try of a submit
   * carries the same request_id. */
  protected async retrying<T>(
    method: string,
    call: (onTrailer: (trailers: Headers) => void) => Promise<T>,
  ): Promise<{ response: T; servedBy: string[] }> {
    const retrier = new Retrier(method, this.policy, Date.now());
    for (;;) {
      let servedBy: string[] = [];
      const onTrailer = (trailers: Headers) => {
        servedBy = servedByOf(trailers);
        this.onAnswer?.(method, servedBy);
      };
      try {
        const response = await call(onTrailer);
        return { response, servedBy };
      } catch (err) {
        const error = failureOf(err, this.target);
        const delayMs = retrier.onError(error, Date.now());
        this.retried({ method, error, attempt: retrier.attempts, delayMs });
        await sleep(delayMs);
      }
    }
  }

  protected retried(event: RetryEvent): void {
    const { method, error, attempt, delayMs, afterVersion, cursor } = event;
    let resume = afterVersion === undefined ? "" : ` after_version=${afterVersion}`;
    resume += cursor === undefined ? "" : ` cursor=${JSON.stringify(cursor)}`;
    this.logger?.info(
      `docparse: retrying ${method}${resume} in ${(delayMs / 1000).toFixed(1)} s after ` +
        `${error.code} ${error.reason || "NO_REASON"}: ${error.detail} (attempt ${attempt})`,
    );
    this.onRetry?.(event);
  }
}
