// A task's events as a live transcript: statuses, the model's text token by token, tool
// calls with their code, tool outputs and artifacts, and approvals with Approve / Deny.
// Everything the server sent is put in as text (textContent), never as markup.

import { FINAL } from "./api.js";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function code(text) {
  const pre = el("pre");
  pre.append(el("code", "", text));
  return pre;
}

function callCode(parameters) {
  if (parameters && typeof parameters.command === "string") return parameters.command;
  return JSON.stringify(parameters, null, 2);
}

export class Transcript {
  /** `decide(callId, approved)` answers an approval request (a promise). */
  constructor(root, decide) {
    this.root = root;
    this.decide = decide;
    this.streaming = null; // the model's text arriving token by token
    root.replaceChildren();
  }

  handle(event) {
    const render = { status: this.status, token: this.token, message: this.message,
                     approval_requested: this.approval, approval_decided: this.decided,
                     rate_limited: this.waiting }[event.kind];
    if (render) render.call(this, event.data);
  }

  status(data) {
    const line = `status: ${data.status}${data.error ? ` (${data.error})` : ""}`;
    this.root.append(el("div", `status status-${data.status}`, line));
    this.root.dataset.status = data.status;
    if (FINAL.has(data.status)) this.root.dataset.final = data.status;
  }

  /** The tenant's model rate limit is spent: the task waits, and says why. */
  waiting(data) {
    const line = `waiting: ${data.reason}; trying again in ${data.retry_in_s}s`;
    this.root.append(el("div", "status status-waiting", line));
  }

  token(data) {
    if (!this.streaming) {
      this.streaming = el("div", "msg assistant streaming");
      this.streaming.append(el("div", "sender", data.sender || "model"), el("div", "text"));
      this.root.append(this.streaming);
    }
    this.streaming.querySelector(".text").textContent += data.delta;
  }

  message(data) {
    const content = data.content;
    if (content && typeof content === "object" && content.object === "action_return") {
      this.toolOutput(data.sender, content);
      return;
    }
    const streamed = this.streaming;
    this.streaming = null;
    if (streamed) {
      streamed.classList.remove("streaming");
    } else if (content) {
      const bubble = el("div", `msg ${data.sender === "user" ? "user" : "assistant"}`);
      bubble.append(el("div", "sender", data.sender), el("div", "text", String(content)));
      this.root.append(bubble);
    }
    for (const call of (data.formatted && data.formatted.tool_calls) || []) {
      const node = el("div", "msg tool-call");
      node.append(el("div", "sender", `${data.sender} calls ${call.name}`), code(callCode(call.parameters)));
      this.root.append(node);
    }
  }

  toolOutput(sender, ret) {
    const node = el("div", `msg tool-output${ret.errmsg ? " failed" : ""}`);
    node.append(el("div", "sender", `${sender} output`));
    const text = (ret.result || []).filter((item) => item.type === "text").map((i) => i.content);
    if (ret.errmsg) text.push(ret.errmsg);
    node.append(code(text.join("\n") || "(no output)"));
    for (const item of (ret.result || []).filter((i) => i.type !== "text")) {
      node.append(this.artifact(item));
    }
    this.root.append(node);
  }

  artifact(item) {
    const box = el("div", "artifact");
    const source = String(item.content || "");
    if (item.type === "image" && /^(data:image\/|https?:)/.test(source)) {
      const image = el("img");
      image.src = source;
      image.alt = "artifact";
      box.append(image);
    } else {
      box.append(el("span", "", `${item.type}: ${source.slice(0, 200)}`));
    }
    return box;
  }

  approval(data) {
    for (const call of data.calls || []) this.root.append(this.approvalCard(call));
  }

  approvalCard(call) {
    const card = el("div", "msg approval");
    card.dataset.callId = call.id;
    card.append(el("div", "sender", `approve ${call.tool}?`), code(callCode(call.arguments)));
    const approve = el("button", "approve", "Approve");
    const deny = el("button", "deny", "Deny");
    const decided = el("div", "decided");
    const answer = async (approved) => {
      approve.disabled = deny.disabled = true;
      try {
        const { state } = await this.decide(call.id, approved);
        decided.textContent = state;
      } catch (error) {
        approve.disabled = deny.disabled = false;
        decided.textContent = String(error.message);
      }
    };
    approve.addEventListener("click", () => answer(true));
    deny.addEventListener("click", () => answer(false));
    card.append(approve, deny, decided);
    return card;
  }

  decided(data) {
    // Decided here, from another tab, by the CLI, or by the approval timeout.
    const card = [...this.root.querySelectorAll(".msg.approval")].find(
      (node) => node.dataset.callId === data.call_id,
    );
    if (!card) return;
    card.querySelectorAll("button").forEach((button) => { button.disabled = true; });
    card.querySelector(".decided").textContent =
      data.reason ? `${data.state}: ${data.reason}` : data.state;
  }
}
