// How a wait reads what it follows (as docparse/waiting.py's Feed): a job through WatchJob and
// GetStatus, a batch through WatchBatch and GetBatch. The client's follow loop does the rest.

import type { Client } from "@connectrpc/connect";
import { streamed } from "./call_signal.js";
import { ContractError } from "./errors.js";
import type { Job } from "./gen/docparse/v1/job_pb.js";
import type { Batch, ParserService } from "./gen/docparse/v1/parser_service_pb.js";

/** What one read of a feed is given: its deadline, an abort signal and its trailers' sink. */
export interface CallOptions {
  timeoutMs: number;
  signal?: AbortSignal;
  onTrailer: (trailers: Headers) => void;
  /** How long a stream left at its terminal record is given to end by itself (streamed). */
  lingerMs?: number;
}

export interface Feed<R> {
  /** The streaming call and the unary read that polling makes instead. */
  watchMethod: string;
  pollMethod: string;
  /** The stream's messages from `afterVersion` on: a record, or undefined for a heartbeat. */
  watch(afterVersion: bigint, options: CallOptions): AsyncIterable<R | undefined>;
  /** The current record. */
  poll(options: CallOptions): Promise<R>;
}

type Rpc = Client<typeof ParserService>;

/** What connect is given of a read's options. */
function connectOptions({ timeoutMs, signal, onTrailer }: CallOptions) {
  return { timeoutMs, signal, onTrailer };
}

/** The picked messages of the stream `open` makes (with its own signal: streamed). */
async function* picked<M, R>(
  open: (signal: AbortSignal) => AsyncIterable<M>,
  options: CallOptions,
  pick: (message: M) => R | undefined,
): AsyncGenerator<R | undefined, void, undefined> {
  for await (const message of streamed(open, options.signal, options.lingerMs)) {
    yield pick(message);
  }
}

export function jobFeed(rpc: Rpc, jobId: string): Feed<Job> {
  return {
    watchMethod: "WatchJob",
    pollMethod: "GetStatus",
    watch: (afterVersion, options) =>
      picked(
        (signal) => rpc.watchJob({ jobId, afterVersion }, { ...connectOptions(options), signal }),
        options,
        (m) => (m.event.case === "job" ? m.event.value : undefined),
      ),
    poll: async (options) => {
      const response = await rpc.getStatus({ jobId }, options);
      if (!response.job) {
        throw new ContractError(`GetStatus of ${jobId} answered without a job`);
      }
      return response.job;
    },
  };
}

export function batchFeed(rpc: Rpc, batchId: string): Feed<Batch> {
  return {
    watchMethod: "WatchBatch",
    pollMethod: "GetBatch",
    watch: (afterVersion, options) =>
      picked(
        (signal) =>
          rpc.watchBatch({ batchId, afterVersion }, { ...connectOptions(options), signal }),
        options,
        (m) => (m.event.case === "batch" ? m.event.value : undefined),
      ),
    poll: async (options) => {
      const response = await rpc.getBatch({ batchId }, options);
      if (!response.batch) {
        throw new ContractError(`GetBatch of ${batchId} answered without a batch`);
      }
      return response.batch;
    },
  };
}
