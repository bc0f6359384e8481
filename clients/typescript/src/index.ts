// @docparse/client: the TypeScript SDK for docparse (see README.md).

export { BatchClient, type BatchFileInit } from "./batches.js";
export { BaseClient, DEFAULT_TARGET, MESSAGE_LIMIT } from "./client.js";
export {
  assetsOf,
  DocparseClient,
  type ListedAsset,
  MAX_PAGE,
  type PageRead,
} from "./docparse_client.js";
export {
  ClientError,
  ContractError,
  DocparseError,
  JobFailed,
  STATUS_NAMES,
  type StatusName,
  statusName,
  WaitTimeout,
} from "./errors.js";
export * from "./gen/docparse/v1/error_reason_pb.js";
export * from "./gen/docparse/v1/job_pb.js";
export * from "./gen/docparse/v1/parser_service_pb.js";
export * from "./gen/docparse/v1/reading_package_pb.js";
export type {
  Answer,
  BatchOptions,
  CallbackOptions,
  ClientOptions,
  ListJobsOptions,
  RetryEvent,
  StreamPagesOptions,
  SubmitOptions,
  TlsOptions,
  WatchOptions,
} from "./options.js";
export { type RenderOptions, toHtml } from "./render_html.js";
export { toMarkdown } from "./render_markdown.js";
export { AssetChunks, checkSubmitAnswer, ResultAssembler } from "./results.js";
export { onePageEach, PAGES_PER_MESSAGE } from "./streamed_pages.js";
export {
  BatchWaiter,
  backoffDelay,
  classify,
  DEFAULT_POLICY,
  gaveUp,
  IDEMPOTENT,
  JobWaiter,
  NEVER_RETRIED_REASONS,
  Retrier,
  stateName,
  TERMINAL,
  type Verdict,
  type Versioned,
  Waiter,
  type WaitPolicy,
} from "./waiting.js";
