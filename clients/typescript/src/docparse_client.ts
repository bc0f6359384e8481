// The whole SDK: BaseClient's jobs (client.ts), batches (batches.ts), and here the caller's
// jobs page after page (ListJobs), the tenants' shares for operators (GetTenantShares), a
// job's assets (GetAsset) and its pages while it runs (StreamResult, GetResult with `pages`),
// as the Python SDK's docparse/listing.py, `asset`, `stream_pages` and docparse/page_reads.py.

import { setTimeout as sleep } from "node:timers/promises";
import { fromBinary } from "@bufbuild/protobuf";
import { BatchClient } from "./batches.js";
import { streamed } from "./call_signal.js";
import { ClientError } from "./errors.js";
import { failureOf } from "./failures.js";
import type { Job } from "./gen/docparse/v1/job_pb.js";
import type {
  GetTenantSharesResponse,
  ListJobsResponse,
  StreamResultResponse,
} from "./gen/docparse/v1/parser_service_pb.js";
import {
  type Asset,
  type ReadingPackage,
  ReadingPackageSchema,
} from "./gen/docparse/v1/reading_package_pb.js";
import type { ListJobsOptions, StreamPagesOptions } from "./options.js";
import { AssetChunks } from "./results.js";
import { onePageEach, PAGES_PER_MESSAGE } from "./streamed_pages.js";
import { Retrier } from "./waiting.js";

/** The most jobs one ListJobs page holds (the server caps page_size there). */
export const MAX_PAGE = 500;

/** Some pages of a job's package (`readPages`): `partial` while the job runs (pages not read
 * yet are absent), `draftPages` the drafts among them, in page order. */
export interface PageRead {
  package: ReadingPackage;
  partial: boolean;
  draftPages: number[];
}

/** An asset of a package with the first page (or slide) that shows it; 0: none does. */
export interface ListedAsset {
  asset: Asset;
  page: number;
}

/** The assets of a package, each with the first page or slide that shows it (as the gateway's
 * GET /v1/jobs/{id}/assets lists them). */
export function assetsOf(pkg: ReadingPackage): ListedAsset[] {
  const firstPage = new Map<string, number>();
  for (const shown of [...pkg.pages, ...pkg.slides]) {
    for (const image of shown.images) {
      if (!firstPage.has(image.assetId)) {
        firstPage.set(image.assetId, shown.number);
      }
    }
  }
  return pkg.assets.map((asset) => ({ asset, page: firstPage.get(asset.assetId) ?? 0 }));
}

export class DocparseClient extends BatchClient {
  /** One page of the caller's jobs, newest first (batch files included): in `states` (all
   * when empty), of `batchId` (every job when empty), after `pageToken`. A page may be short,
   * even empty, and still have a `nextPageToken`; an empty token means there are no more.
   * A token of another tenant or of other filters: INVALID_ARGUMENT INVALID_PAGE_TOKEN. */
  async listJobs(options: ListJobsOptions = {}): Promise<ListJobsResponse> {
    const request = {
      states: options.states ?? [],
      batchId: options.batchId ?? "",
      pageSize: options.pageSize ?? 0,
      pageToken: options.pageToken ?? "",
    };
    const answer = await this.retrying("ListJobs", (onTrailer) =>
      this.rpc.listJobs(request, { timeoutMs: this.callTimeoutMs, onTrailer }),
    );
    return answer.response;
  }

  /** Every page from `pageToken` on, each as ListJobs answers it, until the last one; with a
   * `limit`, until that many jobs were handed out, no page asking for more than are left (the
   * last page's `nextPageToken` goes on right after them). A page is asked for only when the
   * one before was taken. */
  async *iterJobPages(
    options: ListJobsOptions = {},
  ): AsyncGenerator<ListJobsResponse, void, undefined> {
    const limit = options.limit ?? 0;
    let pageToken = options.pageToken ?? "";
    let handed = 0;
    for (;;) {
      options.signal?.throwIfAborted();
      let pageSize = options.pageSize || (limit ? MAX_PAGE : 0);
      if (limit) {
        pageSize = Math.min(pageSize, limit - handed);
      }
      const page = await this.listJobs({ ...options, pageSize, pageToken });
      yield page;
      handed += page.jobs.length;
      pageToken = page.nextPageToken;
      if (!pageToken || (limit && handed >= limit)) {
        return;
      }
    }
  }

  /** Every job of the caller (in `states`, of `batchId`), newest first, page after page;
   * at most `limit` when it is set. */
  async *iterJobs(options: ListJobsOptions = {}): AsyncGenerator<Job, void, undefined> {
    for await (const page of this.iterJobPages(options)) {
      yield* page.jobs;
    }
  }

  /** For operators: each tenant with jobs queued or running (its weight, jobs queued, pending
   * per lane and running) and the lanes' caps (`bulkSlots`, `interactiveWindow`, `bulkEvery`,
   * `interactiveReserve`; all 0 when `fairAdmission` is off): GetTenantShares, `GET
   * /v1/admin/tenants` over HTTP. Only for an API key marked `"admin": true` in the gateway's
   * keys file; any other key gets PERMISSION_DENIED ADMIN_ONLY, never retried. */
  async tenantShares(): Promise<GetTenantSharesResponse> {
    const answer = await this.retrying("GetTenantShares", (onTrailer) =>
      this.rpc.getTenantShares({}, { timeoutMs: this.callTimeoutMs, onTrailer }),
    );
    return answer.response;
  }

  /** One asset (an image) of a SUCCEEDED job's package, checked against its size and sha256:
   * its record and bytes. A stream that breaks is read again from the start, as the retry
   * table allows (NOT_FOUND ASSET_NOT_FOUND / JOB_NOT_FOUND are final). */
  async getAsset(jobId: string, assetId: string): Promise<{ asset: Asset; data: Uint8Array }> {
    const chunks = await this.collected(
      "GetAsset",
      () => new AssetChunks(assetId),
      (options) => this.rpc.getAsset({ jobId, assetId }, options),
    );
    return chunks.verified();
  }

  /** The job's pages as they are read (drafts, `final` false), then its final package's pages
   * (`final` true, byte for byte those of `result()`), then a last message with the terminal
   * record (`job`) and no page: StreamResult. A stream that breaks with a retryable error
   * (UNAVAILABLE, a server cutting old connections, ...) is opened again after the `cursor`
   * of the last message yielded, on any replica, within the retry policy (renewed by any
   * message). It asks for up to PAGES_PER_MESSAGE pages a message and yields each page as a
   * message of its own, with its own cursor. */
  async *streamPages(
    jobId: string,
    options: StreamPagesOptions = {},
  ): AsyncGenerator<StreamResultResponse, void, undefined> {
    let cursor = options.cursor ?? "";
    const { signal } = options;
    let retrier = new Retrier("StreamResult", this.policy, Date.now());
    for (;;) {
      let progressed = false;
      try {
        const stream = streamed(
          (callSignal) =>
            this.rpc.streamResult(
              { jobId, cursor, pagesPerMessage: PAGES_PER_MESSAGE },
              {
                timeoutMs: this.policy.timeoutMs,
                signal: callSignal,
                onTrailer: this.trailerSink("StreamResult"),
              },
            ),
          signal,
          this.lingerMs(),
        );
        for await (const message of stream) {
          progressed = true;
          for (const one of onePageEach(message)) {
            cursor = one.cursor; // each page with its own cursor
            yield one;
          }
          if (message.job !== undefined) {
            return; // the terminal record, the last message: a cut after it is no retry
          }
        }
        return; // ended without the terminal record: not expected of a server
      } catch (err) {
        signal?.throwIfAborted();
        if (err instanceof ClientError) {
          throw err;
        }
        if (progressed) {
          retrier = new Retrier("StreamResult", this.policy, Date.now());
        }
        const error = failureOf(err, this.target);
        const delayMs = retrier.onError(error, Date.now());
        this.retried({ method: "StreamResult", error, attempt: retrier.attempts, delayMs, cursor });
        await sleep(delayMs, undefined, { signal });
      }
    }
  }

  /** Some pages of the job's package ("1-5,10,20-"), checked against their sha256, also
   * while the job runs: then `partial` is true (pages not read yet are absent) and
   * `draftPages` names the drafts among them (StreamResult's); a SUCCEEDED job's pages:
   * `partial` false. `readPages(id, job.progress?.readyPages)` gives what a running job's
   * record names; a job's pages are drafted only once someone reads them while it runs, and
   * the first read waits a moment for the pages read before it (`readPages(id, "1-")`).
   * A FAILED or CANCELLED job: the errors of `result`. */
  async readPages(jobId: string, pages: string): Promise<PageRead> {
    const { data, partial, draftPages } = await this.download(jobId, pages);
    return { package: fromBinary(ReadingPackageSchema, data), partial, draftPages };
  }

  /** The assets of a SUCCEEDED job's package (read with `result`, checked), each with the
   * first page or slide that shows it; `getAsset` fetches one's bytes. */
  async listAssets(jobId: string): Promise<ListedAsset[]> {
    return assetsOf(await this.result(jobId));
  }
}
