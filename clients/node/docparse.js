#!/usr/bin/env node
// Example docparse client in Node.js: @grpc/grpc-js + @grpc/proto-loader, reading the
// repository's protos (protos/docparse/v1) at run time.
//
//   node docparse.js submit FILE [--target HOST:PORT] [--wait]
//   node docparse.js watch JOB_ID [--target HOST:PORT]
//   node docparse.js status JOB_ID [--target HOST:PORT]
//
// Exit codes: 0 the job SUCCEEDED (status: the job was found), 1 it ended FAILED or CANCELLED,
// 2 a call failed (the gRPC code and the google.rpc.ErrorInfo reason are printed on stderr).
//
// What it shows about the API:
// - SubmitJob may answer with a job that is already terminal or still running: both are handled,
//   and a retried submit reuses the same request_id, so it can never create a second job.
// - Waiting is read-only: WatchJob, and when the stream breaks with UNAVAILABLE, WatchJob again
//   with after_version = the last version seen, on a new connection (to the next --target if
//   several were given), with bounded retries and exponential backoff. It never resubmits.
// - uint64 fields (version, sizes) are decoded as strings and compared as BigInt.
// - Errors carry google.rpc.Status in the `grpc-status-details-bin` trailer; the ErrorInfo
//   detail in it gives a stable reason (JOB_NOT_FOUND, UNSUPPORTED_FORMAT, ...).
'use strict';

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { parseArgs } = require('node:util');

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');

const EXIT_SUCCEEDED = 0;
const EXIT_JOB_FAILED = 1;
const EXIT_RPC_ERROR = 2;

const TERMINAL = new Set(['STATE_SUCCEEDED', 'STATE_FAILED', 'STATE_CANCELLED']);
const DEFAULT_TARGET = process.env.DOCPARSE_TARGET || '127.0.0.1:50050';
const DEFAULT_PROTOS = process.env.DOCPARSE_PROTOS || path.resolve(__dirname, '..', '..', 'protos');

const USAGE = `usage:
  node docparse.js submit FILE [--target HOST:PORT] [--wait] [--request-id ID] [--server-wait-ms MS]
  node docparse.js watch JOB_ID [--target HOST:PORT] [--after-version N]
  node docparse.js status JOB_ID [--target HOST:PORT]

options:
  --target HOST:PORT   gateway or parser_svc address; repeat it (or comma-separate) to let a
                       broken watch resume on the next one (default $DOCPARSE_TARGET or
                       127.0.0.1:50050)
  --wait               after submitting, watch the job until it ends
  --timeout SECONDS    give up waiting after this long (default 600)
  --retries N          reconnect attempts after UNAVAILABLE before giving up (default 8)
  --request-id ID      idempotency key of the submit (default: a new UUID)
  --server-wait-ms MS  let the server wait up to MS for the job before answering (default 0)
  --protos DIR         directory holding docparse/v1/*.proto (default $DOCPARSE_PROTOS or the
                       repository's protos/)

exit codes: 0 SUCCEEDED (status: found), 1 FAILED or CANCELLED, 2 the call failed`;

// google.rpc.Status and google.rpc.ErrorInfo (googleapis google/rpc/*.proto, Apache-2.0), just
// what this client reads, to decode the `grpc-status-details-bin` trailer. `Any` has the wire
// format of google.protobuf.Any; it is declared here so the definition stands alone.
const RPC_STATUS_PROTO = `
syntax = "proto3";
package google.rpc;
message Any { string type_url = 1; bytes value = 2; }
message Status { int32 code = 1; string message = 2; repeated Any details = 3; }
message ErrorInfo { string reason = 1; string domain = 2; map<string, string> metadata = 3; }
`;
const rpcRoot = protobuf.parse(RPC_STATUS_PROTO, { keepCase: true }).root;
const RpcStatus = rpcRoot.lookupType('google.rpc.Status');
const ErrorInfo = rpcRoot.lookupType('google.rpc.ErrorInfo');
const ERROR_INFO_URL = 'type.googleapis.com/google.rpc.ErrorInfo';

class UsageError extends Error {}

// A failed call, with what the server said about it.
class CallError extends Error {
  constructor(err, target) {
    const code = grpc.status[err.code] || String(err.code);
    super(err.details || err.message);
    this.code = err.code;
    this.codeName = code;
    this.target = target;
    this.details = err.details || '';
    this.servedBy = err.metadata ? metadataValues(err.metadata, 'x-served-by') : [];
    this.errorInfo = err.metadata ? decodeErrorInfo(err.metadata) : null;
  }

  describe() {
    const info = this.errorInfo;
    let line = `error: ${this.codeName}`;
    if (info && info.reason) line += ` ${info.reason}`;
    if (this.details) line += `: ${this.details}`;
    if (info && info.metadata && Object.keys(info.metadata).length > 0) {
      const pairs = Object.entries(info.metadata).map(([k, v]) => `${k}=${v}`);
      line += ` (${pairs.join(', ')})`;
    }
    line += ` [target ${this.target}`;
    if (this.servedBy.length > 0) line += `, served_by=${this.servedBy.join(',')}`;
    return `${line}]`;
  }
}

class WaitError extends Error {}

// Values of a metadata key; grpc-js joins repeated headers with ", ", so they are split again.
function metadataValues(metadata, key) {
  return metadata
    .get(key)
    .flatMap((value) => (Buffer.isBuffer(value) ? value.toString() : value).split(','))
    .map((value) => value.trim())
    .filter((value) => value.length > 0);
}

// The ErrorInfo detail of the google.rpc.Status in the trailers, or null.
function decodeErrorInfo(metadata) {
  for (const raw of metadata.get('grpc-status-details-bin')) {
    try {
      const status = RpcStatus.decode(raw);
      for (const detail of status.details) {
        if (detail.type_url === ERROR_INFO_URL) {
          return ErrorInfo.toObject(ErrorInfo.decode(detail.value), { defaults: true });
        }
      }
    } catch (err) {
      process.stderr.write(`warning: undecodable grpc-status-details-bin: ${err.message}\n`);
    }
  }
  return null;
}

function loadService(protosDir) {
  const main = path.join(protosDir, 'docparse', 'v1', 'parser_service.proto');
  if (!fs.existsSync(main)) {
    throw new UsageError(`${main} not found: pass --protos DIR or set DOCPARSE_PROTOS`);
  }
  const definition = protoLoader.loadSync(main, {
    includeDirs: [protosDir], // google/protobuf/*.proto come bundled with protobufjs
    keepCase: true, // job_id, after_version: the names of the .proto files and of grpcurl
    longs: String, // uint64 version / sizes: exact decimal strings, compared as BigInt
    enums: String, // 'STATE_RUNNING' rather than 2
    defaults: true, // unset scalars read as 0 / '' as in other languages
    oneofs: true, // WatchJobResponse.event names the member that is set
  });
  return grpc.loadPackageDefinition(definition).docparse.v1.ParserService;
}

function splitTargets(values) {
  const targets = (values && values.length > 0 ? values : [DEFAULT_TARGET])
    .flatMap((value) => value.split(','))
    .map((value) => value.trim())
    .filter((value) => value.length > 0);
  if (targets.length === 0) throw new UsageError('--target is empty');
  return targets;
}

function nonNegative(value, name, fallback) {
  if (value === undefined) return fallback;
  const number = Number(value);
  if (!Number.isFinite(number) || number < 0) throw new UsageError(`${name} must be a number >= 0`);
  return number;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Exponential backoff with jitter: a random delay in [c/2, c], c = 200 ms, 400 ms, ... 5 s.
function backoffMs(attempt) {
  const ceiling = Math.min(5000, 200 * 2 ** (attempt - 1));
  return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
}

function shortState(state) {
  return String(state).replace(/^STATE_/, '');
}

// One line per record: what a user watching a job wants to see.
function recordLine(job) {
  const progress = job.progress || { done: 0, total: 0, stage: '' };
  let line =
    `version=${job.version} state=${shortState(job.state)} ` +
    `progress=${progress.done}/${progress.total} stage=${progress.stage || '-'}`;
  if (job.attempt > 1) line += ` attempt=${job.attempt}`;
  if (job.error && job.error.reason) line += ` reason=${job.error.reason}`;
  if (job.state === 'STATE_SUCCEEDED' && job.result) {
    line += ` result=${job.result.size_bytes}B sha256=${job.result.sha256.slice(0, 12)}`;
  }
  return line;
}

function timestamp(ts) {
  if (!ts || ts.seconds === undefined || ts.seconds === '0') return '-';
  const ms = Number(BigInt(ts.seconds) * 1000n) + Math.floor((ts.nanos || 0) / 1e6);
  return new Date(ms).toISOString();
}

function checkJob(job, what) {
  if (!job || !job.job_id || !job.state || job.state === 'STATE_UNSPECIFIED') {
    throw new WaitError(`contract error: the ${what} answer carries no usable job`);
  }
  return job;
}

// The exit code of a terminal record, with the reason printed for FAILED / CANCELLED.
function finish(job) {
  if (job.state === 'STATE_SUCCEEDED') return EXIT_SUCCEEDED;
  const error = job.error || {};
  process.stderr.write(
    `job ${job.job_id} ${shortState(job.state)}: ${error.reason || 'no reason given'}` +
      `${error.message ? ` ${error.message}` : ''}\n`,
  );
  return EXIT_JOB_FAILED;
}

class Connection {
  constructor(Service, targets, options) {
    this.Service = Service;
    this.targets = targets;
    this.index = 0;
    this.retries = options.retries;
    this.deadline = options.deadline;
  }

  get target() {
    return this.targets[this.index % this.targets.length];
  }

  // A new channel each time: a retry never reuses the connection that broke.
  open() {
    return new this.Service(this.target, grpc.credentials.createInsecure());
  }

  // Moves on to the next target (the same one when only one was given).
  rotate() {
    this.index += 1;
  }

  // A unary call, retried on UNAVAILABLE. Only idempotent requests come here (GetStatus, and
  // SubmitJob with a fixed request_id).
  async unary(method, request) {
    for (let attempt = 1; ; attempt += 1) {
      const client = this.open();
      const target = this.target;
      try {
        return await new Promise((resolve, reject) => {
          // grpc-js calls back before it emits 'status' (the trailers): answer on 'status'.
          let outcome = null;
          const call = client[method](request, { deadline: this.deadline }, (err, response) => {
            outcome = { err, response };
          });
          call.on('status', (status) => {
            if (outcome === null || outcome.err) {
              reject(new CallError(outcome ? outcome.err : status, target));
            } else {
              const servedBy = metadataValues(status.metadata, 'x-served-by');
              resolve({ response: outcome.response, servedBy });
            }
          });
        });
      } catch (err) {
        if (!(err instanceof CallError) || err.code !== grpc.status.UNAVAILABLE) throw err;
        if (attempt > this.retries) throw err;
        const delay = backoffMs(attempt);
        process.stderr.write(
          `${method}: ${err.codeName} from ${target} (${err.details}); ` +
            `retry ${attempt}/${this.retries} in ${delay} ms\n`,
        );
        this.rotate();
        await sleep(delay);
      } finally {
        client.close();
      }
    }
  }

  // Follows WatchJob from `afterVersion` (a BigInt) until the terminal record, resuming with
  // after_version on a new connection when the stream breaks. Prints one line per record.
  async watch(jobId, afterVersion) {
    let last = afterVersion;
    let lastState = null;
    let failures = 0;
    for (;;) {
      const client = this.open();
      const target = this.target;
      let received = 0;
      let terminal = null;
      try {
        await new Promise((resolve, reject) => {
          const call = client.WatchJob(
            { job_id: jobId, after_version: last.toString() },
            { deadline: this.deadline },
          );
          let ended = false;
          let statusOk = false;
          const settle = () => ended && statusOk && resolve();
          call.on('data', (event) => {
            if (event.event !== 'job') return; // a heartbeat: the stream is alive
            const job = event.job;
            const version = BigInt(job.version);
            if (version <= last) {
              process.stderr.write(
                `warning: ignored a record with version ${version} after version ${last}\n`,
              );
              return;
            }
            last = version;
            lastState = job.state;
            received += 1;
            process.stdout.write(`${recordLine(job)}\n`);
            if (TERMINAL.has(job.state)) terminal = job;
          });
          call.on('error', (err) => reject(new CallError(err, target)));
          call.on('status', (status) => {
            statusOk = status.code === grpc.status.OK;
            settle();
          });
          call.on('end', () => {
            ended = true;
            settle();
          });
        });
      } catch (err) {
        if (!(err instanceof CallError)) throw err;
        if (terminal !== null) return terminal; // the end of the stream got lost, not the job
        if (err.code === grpc.status.DEADLINE_EXCEEDED) {
          throw new WaitError(
            `gave up waiting for job ${jobId}: --timeout reached, last seen version ${last}` +
              ` state ${lastState ? shortState(lastState) : 'unknown'}`,
          );
        }
        if (err.code !== grpc.status.UNAVAILABLE) throw err;
        failures = received > 0 ? 1 : failures + 1;
        if (failures > this.retries) throw err;
        const delay = backoffMs(failures);
        this.rotate();
        process.stderr.write(
          `watch: stream from ${target} broke (${err.codeName}: ${err.details}); resuming ` +
            `after_version=${last} on ${this.target} in ${delay} ms ` +
            `(retry ${failures}/${this.retries})\n`,
        );
        await sleep(delay);
        continue;
      } finally {
        client.close();
      }
      if (terminal !== null) return terminal;
      // Ended OK without a terminal record: not what the contract says, but resuming is safe.
      failures = received > 0 ? 1 : failures + 1;
      if (failures > this.retries) {
        throw new WaitError(`WatchJob on ${target} kept ending before job ${jobId} was terminal`);
      }
      const delay = backoffMs(failures);
      process.stderr.write(
        `watch: stream from ${target} ended before a terminal record; resuming ` +
          `after_version=${last} in ${delay} ms\n`,
      );
      this.rotate();
      await sleep(delay);
    }
  }
}

async function submit(connection, file, options) {
  let content;
  try {
    content = fs.readFileSync(file);
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${err.message}`);
  }
  const requestId = options['request-id'] || crypto.randomUUID();
  const request = {
    file_name: path.basename(file),
    content,
    request_id: requestId,
    wait_timeout_ms: nonNegative(options['server-wait-ms'], '--server-wait-ms', 0),
  };
  const { response, servedBy } = await connection.unary('SubmitJob', request);
  const job = checkJob(response.job, 'SubmitJob');
  const via = servedBy.length > 0 ? ` served_by=${servedBy.join(',')}` : '';
  process.stdout.write(
    `job ${job.job_id} submitted file=${request.file_name} bytes=${content.length}` +
      ` request_id=${requestId}${via}\n`,
  );
  process.stdout.write(`${recordLine(job)}\n`);
  if (TERMINAL.has(job.state)) return finish(job); // the sync answer: nothing to wait for
  if (!options.wait) return EXIT_SUCCEEDED; // accepted; `watch JOB_ID` follows it later
  return finish(await connection.watch(job.job_id, BigInt(job.version)));
}

async function watch(connection, jobId, options) {
  const raw = options['after-version'] || '0';
  if (!/^\d+$/.test(raw)) throw new UsageError('--after-version must be a version number');
  const after = BigInt(raw);
  return finish(await connection.watch(jobId, after));
}

async function status(connection, jobId) {
  const { response, servedBy } = await connection.unary('GetStatus', { job_id: jobId });
  const job = checkJob(response.job, 'GetStatus');
  process.stdout.write(
    `job ${job.job_id} file=${job.file_name || '-'} type=${job.content_type || '-'}\n`,
  );
  process.stdout.write(`${recordLine(job)}\n`);
  process.stdout.write(
    `created=${timestamp(job.create_time)} updated=${timestamp(job.update_time)}` +
      ` expires=${timestamp(job.expire_time)}` +
      `${servedBy.length > 0 ? ` served_by=${servedBy.join(',')}` : ''}\n`,
  );
  if (job.error && job.error.reason) {
    process.stdout.write(`error=${job.error.reason} ${job.error.message}\n`);
  }
  return EXIT_SUCCEEDED;
}

async function main(argv) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      target: { type: 'string', multiple: true },
      wait: { type: 'boolean', default: false },
      timeout: { type: 'string' },
      retries: { type: 'string' },
      'request-id': { type: 'string' },
      'server-wait-ms': { type: 'string' },
      'after-version': { type: 'string' },
      protos: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const [command, argument, ...extra] = positionals;
  const known = ['submit', 'watch', 'status'].includes(command);
  if (!known || !argument || extra.length > 0) {
    throw new UsageError('expected one of: submit FILE, watch JOB_ID, status JOB_ID');
  }
  const timeoutS = nonNegative(values.timeout, '--timeout', 600);
  const Service = loadService(values.protos || DEFAULT_PROTOS);
  const connection = new Connection(Service, splitTargets(values.target), {
    retries: nonNegative(values.retries, '--retries', 8),
    deadline: new Date(Date.now() + timeoutS * 1000),
  });
  if (command === 'submit') return submit(connection, argument, values);
  if (command === 'watch') return watch(connection, argument, values);
  return status(connection, argument);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    if (err instanceof CallError) {
      process.stderr.write(`${err.describe()}\n`);
      process.exitCode = EXIT_RPC_ERROR;
    } else if (err instanceof UsageError || (err && err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION')) {
      process.stderr.write(`${err.message}\n\n${USAGE}\n`);
      process.exitCode = EXIT_RPC_ERROR;
    } else if (err instanceof WaitError) {
      process.stderr.write(`error: ${err.message}\n`);
      process.exitCode = EXIT_RPC_ERROR;
    } else {
      process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
      process.exitCode = EXIT_RPC_ERROR;
    }
  },
);
