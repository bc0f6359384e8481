// docparse upload page: a finished document's structure shown under its row ("Read"), with a
// toggle for page furniture. Loaded before app.js, whose helpers (el, authHeaders, withToken,
// askForKey, describeError) it calls once the page runs.
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
