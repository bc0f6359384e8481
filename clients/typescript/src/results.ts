// Result assembly and verification, as the Python SDK does it (docparse/results.py): GetResult
// chunks are taken in order (each at the offset that follows the last) and the whole is
// checked against the size and sha256 of the ResultRef the first message carries.

import { createHash } from "node:crypto";
import { ContractError, DocparseError } from "./errors.js";
import { type Job, type ResultRef, State } from "./gen/docparse/v1/job_pb.js";
import type { GetResultResponse } from "./gen/docparse/v1/parser_service_pb.js";

const DATA_LOSS = 15;

export class ResultAssembler {
  ref: ResultRef | undefined;
  private readonly chunks: Uint8Array[] = [];
  private received = 0n;

  constructor(readonly jobId: string) {}

  add(message: Pick<GetResultResponse, "result" | "chunk" | "offset">): void {
    if (message.result) {
      this.ref = message.result;
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
