// Batches: several files submitted together (CreateBatch), read (GetBatch) and followed
// (WatchBatch), as the Python SDK's submit_batch / batch / watch_batch.

import { randomUUID } from "node:crypto";
import { BaseClient } from "./client.js";
import { ContractError } from "./errors.js";
import { batchFeed } from "./feeds.js";
import type { Batch } from "./gen/docparse/v1/parser_service_pb.js";
import { type BatchOptions, callbackField, type WatchOptions } from "./options.js";
import { BatchWaiter } from "./waiting.js";

/** One file of a batch. */
export interface BatchFileInit {
  fileName: string;
  content: Uint8Array;
}

export class BatchClient extends BaseClient {
  /** Submits the files as one batch in one CreateBatch message (all of them under the
   * message size limit), however often the call has to be retried: every try carries the same
   * request_id, so a repeat answers with the first batch. `callback`: one signed webhook when
   * the last file ended. */
  async createBatch(files: BatchFileInit[], options: BatchOptions = {}): Promise<Batch> {
    const request = {
      files: files.map(({ fileName, content }) => ({ fileName, content })),
      requestId: options.requestId || randomUUID().replaceAll("-", ""),
      languages: options.languages ?? [],
      callback: callbackField(options.callback),
    };
    const answer = await this.retrying("CreateBatch", (onTrailer) =>
      this.rpc.createBatch(request, { timeoutMs: this.callTimeoutMs, onTrailer }),
    );
    return this.batchOf("CreateBatch", answer.response.batch);
  }

  /** The batch's current state: its counters and every file's job (NOT_FOUND BATCH_NOT_FOUND
   * for an unknown batch or another tenant's). */
  async getBatch(batchId: string): Promise<Batch> {
    const answer = await this.retrying("GetBatch", (onTrailer) =>
      this.rpc.getBatch({ batchId }, { timeoutMs: this.callTimeoutMs, onTrailer }),
    );
    return this.batchOf("GetBatch", answer.response.batch);
  }

  /** Every new state of the batch (a higher version) until all its files ended, the last one
   * yielded being that final state: a stream the server cuts is resumed after the last version
   * yielded, GetBatch is polled when streaming fails, as `watch` does for a job. WaitTimeout
   * after the policy's timeoutMs. */
  watchBatch(batchId: string, options: WatchOptions = {}): AsyncGenerator<Batch, void, undefined> {
    const waiter = new BatchWaiter(
      batchId,
      { ...this.policy, ...options.policy },
      Date.now(),
      options.afterVersion ?? 0n,
    );
    return this.follow(waiter, batchFeed(this.rpc, batchId), options.signal);
  }

  private batchOf(method: string, batch: Batch | undefined): Batch {
    if (!batch?.batchId) {
      throw new ContractError(`${method} answered without a batch`);
    }
    return batch;
  }
}
