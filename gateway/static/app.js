// docparse upload page: files go up as one batch (POST /v1/batches); every file's progress
// comes from the batch's Server-Sent Events stream (GET /v1/batches/{id}/events). The
// browser's EventSource resumes with Last-Event-ID on its own after a network blip; if the
// stream fails for good (an HTTP error), we reopen it with ?after_version= after a pause.
"use strict";

const TERMINAL = new Set(["STATE_SUCCEEDED", "STATE_FAILED", "STATE_CANCELLED"]);
const STATE_LABEL = {
  UPLOADING: "Uploading",
  REJECTED: "Rejected",
  STATE_QUEUED: "Queued",
  STATE_RUNNING: "Running",
  STATE_SUCCEEDED: "Done",
  STATE_FAILED: "Failed",
  STATE_CANCELLED: "Cancelled",
};
const UNITS = {
  xlsx: "sheet",
  xls: "sheet",
  ods: "sheet",
  csv: "sheet",
  pptx: "slide",
  odp: "slide",
};
const number = new Intl.NumberFormat();
const KEY_STORE = "docparse-api-key";
// Running files whose pages are shown as they are read without anyone asking ("Read" opens
// more): each is an event stream, and a browser holds only 6 connections to one origin.
const LIVE_LIMIT = 2;

// Where the service requires an API key: sent as a bearer token by fetch, and as
// ?access_token= where a browser cannot set headers (EventSource, result links).
let apiKey = sessionStorage.getItem(KEY_STORE) || "";
const authHeaders = () => (apiKey ? { Authorization: `Bearer ${apiKey}` } : {});
const withToken = (url) =>
  apiKey ? `${url}${url.includes("?") ? "&" : "?"}access_token=${encodeURIComponent(apiKey)}` : url;

function askForKey() {
  const form = document.getElementById("key-form");
  form.hidden = false;
  document.getElementById("api-key").focus();
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  node.append(...children);
  return node;
}

function showNotice(text) {
  const notice = document.getElementById("notice");
  notice.textContent = text;
  notice.hidden = !text;
}

function describeError(body, status) {
  if (body && body.reason) return `${body.reason}: ${body.message}`;
  return `HTTP ${status}`;
}

// One file's row: name, state badge, progress bar, stage, units done/total and the outcome.
class FileRow {
  constructor(name) {
    this.name = name;
    this.badge = el("span", { class: "badge" });
    this.bar = el("progress", { max: "1", "aria-label": `${name} progress` });
    this.stage = el("span", { class: "stage" });
    this.units = el("span", { class: "units" });
    this.outcome = el("span", { class: "outcome" });
    this.actions = el("span", { class: "actions" });
    this.node = el(
      "li",
      { class: "file" },
      el("div", { class: "file-head" }, el("span", { class: "name" }, name), this.badge),
      this.bar,
      el("div", { class: "detail" }, this.stage, this.units, this.outcome, this.actions),
    );
    this.setState("UPLOADING");
  }

  setState(state) {
    this.node.dataset.state = state;
    this.node.dataset.terminal = String(TERMINAL.has(state) || state === "REJECTED");
    this.badge.textContent = STATE_LABEL[state] || state;
  }

  reject(body, status) {
    this.setState("REJECTED");
    this.bar.max = 1;
    this.bar.value = 1;
    this.stage.textContent = "";
    this.outcome.textContent = describeError(body, status);
  }

  update(job) {
    if (this.version !== undefined && Number(job.version) <= this.version) return;
    this.version = Number(job.version);
    this.jobId = job.job_id;
    this.node.dataset.jobId = job.job_id;
    this.setState(job.state);
    const progress = job.progress || {};
    const done = Number(progress.done || 0);
    const total = Number(progress.total || 0);
    const unit = (UNITS[job.content_type] || "page") + (total === 1 ? "" : "s");
    this.stage.textContent = TERMINAL.has(job.state) ? "" : progress.stage || "";
    this.units.textContent = total ? `${number.format(done)} / ${number.format(total)} ${unit}` : "";
    if (TERMINAL.has(job.state)) {
      this.bar.max = 1;
      this.bar.value = 1;
    } else if (total) {
      this.bar.max = total;
      this.bar.value = done;
    } else {
      this.bar.removeAttribute("value"); // indeterminate until the total is known
    }
    this.bar.setAttribute("aria-valuetext", this.units.textContent || this.badge.textContent);
    this.outcome.textContent = this.describe(job);
    this.renderActions(job);
    const following = document.querySelectorAll('.live-pages:not([data-ended="true"])').length;
    if (job.state === "STATE_RUNNING" && !this.live && following < LIVE_LIMIT) this.showLive();
  }

  describe(job) {
    if (job.state === "STATE_SUCCEEDED" && job.result) {
      return `${number.format(Number(job.result.char_count || 0))} characters`;
    }
    if (job.error && job.error.reason) return `${job.error.reason}: ${job.error.message}`;
    return "";
  }

  renderActions(job) {
    const links = [];
    if (job.state === "STATE_SUCCEEDED") {
      const base = `/v1/jobs/${encodeURIComponent(job.job_id)}/result`;
      const open = { target: "_blank", rel: "noopener" };
      links.push(el("a", { href: withToken(`${base}?format=text`), ...open }, "Text"));
      // Headings, lists and tables as one page (escaped, no script: the gateway sends a CSP).
      links.push(el("a", { href: withToken(`${base}?format=html`), ...open }, "Page"));
      links.push(el("a", { href: withToken(base), ...open }, "JSON"));
      links.push(
        el("button", { type: "button", class: "link", onclick: () => this.showDocument() }, "Read"),
      );
      links.push(
        el("button", { type: "button", class: "link", onclick: () => this.showImages() }, "Images"),
      );
    } else if (!TERMINAL.has(job.state)) {
      links.push(
        el("button", { type: "button", class: "link", onclick: () => this.showLive() }, "Read"),
      );
      links.push(
        el("button", { type: "button", class: "link", onclick: () => this.cancel() }, "Cancel"),
      );
    }
    this.actions.replaceChildren(...links);
  }

  // The package's images (its assets), as thumbnails linking to each one at full size:
  // GET /v1/jobs/{id}/assets/{asset_id}, the key in the URL as for the result links.
  async showImages() {
    const job = encodeURIComponent(this.jobId);
    const response = await fetch(`/v1/jobs/${job}/result`, { headers: authHeaders() });
    if (response.status === 401) askForKey();
    const body = await response.json().catch(() => null);
    if (!response.ok) {
      showNotice(`Could not read ${this.name}: ${describeError(body, response.status)}`);
      return;
    }
    const assets = (body && body.assets) || [];
    const figures = assets.map((asset) => {
      const src = withToken(`/v1/jobs/${job}/assets/${encodeURIComponent(asset.asset_id)}`);
      const img = el("img", { src, alt: `image ${asset.asset_id}`, loading: "lazy" });
      return el("a", { href: src, target: "_blank", rel: "noopener", class: "thumb" }, img);
    });
    if (!this.images) {
      this.images = el("div", { class: "images" });
      this.node.append(this.images);
    }
    this.images.replaceChildren(...(figures.length ? figures : ["No images in this document."]));
  }

  // A running document's pages as they are read, below the row (see LivePages).
  showLive() {
    if (!this.live) {
      this.live = new LivePages(this.jobId, this.name);
      this.node.append(this.live.node);
    }
    this.live.start();
  }

  // The document's headings, lists and tables in this page, below the row (see DocumentView);
  // it takes the place of the pages shown while the document was read.
  showDocument() {
    if (this.live) {
      this.live.stop("replaced");
      this.live.node.remove();
      this.live = null;
    }
    if (!this.reading) {
      this.reading = new DocumentView(this.jobId, this.name);
      this.node.append(this.reading.node);
    }
    this.reading.load();
  }

  async cancel() {
    const response = await fetch(`/v1/jobs/${encodeURIComponent(this.jobId)}:cancel`, {
      method: "POST",
      headers: authHeaders(),
    });
    if (response.status === 401) askForKey();
    if (!response.ok) {
      const body = await response.json().catch(() => null);
      showNotice(`Could not cancel ${this.name}: ${describeError(body, response.status)}`);
    }
  }
}

// One upload: its rows, the batch summary and the live event stream.
class BatchView {
  constructor(files) {
    this.rows = files.map((file) => new FileRow(file.name));
    this.title = el("h3", {}, `Uploading ${files.length} file${files.length === 1 ? "" : "s"}…`);
    this.summary = el("p", { class: "summary", role: "status" });
    this.link = el("span", { class: "link-state" });
    this.node = el(
      "section",
      { class: "batch" },
      el("div", { class: "batch-head" }, this.title, this.link),
      this.summary,
      el("ul", { class: "files" }, ...this.rows.map((row) => row.node)),
    );
    document.getElementById("batches").prepend(this.node);
    document.getElementById("empty").hidden = true;
    this.version = 0;
    this.retryDelay = 1000;
  }

  attach(batch, rows) {
    this.batchId = batch.batch_id;
    this.node.dataset.batchId = batch.batch_id;
    this.title.textContent = `Batch ${batch.batch_id.slice(0, 8)}`;
    this.byJob = new Map(batch.jobs.map((job, i) => [job.job_id, rows[i]]));
    this.render(batch);
    this.listen();
  }

  render(batch) {
    this.version = Math.max(this.version, Number(batch.version));
    for (const job of batch.jobs) {
      const row = this.byJob.get(job.job_id);
      if (row) row.update(job);
    }
    const parts = [`${batch.completed} of ${batch.total} done`];
    if (batch.failed) parts.push(`${batch.failed} failed`);
    if (batch.cancelled) parts.push(`${batch.cancelled} cancelled`);
    this.summary.textContent = parts.join(" · ");
    this.node.dataset.complete = String(batch.total > 0 && batch.completed >= batch.total);
  }

  listen() {
    const url = `/v1/batches/${encodeURIComponent(this.batchId)}/events`;
    const source = new EventSource(
      withToken(this.version ? `${url}?after_version=${this.version}` : url),
    );
    this.setLink("live");
    source.addEventListener("open", () => {
      this.setLink("live");
      this.retryDelay = 1000;
    });
    source.addEventListener("batch", (event) => this.render(JSON.parse(event.data)));
    source.addEventListener("end", () => {
      source.close();
      this.setLink("");
    });
    source.addEventListener("stream-error", (event) => {
      source.close();
      const body = JSON.parse(event.data);
      this.setLink("stopped");
      showNotice(`Progress of batch ${this.batchId} stopped: ${describeError(body)}`);
    });
    source.addEventListener("error", () => {
      if (source.readyState === EventSource.CLOSED) {
        // An HTTP error (e.g. 503 while the service restarts): EventSource gives up, we don't.
        this.setLink("reconnecting…");
        setTimeout(() => this.listen(), this.retryDelay);
        this.retryDelay = Math.min(this.retryDelay * 2, 15000);
      } else {
        this.setLink("reconnecting…"); // the browser retries itself, with Last-Event-ID
      }
    });
  }

  setLink(text) {
    this.link.textContent = text;
    this.link.hidden = !text;
  }
}

async function upload(fileList) {
  const files = Array.from(fileList);
  if (!files.length) return;
  showNotice("");
  const view = new BatchView(files);
  let pending = files.map((file, i) => ({ file, row: view.rows[i] }));
  // A batch is all or nothing: a file the service refuses (say, not a document) is marked
  // rejected with the reason, and the others go up again without it.
  while (pending.length) {
    const form = new FormData();
    for (const { file } of pending) form.append("file", file, file.name);
    let response;
    let body = null;
    try {
      response = await fetch("/v1/batches", { method: "POST", body: form, headers: authHeaders() });
      body = await response.json().catch(() => null);
    } catch (err) {
      for (const { row } of pending) row.reject({ reason: "NETWORK", message: String(err) }, 0);
      return;
    }
    if (response.ok) {
      view.attach(body, pending.map((p) => p.row));
      return;
    }
    if (response.status === 401) askForKey();
    const meta = (body && body.metadata) || {};
    let index = meta.file_index !== undefined ? Number(meta.file_index) : -1;
    if (index < 0 && meta.file_name) index = pending.findIndex((p) => p.file.name === meta.file_name);
    if (index < 0 || index >= pending.length || response.status >= 500) {
      for (const { row } of pending) row.reject(body, response.status);
      view.title.textContent = "Upload refused";
      return;
    }
    pending[index].row.reject(body, response.status);
    pending = pending.filter((_, i) => i !== index);
  }
  view.title.textContent = "Nothing to parse";
}

function setUp() {
  const input = document.getElementById("files");
  const zone = document.getElementById("dropzone");
  input.addEventListener("change", () => {
    upload(input.files);
    input.value = "";
  });
  for (const type of ["dragenter", "dragover"]) {
    zone.addEventListener(type, (event) => {
      event.preventDefault();
      zone.classList.add("dragging");
    });
  }
  for (const type of ["dragleave", "drop"]) {
    zone.addEventListener(type, () => zone.classList.remove("dragging"));
  }
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    upload(event.dataTransfer.files);
  });
  document.getElementById("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    apiKey = document.getElementById("api-key").value.trim();
    sessionStorage.setItem(KEY_STORE, apiKey);
    event.target.hidden = true;
    showNotice("");
  });
  // A file dropped next to the zone would make the browser navigate away to it.
  window.addEventListener("dragover", (event) => event.preventDefault());
  window.addEventListener("drop", (event) => event.preventDefault());
}

setUp();
