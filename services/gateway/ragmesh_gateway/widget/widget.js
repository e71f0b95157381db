// <ragmesh-chat>: a dependency-free chat widget for ragmesh. Plain JavaScript, no build step.
//
//   <script type="module" src="/widget/widget.js"></script>
//   <ragmesh-chat api="/api/rag/v1" question-param="q"></ragmesh-chat>
//
// Attributes: api (base of the REST API, default /api/rag/v1, same origin), top-k, placeholder,
// question-param (ask the URL's ?<param>= question on load, for links and tests).
// It streams POST {api}/chat/stream with fetch + ReadableStream (EventSource cannot POST), shows
// the answer as it arrives, links every [S#] to its source (URL, heading path, lines) and offers
// thumbs up/down (POST {api}/feedback). The host element reflects progress in data-state
// (idle, streaming, done, error) and data-answer-status, for pages and tests to watch.
// Document text is untrusted: it is only ever set as textContent, and only http(s) or
// same-origin links are rendered.

const CITATION = /\[\s*(S\d+(?:\s*[,;]\s*S\d+)*)\s*\]/g;

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
.answer { white-space: pre-wrap; }
.answer a.cite { text-decoration: none; font-size: .85em; vertical-align: super; margin: 0 .1em; }
.sources { margin: .8rem 0 0; padding-left: 1.4rem; font-size: .92em; }
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

/** A link target for a source: its own absolute http(s) URL (a site page), else the gateway's
 * copy of the original file (download_path). Relative URLs are site-relative paths of the corpus,
 * meaningless on this page, and anything else (javascript:, data:) is never a link. */
function sourceHref(source, apiBase) {
  if (/^https?:\/\//i.test(source.url || "")) return new URL(source.url).href;
  if (/^\/(?!\/)/.test(source.download_path || "")) {
    return new URL(source.download_path, apiBase).href;
  }
  return null;
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
      this.renderSources(data.sources, data.basis || "cited");
      this.renderAnswer();
    } else if (event === "done") {
      this.setState("done", data.answer_status);
      this.status.textContent =
        data.answer_status === "answered" ? "" :
        data.answer_status === "insufficient_evidence" ? (data.hint || "Nothing in the documents answers this.") :
        "No verified answer could be written; the most relevant passages are listed below.";
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
    this.answer.replaceChildren();
    this.sourceList.replaceChildren();
    this.sourcesTitle.hidden = true;
    this.feedback.hidden = true;
    for (const button of this.feedback.querySelectorAll("button")) button.disabled = false;
    this.feedback.querySelector("span").textContent = "Was this helpful?";
  }

  fail(code, message) {
    this.setState("error", "");
    this.status.textContent = `Error ${code}: ${message}`;
  }

  renderAnswer() {
    const nodes = [];
    let last = 0;
    for (const match of this.answerText.matchAll(CITATION)) {
      nodes.push(document.createTextNode(this.answerText.slice(last, match.index)));
      for (const id of match[1].match(/S\d+/g)) nodes.push(this.citationLink(id));
      last = match.index + match[0].length;
    }
    nodes.push(document.createTextNode(this.answerText.slice(last)));
    this.answer.replaceChildren(...nodes);
  }

  citationLink(id) {
    const link = document.createElement("a");
    link.className = "cite";
    link.textContent = `[${id}]`;
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
    this.sourceList.replaceChildren(
      ...sources.map((source) => {
        const item = document.createElement("li");
        item.id = `source-${source.source_id}`;
        const label = document.createElement("strong");
        label.textContent = `[${source.source_id}] `;
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
        return item;
      }),
    );
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
