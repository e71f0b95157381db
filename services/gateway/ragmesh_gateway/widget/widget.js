// <ragmesh-chat>: a dependency-free chat widget for ragmesh. Plain JavaScript, no build step.
//
//   <script type="module" src="/widget/widget.js"></script>
//   <ragmesh-chat api="/api/rag/v1" question-param="q"></ragmesh-chat>
//
// Attributes: api (base of the REST API, default /api/rag/v1, same origin), top-k, placeholder,
// question-param (ask the URL's ?<param>= question on load, for links and tests).
// It streams POST {api}/chat/stream with fetch + ReadableStream (EventSource cannot POST), shows
// the answer as it arrives with safe Markdown (emphasis, inline code, lists), numbers citations
// [1], [2], ... in the order the answer cites them, links each to its source (the site page, or
// the gateway's source view with the cited lines marked), lists the sources with "view source",
// says how many of the passages shown held instruction-like text, words a refusal for a visitor
// and offers thumbs up/down (POST {api}/feedback). The host element reflects progress in
// data-state (idle, streaming, done, error) and data-answer-status, for pages and tests to watch.
// Document text is untrusted: it is only ever set as textContent (Markdown becomes elements built
// here, never parsed HTML), and only http(s) or same-origin links are rendered.

const CITATION = /\[\s*(S\d+(?:\s*[,;]\s*S\d+)*)\s*\]/g;
// Inline Markdown the answer may carry, and citations: one token at a time, left to right.
const INLINE = /(`[^`\n]+`)|(\*\*[^*\n]+?\*\*)|((?<![\w*])\*[^*\s](?:[^*\n]*[^*\s])?\*(?![\w*]))|((?<![\w])_[^_\s](?:[^_\n]*[^_\s])?_(?![\w]))|(\[\s*S\d+(?:\s*[,;]\s*S\d+)*\s*\])/g;
const LIST_ITEM = /^\s*(?:([-*+])|(\d{1,3})[.)])\s+(.*)$/;
const REFUSAL = "Sorry, the documentation doesn't seem to cover that. Try asking with other words, " +
  "or browse the documentation directly.";
const WITHHELD = "I couldn't write an answer I can back up with the documentation. " +
  "These passages look relevant:";

const STYLE = `
:host { display: block; font: 15px/1.5 system-ui, sans-serif; color: #1d2430; max-width: 46rem; }
form { display: flex; gap: .5rem; }
textarea { flex: 1; font: inherit; padding: .5rem; border: 1px solid #b8c0cc; border-radius: 6px;
  resize: vertical; min-height: 2.6rem; }
button { font: inherit; padding: .4rem .9rem; border: 1px solid #2f5fb3; border-radius: 6px;
  background: #2f5fb3; color: #fff; cursor: pointer; }
button[disabled] { opacity: .6; cursor: default; }
.question { font-weight: 600; margin: .8rem 0 .2rem; }
.status { color: #5b6472; font-size: .9em; min-height: 1.4em; margin: .6rem 0 .2rem; }
.answer p { margin: .3rem 0; }
.answer ul, .answer ol { margin: .3rem 0; padding-left: 1.4rem; }
.answer code, .sources code { font: .92em ui-monospace, SFMono-Regular, Menlo, monospace; background: #f0f2f5;
  padding: .05em .3em; border-radius: 4px; }
.refusal { color: #3d4654; }
.security { color: #7a5200; font-size: .88em; margin: .5rem 0 0; }
.sources .view { margin-left: .5rem; font-size: .9em; }
.answer a.cite { text-decoration: none; font-size: .85em; vertical-align: super; margin: 0 .1em; }
.sources { margin: .8rem 0 0; padding-left: 0; list-style: none; font-size: .92em; }
.sources li { margin: .25rem 0; }
.sources .where { color: #5b6472; }
.sources-title { margin: .8rem 0 0; font-weight: 600; font-size: .92em; }
.feedback { margin-top: .6rem; display: flex; gap: .4rem; align-items: center; font-size: .9em; }
.feedback button { background: #fff; color: #1d2430; border-color: #b8c0cc; padding: .1rem .6rem; }
[hidden] { display: none !important; }
`;

/** Yields {event, data} for each server-sent event in a fetch body (comments are skipped). */
export async function* readServerSentEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      // Normalise line ends, but keep a trailing \r: its \n may come in the next chunk.
      const tail = buffer.endsWith("\r") ? "\r" : "";
      buffer = buffer.slice(0, buffer.length - tail.length).replace(/\r\n?/g, "\n") + tail;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = parseEvent(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (event) yield event;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

function parseEvent(block) {
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  return data.length ? { event, data: data.join("\n") } : null;
}

/** A link target for a source: its absolute http(s) URL (the corpus's site), or the gateway's
 * root-relative source view the url names; anything else (javascript:, data:) is never a link. */
function sourceHref(source, apiBase) {
  if (/^https?:\/\//i.test(source.url || "")) return new URL(source.url).href;
  if (/^\/(?!\/)/.test(source.url || "")) return new URL(source.url, apiBase).href;
  return viewSourceHref(source, apiBase);
}

/** The gateway's view of the cited file with the cited lines marked and scrolled into view. */
function viewSourceHref(source, apiBase) {
  if (!source.corpus || !source.source_path) return null;
  const path = source.source_path.split("/").map(encodeURIComponent).join("/");
  const corpus = encodeURIComponent(source.corpus).replace(/%40/g, "@");
  const lines = source.source_lines;
  const range = lines ? `?lines=${lines[0]}-${lines[1]}#L${lines[0]}` : "";
  return new URL(`source/${corpus}/${path}${range}`, apiBase).href;
}

/** Elements for one line of answer text: code, strong, em, and citation links from makeCite. */
function inlineNodes(text, makeCite) {
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(INLINE)) {
    if (match.index > last) nodes.push(document.createTextNode(text.slice(last, match.index)));
    const [token, code, strong, star, under, cite] = match;
    if (code) nodes.push(element("code", code.slice(1, -1)));
    else if (strong) nodes.push(element("strong", strong.slice(2, -2)));
    else if (star || under) nodes.push(element("em", token.slice(1, -1)));
    else if (cite) for (const id of cite.match(/S\d+/g)) nodes.push(makeCite(id));
    last = match.index + token.length;
  }
  if (last < text.length) nodes.push(document.createTextNode(text.slice(last)));
  return nodes;
}

function element(tag, text) {
  const node = document.createElement(tag);
  node.textContent = text;
  return node;
}

/** Paragraphs and lists of Markdown text, built as elements (never as parsed HTML). */
export function markdownNodes(text, makeCite) {
  const blocks = [];
  let list = null;
  let paragraph = null;
  for (const line of text.split("\n")) {
    const item = line.match(LIST_ITEM);
    if (!line.trim()) {
      list = paragraph = null;
    } else if (item) {
      const ordered = Boolean(item[2]);
      if (!list || list.ordered !== ordered) {
        list = { ordered, node: document.createElement(ordered ? "ol" : "ul") };
        blocks.push(list.node);
      }
      const li = document.createElement("li");
      li.append(...inlineNodes(item[3], makeCite));
      list.node.append(li);
      paragraph = null;
    } else {
      list = null;
      if (!paragraph) {
        paragraph = document.createElement("p");
        blocks.push(paragraph);
      } else {
        paragraph.append(document.createTextNode(" "));
      }
      paragraph.append(...inlineNodes(line.trim(), makeCite));
    }
  }
  return blocks;
}

function describeWhere(source, { withTitle = true } = {}) {
  let path = source.heading_path || [];
  if (!withTitle && path[0] === source.title) path = path.slice(1);
  const heading = path.join(" › ") || (withTitle ? source.title || "" : "");
  const lines = source.source_lines;
  const where = lines ? `lines ${lines[0]}–${lines[1]}` : source.page ? `page ${source.page}` : "";
  return [heading, where].filter(Boolean).join(" · ");
}

class RagmeshChat extends HTMLElement {
  constructor() {
    super();
    this.sessionId = null;
    this.requestId = null;
    this.controller = null;
    this.answerText = "";
    this.sources = new Map();
    this.numbers = new Map(); // source id -> the number the visitor sees, in order of citation
    this.answerStatus = "";
    const root = this.attachShadow({ mode: "open" });
    root.innerHTML = `<style>${STYLE}</style>
      <form part="form">
        <textarea name="question" rows="2" aria-label="Your question" required></textarea>
        <button type="submit" part="ask">Ask</button>
      </form>
      <p class="question" hidden></p>
      <div class="status" role="status"></div>
      <div class="answer" part="answer" aria-live="polite"></div>
      <p class="sources-title" hidden></p>
      <ol class="sources" part="sources"></ol>
      <p class="security" hidden></p>
      <div class="feedback" hidden>
        <span>Was this helpful?</span>
        <button type="button" data-rating="1">Yes</button>
        <button type="button" data-rating="-1">No</button>
      </div>`;
    this.form = root.querySelector("form");
    this.input = root.querySelector("textarea");
    this.button = root.querySelector("button[type=submit]");
    this.question = root.querySelector(".question");
    this.status = root.querySelector(".status");
    this.answer = root.querySelector(".answer");
    this.sourcesTitle = root.querySelector(".sources-title");
    this.sourceList = root.querySelector(".sources");
    this.security = root.querySelector(".security");
    this.feedback = root.querySelector(".feedback");
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.ask(this.input.value);
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        this.ask(this.input.value);
      }
    });
    for (const button of this.feedback.querySelectorAll("button")) {
      button.addEventListener("click", () => this.rate(Number(button.dataset.rating)));
    }
  }

  get apiBase() {
    const api = (this.getAttribute("api") || "/api/rag/v1").replace(/\/+$/, "");
    return new URL(api + "/", document.baseURI).href;
  }

  connectedCallback() {
    this.input.placeholder = this.getAttribute("placeholder") || "Ask a question about the docs";
    this.setState("idle");
    const param = this.getAttribute("question-param");
    const question = param ? new URLSearchParams(window.location.search).get(param) : null;
    if (question) {
      this.input.value = question;
      this.ask(question);
    }
  }

  disconnectedCallback() {
    if (this.controller) this.controller.abort();
  }

  setState(state, answerStatus) {
    this.dataset.state = state;
    if (answerStatus !== undefined) this.dataset.answerStatus = answerStatus;
  }

  async ask(rawQuestion) {
    const question = (rawQuestion || "").trim();
    if (!question) return;
    if (this.controller) this.controller.abort();
    const controller = (this.controller = new AbortController());
    this.reset();
    this.question.textContent = question;
    this.question.hidden = false;
    this.input.value = "";
    this.setState("streaming", "");
    this.button.disabled = true;
    this.status.textContent = "Searching…";
    try {
      let response = await this.post(question, this.sessionId, controller.signal);
      if (response.status === 404 && this.sessionId) {
        // The session expired: start a new one rather than fail the question.
        this.sessionId = null;
        response = await this.post(question, null, controller.signal);
      }
      if (!response.ok || !(response.headers.get("content-type") || "").startsWith("text/event-stream")) {
        const body = await response.json().catch(() => ({}));
        this.fail(body.code || `HTTP_${response.status}`, body.message || "the request failed");
        return;
      }
      let terminal = false;
      for await (const { event, data } of readServerSentEvents(response.body)) {
        terminal = this.handle(event, JSON.parse(data)) || terminal;
        if (terminal) break;
      }
      if (!terminal) this.fail("UNAVAILABLE", "the answer stream ended early");
    } catch (error) {
      if (error.name !== "AbortError") this.fail("UNAVAILABLE", "the service could not be reached");
    } finally {
      if (this.controller === controller) {
        this.controller = null;
        this.button.disabled = false;
      }
    }
  }

  post(question, sessionId, signal) {
    const body = { question };
    const topK = Number(this.getAttribute("top-k"));
    if (topK > 0) body.top_k = topK;
    if (sessionId) body.session_id = sessionId;
    return fetch(this.apiBase + "chat/stream", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify(body),
      signal,
    });
  }

  /** Applies one event; true when it was the terminal one. */
  handle(event, data) {
    if (event === "meta") {
      this.requestId = data.request_id;
      if (data.session_id) this.sessionId = data.session_id;
      this.status.textContent = "Answering…";
    } else if (event === "token") {
      this.answerText += data.text;
      this.renderAnswer();
    } else if (event === "sources") {
      this.sources = new Map(data.sources.map((source) => [source.source_id, source]));
      this.renderAnswer();
      this.renderSources(data.sources, data.basis || "cited");
      this.renderSecurity(data.security, data.sources.length);
    } else if (event === "done") {
      this.setState("done", data.answer_status);
      this.answerStatus = data.answer_status;
      this.status.textContent = "";
      if (data.hint) this.status.dataset.hint = data.hint; // for the page; a visitor reads the refusal
      if (data.answer_status === "insufficient_evidence") this.showRefusal(REFUSAL);
      else if (data.answer_status === "withheld") this.showRefusal(WITHHELD);
      this.feedback.hidden = !this.requestId;
      return true;
    } else if (event === "error") {
      this.fail(data.code, data.message);
      return true;
    }
    return false;
  }

  reset() {
    this.answerText = "";
    this.sources = new Map();
    this.numbers = new Map();
    this.answerStatus = "";
    delete this.status.dataset.hint;
    this.answer.replaceChildren();
    this.sourceList.replaceChildren();
    this.sourcesTitle.hidden = true;
    this.security.hidden = true;
    this.feedback.hidden = true;
    for (const button of this.feedback.querySelectorAll("button")) button.disabled = false;
    this.feedback.querySelector("span").textContent = "Was this helpful?";
  }

  fail(code, message) {
    this.setState("error", "");
    this.status.textContent = `Error ${code}: ${message}`;
  }

  showRefusal(text) {
    const note = element("p", text);
    note.className = "refusal";
    this.answer.replaceChildren(note);
  }

  /** Citation numbers in order of first citation in the answer text. */
  numberCitations() {
    this.numbers = new Map();
    for (const match of this.answerText.matchAll(CITATION)) {
      for (const id of match[1].match(/S\d+/g)) {
        if (!this.numbers.has(id)) this.numbers.set(id, this.numbers.size + 1);
      }
    }
  }

  renderAnswer() {
    if (this.answerStatus === "insufficient_evidence" || this.answerStatus === "withheld") return;
    this.numberCitations();
    this.answer.replaceChildren(...markdownNodes(this.answerText, (id) => this.citationLink(id)));
  }

  citationLink(id) {
    const link = document.createElement("a");
    link.className = "cite";
    link.textContent = `[${this.numbers.get(id) || "?"}]`;
    link.dataset.source = id;
    const source = this.sources.get(id);
    if (source) {
      const href = sourceHref(source, this.apiBase);
      if (href) {
        link.href = href;
        link.target = "_blank";
        link.rel = "noopener noreferrer";
      }
      link.title = [source.title, describeWhere(source)].filter(Boolean).join(" — ");
    }
    return link;
  }

  renderSources(sources, basis) {
    this.sourcesTitle.hidden = sources.length === 0;
    this.sourcesTitle.textContent = basis === "retrieved" ? "Relevant passages" : "Sources";
    // Cited sources in the order the answer numbers them; retrieved ones as they came.
    const ordered = basis === "cited"
      ? [...sources].sort((a, b) => (this.numbers.get(a.source_id) || 1e9) - (this.numbers.get(b.source_id) || 1e9))
      : sources;
    this.sourceList.replaceChildren(
      ...ordered.map((source, index) => {
        const item = document.createElement("li");
        item.id = `source-${source.source_id}`;
        item.dataset.source = source.source_id;
        const number = basis === "cited" ? this.numbers.get(source.source_id) || index + 1 : index + 1;
        const label = element("strong", `[${number}] `);
        const href = sourceHref(source, this.apiBase);
        const title = document.createElement(href ? "a" : "span");
        title.textContent = source.title || source.source_path || source.url;
        if (href) {
          title.href = href;
          title.target = "_blank";
          title.rel = "noopener noreferrer";
        }
        const where = document.createElement("span");
        where.className = "where";
        const described = describeWhere(source, { withTitle: false });
        where.textContent = described ? ` — ${described}` : "";
        item.append(label, title, where);
        const view = viewSourceHref(source, this.apiBase);
        if (view) {
          const link = element("a", "view source");
          link.className = "view";
          link.href = view;
          link.target = "_blank";
          link.rel = "noopener noreferrer";
          item.append(link);
        }
        return item;
      }),
    );
  }

  /** What the visitor is shown, said plainly: how many of these passages held text that looked
   * like instructions (treated as plain text, never followed). */
  renderSecurity(security, shown) {
    const flagged = (security && security.flagged_sources) || [];
    this.security.hidden = flagged.length === 0;
    this.security.dataset.findings = String((security && security.findings_count) || 0);
    this.security.textContent = flagged.length === 0 ? "" :
      `${flagged.length} of the ${shown} passage${shown === 1 ? "" : "s"} shown contained text that looked like ` +
      "instructions to the assistant; it was treated as plain text and not followed.";
  }

  async rate(rating) {
    if (!this.requestId) return;
    const buttons = this.feedback.querySelectorAll("button");
    for (const button of buttons) button.disabled = true;
    const label = this.feedback.querySelector("span");
    try {
      const response = await fetch(this.apiBase + "feedback", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ request_id: this.requestId, rating }),
      });
      label.textContent = response.ok ? "Thanks for the feedback." : "Feedback could not be saved.";
      this.dataset.feedback = response.ok ? "saved" : "failed";
    } catch (_) {
      label.textContent = "Feedback could not be sent.";
      this.dataset.feedback = "failed";
    }
  }
}

if (!customElements.get("ragmesh-chat")) customElements.define("ragmesh-chat", RagmeshChat);
