// @docparse/client: the TypeScript SDK for docparse (see README.md).

export {
  type Answer,
  type ClientOptions,
  DEFAULT_TARGET,
  DocparseClient,
  MESSAGE_LIMIT,
  type RetryEvent,
  type SubmitOptions,
  type TlsOptions,
  type WatchOptions,
  checkSubmitAnswer,
} from "./client.js";
export {
  ClientError,
  ContractError,
  DocparseError,
  JobFailed,
  STATUS_NAMES,
  type StatusName,
  WaitTimeout,
  statusName,
} from "./errors.js";
export {
  DEFAULT_POLICY,
  IDEMPOTENT,
  JobWaiter,
  NEVER_RETRIED_REASONS,
  Retrier,
  TERMINAL,
  type Verdict,
  type WaitPolicy,
  backoffDelay,
  classify,
  gaveUp,
  stateName,
} from "./waiting.js";
export * from "./gen/docparse/v1/error_reason_pb.js";
export * from "./gen/docparse/v1/job_pb.js";
export * from "./gen/docparse/v1/parser_service_pb.js";
export * from "./gen/docparse/v1/reading_package_pb.js";
export { ResultAssembler } from "./results.js";
