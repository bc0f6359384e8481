// @docparse/client: the TypeScript SDK for docparse (see README.md).

export {
  type Answer,
  type ClientOptions,
  checkSubmitAnswer,
  DEFAULT_TARGET,
  DocparseClient,
  MESSAGE_LIMIT,
  type RetryEvent,
  type SubmitOptions,
  type TlsOptions,
  type WatchOptions,
} from "./client.js";
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
export { ResultAssembler } from "./results.js";
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
