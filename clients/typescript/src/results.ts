// Result assembly and verification, as the Python SDK does it (docparse/results.py): GetResult
// chunks are taken in order (each at the offset that follows the last) and the whole is
// checked against the size and sha256 of the ResultRef the first message carries.

import { createHash } from "node:crypto";
import { ContractError, DocparseError } from "./errors.js";
import { type Job, type ResultRef, State } from "./gen/docparse/v1/job_pb.js";
import type { GetAssetResponse, GetResultResponse } from "./gen/docparse/v1/parser_service_pb.js";
import type { Asset } from "./gen/docparse/v1/reading_package_pb.js";

const DATA_LOSS = 15;

export class ResultAssembler {
  ref: ResultRef | undefined;
  /** What the first message of a GetResult with `pages` says: the job had not ended, and
   * which of the pages sent are drafts. */
  partial = false;
  draftPages: number[] = [];
  private readonly chunks: Uint8Array[] = [];
  private received = 0n;

  constructor(readonly jobId: string) {}

  add(
    message: Pick<GetResultResponse, "result" | "chunk" | "offset"> &
      Partial<Pick<GetResultResponse, "partial" | "draftPages">>,
  ): void {
    if (message.result) {
      this.ref = message.result;
    }
    if (message.offset === 0n) {
      this.partial = message.partial ?? false;
      this.draftPages = [...(message.draftPages ?? [])];
    }
    if (message.offset !== this.received) {
      throw new ContractError(
        `result of ${this.jobId}: chunk at offset ${message.offset}, expected ${this.received}`,
      );
    }
    this.chunks.push(message.chunk);
    this.received += BigInt(message.chunk.length);
  }

  /** The bytes, once their size and sha256 match the ResultRef; DocparseError DATA_LOSS
   * CHECKSUM_MISMATCH otherwise (nothing unverified is ever handed out). */
  verifiedBytes(): { data: Uint8Array; ref: ResultRef } {
    const ref = this.ref;
    if (!ref?.sha256) {
      throw new ContractError(`result of ${this.jobId} came without its sha256`);
    }
    const data = Buffer.concat(this.chunks);
    const digest = createHash("sha256").update(data).digest("hex");
    if (digest !== ref.sha256 || BigInt(data.length) !== ref.sizeBytes) {
      throw new DocparseError(
        DATA_LOSS,
        "CHECKSUM_MISMATCH",
        `result of ${this.jobId}: got ${data.length} bytes sha256 ${digest}, ` +
          `expected ${ref.sizeBytes} bytes sha256 ${ref.sha256}`,
        { job_id: this.jobId },
      );
    }
    return { data, ref };
  }
}

/** Collects GetAsset chunks in order and checks their size and sha256 against the Asset the
 * first message carries (docparse/results.py's AssetChunks). */
export class AssetChunks {
  asset: Asset | undefined;
  private readonly chunks: Uint8Array[] = [];
  private received = 0n;

  constructor(readonly assetId: string) {}

  add(message: Pick<GetAssetResponse, "asset" | "chunk" | "offset">): void {
    if (message.asset) {
      this.asset = message.asset;
    }
    if (message.offset !== this.received) {
      throw new ContractError(
        `asset ${this.assetId}: chunk at offset ${message.offset}, expected ${this.received}`,
      );
    }
    this.chunks.push(message.chunk);
    this.received += BigInt(message.chunk.length);
  }

  /** The Asset record and its bytes, once size and sha256 match; DATA_LOSS CHECKSUM_MISMATCH
   * otherwise. */
  verified(): { asset: Asset; data: Uint8Array } {
    const asset = this.asset;
    if (!asset?.sha256) {
      throw new ContractError(`asset ${this.assetId} came without its sha256`);
    }
    const data = Buffer.concat(this.chunks);
    const digest = createHash("sha256").update(data).digest("hex");
    if (digest !== asset.sha256 || BigInt(data.length) !== asset.sizeBytes) {
      throw new DocparseError(
        DATA_LOSS,
        "CHECKSUM_MISMATCH",
        `asset ${this.assetId}: got ${data.length} bytes sha256 ${digest}, ` +
          `expected ${asset.sizeBytes} bytes sha256 ${asset.sha256}`,
        { asset_id: this.assetId },
      );
    }
    return { asset, data };
  }
}

/** A SubmitJob answer must name a job in a real state; anything else is a contract error. */
export function checkSubmitAnswer(job: Job | undefined): Job {
  if (!job?.jobId || job.state === State.UNSPECIFIED) {
    throw new ContractError("SubmitJob answered without a usable job");
  }
  if (job.state === State.SUCCEEDED && !job.result?.sha256) {
    throw new ContractError(`job ${job.jobId} is SUCCEEDED but names no result`);
  }
  return job;
}
