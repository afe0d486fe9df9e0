// The gateway's HTTP API from the browser. The API key lives in sessionStorage only: it is
// gone when the tab closes, and never written to a cookie or to localStorage.

const KEY = "taskyard.apiKey";
const RECONNECTS = 5;

export const credentials = {
  get key() { return sessionStorage.getItem(KEY); },
  set(key) { sessionStorage.setItem(KEY, key); },
  clear() { sessionStorage.removeItem(KEY); },
};

export class ApiError extends Error {
  constructor(status, reason) {
    super(reason);
    this.status = status;
  }
}

function headers(extra = {}) {
  return { Authorization: `Bearer ${credentials.key}`, ...extra };
}

async function reason(response) {
  try {
    const { detail } = await response.json();
    if (Array.isArray(detail)) return detail.map((i) => `${i.loc.join(".")}: ${i.msg}`).join("; ");
    return String(detail);
  } catch {
    return `HTTP ${response.status}`;
  }
}

/** A JSON call: the answer's body, or an ApiError with the gateway's reason. */
export async function api(path, { method = "GET", body } = {}) {
  const init = { method, headers: headers() };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (!response.ok) throw new ApiError(response.status, await reason(response));
  return response.json();
}

/** Server-sent events per the specification, read from a fetch response (a browser's
 * EventSource cannot send the API key): `{id, event, data}` objects. */
export async function* readEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let event = { id: null, event: "message", data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    const lines = buffer.split(/\r\n|\r(?!$)|\n/);
    buffer = lines.pop(); // an unfinished line (or a lone CR that may start a CRLF)
    for (const line of lines) {
      if (line === "") {
        if (event.data.length) yield { ...event, data: event.data.join("\n") };
        event = { id: event.id, event: "message", data: [] };
        continue;
      }
      if (line.startsWith(":")) continue; // a comment (keep-alive)
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let text = colon < 0 ? "" : line.slice(colon + 1);
      if (text.startsWith(" ")) text = text.slice(1);
      if (field === "data") event.data.push(text);
      else if (field === "event") event.event = text;
      else if (field === "id" && !text.includes("\0")) event.id = text;
    }
  }
}

/** A task's events, from the first, live until its final status; a dropped stream is resumed
 * with Last-Event-ID. Stops when `signal` aborts. */
export async function* follow(taskId, signal) {
  let lastId = null;
  let failures = 0;
  while (failures <= RECONNECTS) {
    try {
      const extra = lastId ? { "Last-Event-ID": lastId } : {};
      const response = await fetch(`/v1/tasks/${taskId}/events`, { headers: headers(extra), signal });
      if (!response.ok) throw new ApiError(response.status, await reason(response));
      for await (const sse of readEvents(response)) {
        failures = 0;
        lastId = sse.id;
        const event = { id: sse.id, kind: sse.event, data: JSON.parse(sse.data) };
        yield event;
        if (isFinal(event)) return;
      }
    } catch (error) {
      if (error instanceof ApiError || signal.aborted) throw error;
      failures += 1;
      await new Promise((done) => setTimeout(done, Math.min(100 * 2 ** failures, 2000)));
    }
  }
  throw new ApiError(0, "the event stream keeps dropping");
}

export const FINAL = new Set(["succeeded", "failed", "cancelled", "timed_out"]);

export function isFinal(event) {
  return event.kind === "status" && FINAL.has(event.data.status);
}
