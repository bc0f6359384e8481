// The SDK's decisions without a server: the retry table, resume-by-version, result checks and
// error decoding. `npm test` runs this file; tests/docparse/test_ts_sdk.py runs it and the live ones.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createServer } from "node:net";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import { ErrorInfoSchema, RetryInfoSchema } from "../src/gen/google/rpc/error_details_pb.js";
import {
  AssetChunks,
  AssetSchema,
  assetsOf,
  BatchSchema,
  BatchWaiter,
  ClientError,
  ContractError,
  classify,
  DEFAULT_POLICY,
  DocparseClient,
  DocparseError,
  type Job,
  JobFailed,
  JobSchema,
  JobWaiter,
  PAGES_PER_MESSAGE,
  ParserService,
  ReadingPackageSchema,
  ResultAssembler,
  ResultRefSchema,
  Retrier,
  type RetryEvent,
  State,
  type StreamResultResponse,
  StreamResultResponseSchema,
  WaitTimeout,
} from "../src/index.js";

const job = (version: number, state = State.RUNNING, done = 0) =>
  create(JobSchema, {
    jobId: "j",
    version: BigInt(version),
    state,
    progress: { done, total: 10, stage: "text" },
  });

const error = (code: number, reason = "", metadata: Record<string, string> = {}) =>
  new DocparseError(code, reason, "test", metadata);

describe("retry table", () => {
  it("retries UNAVAILABLE, and DEADLINE_EXCEEDED / ABORTED only for idempotent calls", () => {
    assert.equal(classify(error(Code.Unavailable), false), "backoff");
    assert.equal(classify(error(Code.DeadlineExceeded), true), "backoff");
    assert.equal(classify(error(Code.DeadlineExceeded), false), "final");
    assert.equal(classify(error(Code.Aborted), true), "backoff");
    assert.equal(classify(error(Code.Aborted), false), "final");
  });

  it("retries RESOURCE_EXHAUSTED only after the delay the server names", () => {
    assert.equal(classify(error(Code.ResourceExhausted, "DOCUMENT_TOO_LARGE"), true), "final");
    assert.equal(classify(error(Code.ResourceExhausted, "MESSAGE_TOO_LARGE"), true), "final");
    const limited = error(Code.ResourceExhausted, "RATE_LIMITED", { retry_after_s: "2" });
    assert.equal(classify(limited, true), "after-delay");
    const retrier = new Retrier("SubmitJob", DEFAULT_POLICY, 0);
    assert.equal(retrier.onError(limited, 10), 2000, "waits exactly the delay it was told");
    const tooLong = error(Code.ResourceExhausted, "RATE_LIMITED", { retry_after_s: "3600" });
    assert.throws(() => new Retrier("SubmitJob", DEFAULT_POLICY, 0).onError(tooLong, 0), {
      reason: "RATE_LIMITED",
    });
  });

  it("never retries what cannot succeed", () => {
    for (const code of [
      Code.InvalidArgument,
      Code.PermissionDenied,
      Code.Unauthenticated,
      Code.Internal,
      Code.NotFound,
      Code.FailedPrecondition,
      Code.Unknown,
    ]) {
      assert.equal(classify(error(code), true), "final", `code ${code}`);
    }
  });

  it("gives up UNAVAILABLE after the budget, saying what was tried", () => {
    const retrier = new Retrier("GetStatus", DEFAULT_POLICY, 0, () => 0.5);
    let now = 0;
    const failed = (() => {
      for (;;) {
        try {
          now += retrier.onError(error(Code.Unavailable, "TARGET_UNREACHABLE"), now);
        } catch (err) {
          return err;
        }
      }
    })();
    assert.ok(failed instanceof DocparseError);
    assert.equal(failed.reason, "TARGET_UNREACHABLE");
    assert.match(failed.message, /GetStatus tried \d+ times over \d+\.\d s/);
    assert.ok(now <= DEFAULT_POLICY.unavailableBudgetMs, `retried for ${now} ms`);
    assert.ok(now >= DEFAULT_POLICY.unavailableBudgetMs - DEFAULT_POLICY.maxBackoffMs);
  });
});

describe("waiting resumes by version", () => {
  it("hands out only records newer than the cursor, which never goes back", () => {
    const waiter = new JobWaiter("j", DEFAULT_POLICY, 0);
    assert.equal(waiter.observe(job(3)), true);
    assert.equal(waiter.observe(job(5)), true);
    // A stream cut here resumes after version 5.
    assert.equal(waiter.onError(error(Code.Unavailable), 10) > 0, true);
    assert.equal(waiter.afterVersion, 5n);
    assert.equal(waiter.nextAction(), "stream");
    // A lagging replica answers with older records: not handed out, cursor stays.
    assert.equal(waiter.observe(job(4)), false);
    assert.equal(waiter.observe(job(5)), false);
    assert.equal(waiter.afterVersion, 5n);
    assert.equal(waiter.observe(job(6, State.SUCCEEDED, 10)), true);
    assert.equal(waiter.nextAction(), "done");
    assert.equal(waiter.outcome().version, 6n);
  });

  it("starts after a caller's version and treats a lagging AFTER_VERSION_AHEAD as transient", () => {
    const waiter = new JobWaiter("j", DEFAULT_POLICY, 0, 7n);
    assert.equal(waiter.observe(job(7)), false);
    const ahead = error(Code.OutOfRange, "AFTER_VERSION_AHEAD");
    assert.throws(() => waiter.onError(ahead, 1), DocparseError); // the caller's own cursor
    assert.equal(waiter.observe(job(8)), true);
    assert.ok(waiter.onError(ahead, 2) > 0); // a replica behind the version we received
  });

  it("reads the status once after a stream that ended short of the end", () => {
    const waiter = new JobWaiter("j", DEFAULT_POLICY, 0);
    waiter.observe(job(2));
    assert.equal(waiter.onStreamEnd(true), 0);
    assert.equal(waiter.nextAction(), "poll");
    assert.equal(waiter.afterPoll(), 0);
    assert.equal(waiter.nextAction(), "stream");
  });

  it("falls back to polling after repeated stream failures or when streams are refused", () => {
    const waiter = new JobWaiter("j", DEFAULT_POLICY, 0);
    for (let i = 0; i < DEFAULT_POLICY.streamFailuresBeforePolling; i += 1) {
      waiter.onError(error(Code.Unavailable), i);
    }
    assert.equal(waiter.nextAction(), "poll");
    const refused = new JobWaiter("j", DEFAULT_POLICY, 0);
    assert.equal(refused.onError(error(Code.ResourceExhausted, "TOO_MANY_STREAMS"), 0), 0);
    assert.equal(refused.nextAction(), "poll");
  });

  it("gives up on a service gone for the unavailable budget, and on final errors at once", () => {
    const waiter = new JobWaiter("j", { ...DEFAULT_POLICY, unavailableBudgetMs: 1000 }, 0);
    waiter.onError(error(Code.Unavailable), 0);
    waiter.onError(error(Code.Unavailable), 999);
    assert.throws(() => waiter.onError(error(Code.Unavailable), 1000), { code: "UNAVAILABLE" });
    const missing = new JobWaiter("j", DEFAULT_POLICY, 0);
    assert.throws(() => missing.onError(error(Code.NotFound, "JOB_NOT_FOUND"), 0), {
      reason: "JOB_NOT_FOUND",
    });
  });

  it("times out with the last state seen, and fails with the job's reason", () => {
    const waiter = new JobWaiter("j", { ...DEFAULT_POLICY, timeoutMs: 50 }, 0);
    waiter.observe(job(4));
    assert.throws(
      () => waiter.checkDeadline(60),
      (err: unknown) => {
        assert.ok(err instanceof WaitTimeout);
        assert.equal(err.lastState, "RUNNING");
        assert.equal(err.lastVersion, 4n);
        return true;
      },
    );
    const failed = create(JobSchema, {
      jobId: "j",
      version: 9n,
      state: State.FAILED,
      error: { reason: "CORRUPT_DOCUMENT", message: "broken" },
    });
    waiter.observe(failed);
    assert.throws(
      () => waiter.outcome(),
      (err: unknown) => {
        assert.ok(err instanceof JobFailed);
        assert.equal(err.reason, "CORRUPT_DOCUMENT");
        return true;
      },
    );
  });
});

describe("batches and assets", () => {
  const batch = (version: number, completed: number, total = 2) =>
    create(BatchSchema, { batchId: "b", version: BigInt(version), completed, total });

  it("a batch's wait ends once every file ended; a timeout names how far it got", () => {
    const waiter = new BatchWaiter("b", { ...DEFAULT_POLICY, timeoutMs: 50 }, 0);
    assert.ok(waiter.observe(batch(1, 0, 0)) && waiter.nextAction() === "stream");
    assert.ok(waiter.observe(batch(3, 1)) && waiter.nextAction() === "stream");
    assert.ok(!waiter.observe(batch(2, 0)), "an older state is not handed out again");
    assert.throws(
      () => waiter.checkDeadline(60),
      (err: unknown) => err instanceof WaitTimeout && err.lastState === "at 1/2 files ended",
    );
    assert.ok(waiter.observe(batch(4, 2)) && waiter.nextAction() === "done");
  });

  it("a package's assets come with the first page that shows each", () => {
    const image = (assetId: string) => ({ assetId });
    const pkg = create(ReadingPackageSchema, {
      pages: [
        { number: 1 },
        { number: 2, images: [image("a.jpg")] },
        { number: 3, images: [image("b.png"), image("a.jpg")] },
      ],
      assets: [{ assetId: "a.jpg" }, { assetId: "b.png" }, { assetId: "c.png" }],
    });
    assert.deepEqual(
      assetsOf(pkg).map(({ asset, page }) => [asset.assetId, page]),
      [
        ["a.jpg", 2],
        ["b.png", 3],
        ["c.png", 0],
      ],
    );
  });

  it("an asset's bytes must match its size and sha256", () => {
    const data = new TextEncoder().encode("pixels");
    const sha256 = createHash("sha256").update(data).digest("hex");
    const asset = { assetId: "a.png", sha256, sizeBytes: BigInt(data.length) };
    const good = new AssetChunks("a.png");
    good.add({ asset: create(AssetSchema, asset), chunk: data, offset: 0n });
    assert.deepEqual(good.verified().data, Buffer.from(data));
    const bad = new AssetChunks("a.png");
    bad.add({ asset: create(AssetSchema, asset), chunk: data.slice(1), offset: 0n });
    assert.throws(
      () => bad.verified(),
      (err: unknown) => err instanceof DocparseError && err.reason === "CHECKSUM_MISMATCH",
    );
  });
});

describe("results are verified", () => {
  const data = Buffer.from("a reading package, serialized");
  const ref = create(ResultRefSchema, {
    sizeBytes: BigInt(data.length),
    sha256: createHash("sha256").update(data).digest("hex"),
  });

  it("hands out bytes whose size and sha256 match the ResultRef", () => {
    const assembler = new ResultAssembler("j");
    assembler.add({ result: ref, chunk: data.subarray(0, 10), offset: 0n });
    assembler.add({ result: undefined, chunk: data.subarray(10), offset: 10n });
    assert.deepEqual(Buffer.from(assembler.verifiedBytes().data), data);
  });

  it("refuses a changed byte with DATA_LOSS CHECKSUM_MISMATCH", () => {
    const assembler = new ResultAssembler("j");
    const changed = Buffer.from(data);
    changed[3] = 0x21;
    assembler.add({ result: ref, chunk: changed, offset: 0n });
    assert.throws(() => assembler.verifiedBytes(), {
      code: "DATA_LOSS",
      reason: "CHECKSUM_MISMATCH",
    });
  });

  it("refuses a chunk out of place, and a result without its sha256", () => {
    const assembler = new ResultAssembler("j");
    assembler.add({ result: ref, chunk: data.subarray(0, 10), offset: 0n });
    assert.throws(
      () => assembler.add({ result: undefined, chunk: data.subarray(12), offset: 12n }),
      ContractError,
    );
    const bare = new ResultAssembler("j");
    bare.add({ result: undefined, chunk: data, offset: 0n });
    assert.throws(() => bare.verifiedBytes(), ContractError);
  });
});

describe("errors", () => {
  it("carry the ErrorInfo reason and metadata and the RetryInfo delay", () => {
    const connect = new ConnectError("slow down", Code.ResourceExhausted, undefined, [
      {
        desc: ErrorInfoSchema,
        value: { reason: "RATE_LIMITED", domain: "docparse", metadata: { limit: "3" } },
      },
      { desc: RetryInfoSchema, value: { retryDelay: { seconds: 1n, nanos: 500_000_000 } } },
    ]);
    const err = DocparseError.from(connect);
    assert.equal(err.code, "RESOURCE_EXHAUSTED");
    assert.equal(err.grpcCode, 8);
    assert.equal(err.reason, "RATE_LIMITED");
    assert.deepEqual({ ...err.metadata }, { limit: "3" });
    assert.equal(err.retryDelayMs, 1500);
    assert.equal(err.message, "RESOURCE_EXHAUSTED RATE_LIMITED: slow down");
  });

  it("turn anything thrown into a DocparseError, reason empty", () => {
    const err = DocparseError.from(new Error("socket hang up"));
    assert.equal(err.code, "UNKNOWN");
    assert.equal(err.reason, "");
  });

  it("have one root: a failed job, a wait that ran out and a contract breach are too", () => {
    const failed = new JobFailed("j", "FAILED", "CORRUPT_DOCUMENT", "damaged");
    const waited = new WaitTimeout("j", "RUNNING", 3n, 1000);
    const contract = new ContractError("no job in the answer");
    for (const outcome of [failed, waited, contract]) {
      assert.ok(outcome instanceof ClientError && outcome instanceof DocparseError);
      assert.equal(DocparseError.from(outcome), outcome);
    }
    assert.deepEqual(
      [failed.code, failed.reason, failed.detail],
      ["FAILED_PRECONDITION", "CORRUPT_DOCUMENT", "damaged"],
    );
    assert.equal(failed.message, "job j ended FAILED: CORRUPT_DOCUMENT: damaged");
    assert.deepEqual([waited.code, waited.reason], ["DEADLINE_EXCEEDED", ""]);
    assert.equal(waited.message, "job j still RUNNING (version 3) after 1.0 s; it goes on");
    assert.deepEqual([contract.code, contract.reason], ["INTERNAL", "UPSTREAM_CONTRACT"]);
    assert.equal(contract.message, "no job in the answer");
  });
});

describe("a target nobody listens on", () => {
  it("fails within the unavailable budget, naming the target and what was tried", async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const logged: string[] = [];
    const client = new DocparseClient({
      target: `127.0.0.1:${port}`,
      apiKey: "",
      policy: { unavailableBudgetMs: 2_000 },
      logger: { info: (line) => logged.push(line) },
    });
    const started = Date.now();
    try {
      await assert.rejects(client.getStatus("0".repeat(32)), (err: unknown) => {
        assert.ok(err instanceof DocparseError, String(err));
        assert.equal(err.code, "UNAVAILABLE");
        assert.equal(err.reason, "TARGET_UNREACHABLE");
        assert.equal(err.metadata.target, `127.0.0.1:${port}`);
        assert.match(err.message, new RegExp(`no docparse server answered at 127.0.0.1:${port}`));
        assert.match(err.message, /GetStatus tried \d+ times/);
        return true;
      });
    } finally {
      client.close();
    }
    assert.ok(Date.now() - started < 2_000 + 1_000, `took ${Date.now() - started} ms`);
    assert.ok(logged.length >= 2, "each retry is logged");
    assert.match(
      logged[0]!,
      /retrying GetStatus in \d+\.\d s after UNAVAILABLE TARGET_UNREACHABLE/,
    );
  });
});

describe("a stream cut after its terminal record", () => {
  // A scripted server (no network): each call of a streaming method plays the next script.
  const cut = () => new ConnectError("the server ended its connections", Code.Unavailable);
  const page = (cursor: string) =>
    create(StreamResultResponseSchema, { pageNumber: 1, pagePart: new Uint8Array([1]), cursor });
  const terminal = (cursor: string) =>
    create(StreamResultResponseSchema, { job: job(7, State.SUCCEEDED, 10), cursor });

  function scripted(
    watches: Array<() => AsyncGenerator<Job>>,
    streams: Array<(cursor: string) => AsyncGenerator<StreamResultResponse>>,
  ) {
    const calls = { watch: 0, stream: [] as string[], perMessage: [] as number[] };
    const transport = createRouterTransport(({ service }) => {
      service(ParserService, {
        async *watchJob() {
          for await (const record of watches[calls.watch++]()) {
            yield { event: { case: "job", value: record } };
          }
        },
        async *streamResult(request) {
          calls.stream.push(request.cursor);
          calls.perMessage.push(request.pagesPerMessage);
          yield* streams[calls.stream.length - 1](request.cursor);
        },
        async getStatus() {
          return { job: job(7, State.SUCCEEDED, 10) };
        },
      });
    });
    const retries: RetryEvent[] = [];
    const policy = { ...DEFAULT_POLICY, backoffMs: 1, maxBackoffMs: 5 };
    const client = new DocparseClient({ transport, policy, onRetry: (e) => retries.push(e) });
    return { client, calls, retries };
  }

  it("wait() returns the terminal record and reports no retry", async () => {
    const { client, calls, retries } = scripted(
      [
        async function* () {
          yield job(3);
          yield job(7, State.SUCCEEDED, 10);
          throw cut();
        },
      ],
      [],
    );
    const done = await client.wait("j");
    assert.equal(done.version, 7n);
    assert.deepEqual(retries, []);
    assert.equal(calls.watch, 1);
  });

  it("streamPages() hands the terminal record out once and reports no retry", async () => {
    const { client, calls, retries } = scripted(
      [],
      [
        async function* () {
          yield page("d1");
          yield terminal("d1");
          throw cut();
        },
      ],
    );
    const messages = [];
    for await (const message of client.streamPages("j")) {
      messages.push(message);
    }
    assert.deepEqual(
      messages.map((m) => [m.cursor, m.job?.version]),
      [
        ["d1", undefined],
        ["d1", 7n],
      ],
    );
    assert.deepEqual(retries, []);
    assert.deepEqual(calls.stream, [""]);
  });

  it("pages sent several a message come one a message; a cut resumes after the last page's", async () => {
    const several = (...cursors: string[]) =>
      create(StreamResultResponseSchema, {
        cursor: cursors.at(-1),
        pages: cursors.map((cursor) => ({
          pageNumber: Number(cursor.slice(1)),
          pagePart: new Uint8Array([Number(cursor.slice(1))]),
          cursor,
        })),
      });
    const { client, calls } = scripted(
      [],
      [
        async function* () {
          yield several("d1", "d2", "d3");
          throw cut();
        },
        async function* () {
          yield several("d4");
          yield terminal("d4");
        },
      ],
    );
    const messages = [];
    for await (const message of client.streamPages("j")) {
      messages.push(message);
    }
    assert.deepEqual(
      messages.map((m) => [m.cursor, m.pageNumber, Array.from(m.pagePart), m.pages.length]),
      [
        ["d1", 1, [1], 0],
        ["d2", 2, [2], 0],
        ["d3", 3, [3], 0],
        ["d4", 4, [4], 0],
        ["d4", 0, [], 0],
      ],
    );
    assert.deepEqual(calls.stream, ["", "d3"]);
    assert.deepEqual(calls.perMessage, [PAGES_PER_MESSAGE, PAGES_PER_MESSAGE]);
  });

  it("a cut before it is resumed after the last cursor (the script's retry path works)", async () => {
    const { client, calls, retries } = scripted(
      [],
      [
        async function* () {
          yield page("d1");
          throw cut();
        },
        async function* () {
          yield terminal("d1");
        },
      ],
    );
    const messages = [];
    for await (const message of client.streamPages("j")) {
      messages.push(message);
    }
    assert.deepEqual(
      messages.map((m) => m.job?.version),
      [undefined, 7n],
    );
    assert.deepEqual(calls.stream, ["", "d1"]);
    assert.deepEqual(
      retries.map((r) => [r.method, r.cursor]),
      [["StreamResult", "d1"]],
    );
  });
});

describe("who answered a stream left at its terminal record", () => {
  // The server ends its stream right after the terminal record, with the trailers that say
  // who answered; the client stops reading at that record and still tells onAnswer.
  const servedBy = (trailer: Headers) => {
    trailer.append("x-served-by", "replica-1");
    trailer.append("x-served-by", "gateway-1");
  };
  const terminal = create(StreamResultResponseSchema, { job: job(7, State.SUCCEEDED, 10) });

  function client(ends: boolean) {
    const transport = createRouterTransport(({ service }) => {
      service(ParserService, {
        async *watchJob(_request, context) {
          servedBy(context.responseTrailer);
          yield { event: { case: "job", value: job(3) } };
          yield { event: { case: "job", value: job(7, State.SUCCEEDED, 10) } };
          if (!ends) {
            await new Promise((resolve) => context.signal.addEventListener("abort", resolve));
          }
        },
        async *streamResult(_request, context) {
          servedBy(context.responseTrailer);
          yield terminal;
        },
      });
    });
    const heard: Array<[string, string[]]> = [];
    const onAnswer = (method: string, by: string[]) => heard.push([method, by]);
    return { client: new DocparseClient({ transport, onAnswer }), heard };
  }

  it("wait() and streamPages() tell onAnswer who answered their streams", async () => {
    const { client: c, heard } = client(true);
    assert.equal((await c.wait("j")).version, 7n);
    for await (const _ of c.streamPages("j")) {
      // the terminal record only
    }
    assert.deepEqual(heard, [
      ["WatchJob", ["replica-1", "gateway-1"]],
      ["StreamResult", ["replica-1", "gateway-1"]],
    ]);
  });

  it("a stream whose server does not end after it is left all the same", async () => {
    const { client: c, heard } = client(false);
    const started = Date.now();
    assert.equal((await c.wait("j")).version, 7n);
    assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`); // a stall bound
    assert.deepEqual(heard, []); // aborted: no trailers, no answer heard
  });
});
