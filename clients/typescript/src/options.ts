// What a DocparseClient is given and answers with: its options, a submit's, a batch's, a
// watch's and a listing's options, an answer and what it says about a retry.

import type { Transport } from "@connectrpc/connect";
import type { DocparseError } from "./errors.js";
import { ImageMode, type Job, OcrMode, type State } from "./gen/docparse/v1/job_pb.js";
import type { WaitPolicy } from "./waiting.js";

export interface TlsOptions {
  /** PEM root certificate(s) to trust instead of the system's (a self-signed gateway). */
  ca?: string | Buffer;
  /** The name the certificate must carry, when it is not the target's host. */
  serverName?: string;
}

/** What the SDK tells about a retry: the call, why, and how long it waits before the next try. */
export interface RetryEvent {
  method: string;
  error: DocparseError;
  attempt: number;
  delayMs: number;
  /** WatchJob: the version the next stream resumes after. */
  afterVersion?: bigint;
  /** StreamResult: the cursor the next stream resumes after. */
  cursor?: string;
}

export interface ClientOptions {
  /** host:port of a gateway (or a parser_svc replica); default $DOCPARSE_TARGET or 127.0.0.1:50050. */
  target?: string;
  /** Sent as `authorization: Bearer <key>`; default $DOCPARSE_API_KEY; "" sends none. */
  apiKey?: string;
  /** TLS: true uses the system's roots; an object gives a CA and/or a server name. Default off
   * (plaintext HTTP/2, for a local stack). */
  tls?: boolean | TlsOptions;
  /** Deadline of each unary call, ms (default 30 s). */
  callTimeoutMs?: number;
  /** How waiting and retries behave (defaults: DEFAULT_POLICY). */
  policy?: Partial<WaitPolicy>;
  /** Told about every retry (a cut watch stream resumed, a submit repeated, ...). */
  onRetry?: (event: RetryEvent) => void;
  /** Where retries are logged, one line each (e.g. `console`); default: nowhere. */
  logger?: { info(message: string): void };
  /** Told who answered each call: the `x-served-by` values (the replica, then the gateway). */
  onAnswer?: (method: string, servedBy: string[]) => void;
  /** A Connect transport to call through instead of the client's own HTTP/2 one (`target`,
   * `apiKey` and `tls` are then the transport's business): e.g. `createRouterTransport` to
   * script a server in tests. */
  transport?: Transport;
}

export interface SubmitOptions {
  /** Idempotency key: the same request_id returns the first job (a new UUID when omitted). */
  requestId?: string;
  /** For encrypted documents; never stored or logged by the server. */
  password?: string;
  /** OCR language hints, BCP-47 ("en", "de", "zh-Hant"); empty: detected per page. */
  languages?: string[];
  /** How long the server may wait for the job to end before answering (the sync answer). */
  waitTimeoutMs?: number;
  /** PDF pages to read, 1-based: "1-5,10,20-" (default: every page). A page past the last one
   * is refused at submit, INVALID_ARGUMENT PAGE_RANGE_PAST_END naming the page count (a
   * damaged PDF only the parse can count: the job ends FAILED with that reason). */
  pages?: string;
  /** Images in the package: "none"; "referenced" (the server's default: every image listed, its
   * bytes stored when the document keeps them as JPEG); "all" (every image stored, re-encoded
   * as PNG when needed). */
  images?: "none" | "referenced" | "all";
  /** When pages are OCR'd: "auto" (default: scanned pages), "force" (every page), "off". */
  ocrMode?: "auto" | "force" | "off";
  /** OCR render resolution, 72 to 400 dots per inch (default: the server's). */
  ocrDpi?: number;
  /** A signed webhook when the job ends (see CallbackOptions). */
  callback?: CallbackOptions;
}

/** Where to be told that a job (or a batch) ended: a signed webhook, delivered at least once.
 * Checked at submit: INVALID_ARGUMENT CALLBACK_INVALID, CALLBACK_NOT_ALLOWED or
 * CALLBACK_SECRET_UNKNOWN. */
export interface CallbackOptions {
  /** An https:// URL (http:// only where the server allows it, e.g. a local stack). */
  url: string;
  /** The name of a signing secret the tenant registered (default: the server's default). */
  secretName?: string;
}

/** The Callback message of `callback` (undefined: nobody is called). */
export function callbackField(
  callback: CallbackOptions | undefined,
): { url: string; secretName: string } | undefined {
  return callback && { url: callback.url, secretName: callback.secretName ?? "" };
}

export interface BatchOptions {
  /** Idempotency key: the same request_id returns the first batch (a new UUID when omitted). */
  requestId?: string;
  /** OCR language hints for every file, as SubmitOptions.languages. */
  languages?: string[];
  /** One signed webhook for the whole batch, once its last file ended ("batch.completed"). */
  callback?: CallbackOptions;
}

export interface ListJobsOptions {
  /** Only jobs in these states (default: every state). */
  states?: State[];
  /** Only the files of this batch (default: every job). */
  batchId?: string;
  /** Jobs per page: 0 or unset means the server's 50; it caps at 500. */
  pageSize?: number;
  /** The `nextPageToken` of an earlier page, with the same filters; "" for the first page. */
  pageToken?: string;
  /** iterJobs / iterJobPages: stop after this many jobs, no page asking for more than are left
   * (so the last page's token goes on right after them); 0 or unset: every job. */
  limit?: number;
  signal?: AbortSignal;
}

const IMAGE_MODES = {
  none: ImageMode.NONE,
  referenced: ImageMode.REFERENCED,
  all: ImageMode.ALL,
} as const;
const OCR_MODES = { auto: OcrMode.AUTO, force: OcrMode.FORCE, off: OcrMode.OFF } as const;

/** SubmitJobRequest's parse option fields for `options` (unset: the server's defaults). */
export function parseOptionFields(options: SubmitOptions): {
  pages: string;
  images: ImageMode;
  ocrMode: OcrMode;
  ocrDpi: number;
} {
  return {
    pages: options.pages ?? "",
    images: options.images ? IMAGE_MODES[options.images] : ImageMode.UNSPECIFIED,
    ocrMode: options.ocrMode ? OCR_MODES[options.ocrMode] : OcrMode.UNSPECIFIED,
    ocrDpi: options.ocrDpi ?? 0,
  };
}

export interface Answer {
  job: Job;
  /** The `x-served-by` trailer values: the parser_svc replica, then the gateway. */
  servedBy: string[];
}

export interface WatchOptions {
  /** Only records newer than this version (the resume cursor of an earlier watch). */
  afterVersion?: bigint;
  policy?: Partial<WaitPolicy>;
  signal?: AbortSignal;
}

export interface StreamPagesOptions {
  /** Resume after this `cursor` (of the last message an earlier stream gave); "" from the start. */
  cursor?: string;
  signal?: AbortSignal;
}
