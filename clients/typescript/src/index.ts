// @docparse/client: the TypeScript SDK for docparse (see README.md).

export { DEFAULT_TARGET, DocparseClient, MESSAGE_LIMIT } from "./client.js";
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
  ClientOptions,
  RetryEvent,
  StreamPagesOptions,
  SubmitOptions,
  TlsOptions,
  WatchOptions,
} from "./options.js";
export { type RenderOptions, toHtml } from "./render_html.js";
export { toMarkdown } from "./render_markdown.js";
export { checkSubmitAnswer, ResultAssembler } from "./results.js";
export {
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
  type WaitPolicy,
} from "./waiting.js";
