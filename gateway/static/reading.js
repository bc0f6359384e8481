// docparse upload page: a finished document's structure shown under its row ("Read"), with a
// toggle for page furniture, and a running document's pages as they are read (LivePages).
// Loaded before app.js, whose helpers (el, authHeaders, withToken, askForKey, describeError)
// it calls once the page runs.
"use strict";

// The document's structure shown in the page. The gateway's HTML rendering (?format=html:
// headings, lists, tables with merged cells, figures; every text of the document escaped) is
// fetched, parsed by DOMParser into an inert document (nothing in it runs or loads), and
// rebuilt here node by node: only the elements the rendering uses are created, with only
// their numeric attributes, and every text node is copied as text. Document text can never
// become markup in this page, whatever it says ("<script>", "<img onerror=...>"). Images come
// from the job's assets, with the key as the other links carry it.
const STRUCTURE_TAGS = new Set([
  "section", "h1", "h2", "h3", "h4", "h5", "h6", "p", "br", "ul", "ol", "li", "table",
  "caption", "thead", "tbody", "tr", "th", "td", "figure", "figcaption", "img", "header",
  "footer", "aside",
]);
const NUMERIC_ATTRIBUTES = ["rowspan", "colspan", "value", "data-page", "data-slide", "data-sheet"];
const SKIPPED_TAGS = new Set(["head", "script", "style", "template", "noscript", "svg", "math"]);

class DocumentView {
  constructor(jobId, name) {
    this.jobId = jobId;
    this.loads = 0;
    this.furniture = el("input", { type: "checkbox", onchange: () => this.load() });
    this.article = el("article", { class: "document", "aria-label": `${name}, as parsed` });
    this.node = el(
      "div",
      { class: "reading" },
      el(
        "label",
        { class: "furniture" },
        this.furniture,
        " Page furniture (running headers, footers, page numbers)",
      ),
      this.article,
    );
  }

  async load() {
    const load = ++this.loads; // a later load (the toggle pressed again) wins
    const furniture = this.furniture.checked;
    this.article.setAttribute("aria-busy", "true");
    const url = `/v1/jobs/${encodeURIComponent(this.jobId)}/result?format=html&furniture=${furniture}`;
    let response;
    let text = "";
    try {
      response = await fetch(url, { headers: authHeaders() });
      text = await response.text();
    } catch (err) {
      response = { ok: false, status: 0 };
      text = JSON.stringify({ reason: "NETWORK", message: String(err) });
    }
    if (load !== this.loads) return;
    this.article.setAttribute("aria-busy", "false");
    if (!response.ok) {
      if (response.status === 401) askForKey();
      let body = null;
      try {
        body = JSON.parse(text);
      } catch {}
      this.article.replaceChildren(el("p", { class: "error" }, describeError(body, response.status)));
      delete this.article.dataset.furniture;
      return;
    }
    const parsed = new DOMParser().parseFromString(text, "text/html");
    const content = document.createDocumentFragment();
    for (const child of parsed.body.childNodes) appendCopy(content, child, this.jobId);
    this.article.replaceChildren(content);
    this.article.dataset.furniture = String(furniture);
  }
}

function appendCopy(parent, node, jobId) {
  if (node.nodeType === Node.TEXT_NODE) {
    parent.append(document.createTextNode(node.data));
    return;
  }
  if (node.nodeType !== Node.ELEMENT_NODE || SKIPPED_TAGS.has(node.localName)) return;
  const tag = node.localName;
  let copy = parent;
  if (STRUCTURE_TAGS.has(tag)) {
    copy = document.createElement(tag);
    for (const name of NUMERIC_ATTRIBUTES) {
      const value = node.getAttribute(name);
      if (value !== null && /^[0-9]{1,9}$/.test(value)) copy.setAttribute(name, value);
    }
    const role = node.getAttribute("data-role");
    if (role) copy.dataset.role = role; // an attribute value: never markup
    if (tag === "img" && !copyImage(copy, node, jobId)) return;
    parent.append(copy);
  }
  for (const child of node.childNodes) appendCopy(copy, child, jobId);
}

// The rendering's image links are relative ("assets/<id>"): the job's asset URL.
function copyImage(copy, node, jobId) {
  const src = node.getAttribute("src") || "";
  if (!src.startsWith("assets/")) return false;
  const asset = encodeURIComponent(src.slice("assets/".length));
  copy.src = withToken(`/v1/jobs/${encodeURIComponent(jobId)}/assets/${asset}`);
  copy.alt = node.getAttribute("alt") || "";
  copy.loading = "lazy";
  return true;
}

// A running job's pages as the service reads them (GET /v1/jobs/{id}/pages, Server-Sent
// Events): each page's Markdown shown as text (never markup) under "Page n", a draft marked as
// such until the page's final replaces it. The browser's EventSource resumes on its own with
// Last-Event-ID after a network blip; after an HTTP error we reopen it with ?cursor= (the last
// event id) after a pause. The stream ends with the job (`end`).
class LivePages {
  constructor(jobId, name) {
    this.jobId = jobId;
    this.pages = new Map(); // page number → { node, final }
    this.cursor = "";
    this.retryDelay = 1000;
    this.list = el("div", { class: "live-list" });
    this.status = el("p", { class: "live-status", role: "status" }, "Waiting for the first page…");
    this.node = el(
      "div",
      { class: "live-pages", "aria-label": `${name}, pages as they are read` },
      this.status,
      this.list,
    );
  }

  start() {
    if (this.source || this.node.dataset.ended === "true") return;
    const url = `/v1/jobs/${encodeURIComponent(this.jobId)}/pages`;
    const cursor = this.cursor ? `?cursor=${encodeURIComponent(this.cursor)}` : "";
    const source = new EventSource(withToken(url + cursor));
    this.source = source;
    source.addEventListener("open", () => {
      this.retryDelay = 1000;
    });
    source.addEventListener("page", (event) => {
      this.cursor = event.lastEventId;
      this.show(JSON.parse(event.data));
    });
    source.addEventListener("end", () => this.stop("ended"));
    source.addEventListener("stream-error", (event) => {
      this.stop("stopped");
      this.status.textContent = `Pages stopped: ${describeError(JSON.parse(event.data))}`;
    });
    source.addEventListener("error", () => {
      if (source.readyState !== EventSource.CLOSED) return; // the browser reconnects itself
      this.source = null;
      setTimeout(() => this.start(), this.retryDelay);
      this.retryDelay = Math.min(this.retryDelay * 2, 15000);
    });
  }

  stop(why) {
    if (this.source) this.source.close();
    this.source = null;
    this.node.dataset.ended = "true";
    if (why === "ended") this.status.textContent = this.summary();
  }

  summary() {
    const count = this.pages.size;
    const drafts = [...this.pages.values()].filter((page) => !page.final).length;
    const what = `${count} page${count === 1 ? "" : "s"}`;
    return drafts ? `${what}, ${drafts} still drafts` : what;
  }

  // One page event: a new page, a draft replaced by the final, or (never) a final replaced.
  show(page) {
    const number = Number(page.page_number);
    const known = this.pages.get(number);
    if (known && known.final && !page.final) return; // a final never goes back to a draft
    const mark = el("span", { class: "draft-mark" }, page.final ? "" : "draft");
    mark.hidden = page.final;
    const text = el("pre", { class: "page-text" });
    text.textContent = page.markdown; // text, never markup
    const node = el(
      "section",
      { class: "live-page", "data-page": String(number), "data-final": String(page.final) },
      el("h4", {}, `Page ${number} `, mark),
      text,
    );
    if (known) {
      known.node.replaceWith(node);
    } else {
      const next = [...this.pages.keys()].filter((n) => n > number).sort((a, b) => a - b)[0];
      this.list.insertBefore(node, next === undefined ? null : this.pages.get(next).node);
    }
    this.pages.set(number, { node, final: Boolean(page.final) });
    this.status.textContent = this.summary();
  }
}
