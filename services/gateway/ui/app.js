// The dashboard: sign in with an API key, the tenant's tasks live (status and age), a task's
// transcript as it streams, sessions (each one forked with a click), cron schedules, the
// queues, the workers and the model replicas.

import { ApiError, api, credentials, follow } from "./api.js";
import { Transcript } from "./transcript.js";

const TASKS_EVERY_MS = 2000;
const SYSTEM_EVERY_MS = 3000;
const SCHEDULES_EVERY_MS = 5000;
const $ = (selector) => document.querySelector(selector);

const state = { session: null, following: null, timers: [] };

function showError(error) {
  const box = $("#error");
  box.textContent = error ? String(error.message || error) : "";
  box.hidden = !error;
  if (error instanceof ApiError && error.status === 401) signOut();
}

// A cell cut short by the layout (long ids and inputs end in an ellipsis) keeps its whole
// text in `title`, so hovering shows it.
function cell(row, content, className, title) {
  const td = document.createElement("td");
  td.append(...[content].flat()); // a text, or the lines of a cell of several
  if (className) td.className = className;
  if (title) td.title = title;
  row.append(td);
}

function line(text, className) {
  const div = document.createElement("div");
  div.className = className;
  div.textContent = text;
  return div;
}

function age(seconds) {
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
    if (seconds >= size) return `${Math.floor(seconds / size)}${unit}`;
  }
  return `${Math.max(0, Math.floor(seconds))}s`;
}

async function refreshTasks() {
  const params = new URLSearchParams({ limit: "50" });
  if (state.session) params.set("session_id", state.session);
  const { tasks } = await api(`/v1/tasks?${params}`);
  const now = Date.now() / 1000;
  const rows = tasks.map((task) => {
    const row = document.createElement("tr");
    row.dataset.taskId = task.id;
    row.classList.toggle("selected", task.id === state.following?.taskId);
    const input = task.input ?? task.id;
    cell(row, task.status, `badge status-${task.status}`, task.status);
    cell(row, age(now - task.created_at), "age");
    cell(row, input.split("\n")[0], "input", input);
    cell(row, task.session_id, "session", task.session_id);
    row.addEventListener("click", () => open(task.id));
    return row;
  });
  $("#tasks tbody").replaceChildren(...rows);
  if (!state.session) showSessions(tasks);
}

function showSessions(tasks) {
  const counts = new Map();
  for (const task of tasks) counts.set(task.session_id, (counts.get(task.session_id) || 0) + 1);
  const items = [...counts].map(([session, count]) => {
    const item = document.createElement("li");
    item.append(line(session, "name"), line(`${count} task${count > 1 ? "s" : ""}`, "count"),
                forkButton(session));
    item.title = session;
    item.dataset.session = session;
    item.addEventListener("click", () => pickSession(session));
    return item;
  });
  $("#sessions").replaceChildren(...items);
}

function forkButton(session) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "fork";
  button.textContent = "Fork";
  button.title = `Fork ${session}: a new session with its memory and its live interpreter`;
  button.addEventListener("click", (event) => {
    event.stopPropagation(); // not a pick of the session
    fork(session);
  });
  return button;
}

// A fork has no task yet: the new task form names it, so the next task runs in the fork.
async function fork(session) {
  try {
    const forked = await api(`/v1/sessions/${encodeURIComponent(session)}/fork`, { method: "POST" });
    const interpreter = forked.interpreter === "copied" ? "its interpreter copied" : "no running interpreter to copy";
    $("#notice").textContent = `Forked ${session} into ${forked.session_id} (${interpreter}).`;
    $("#notice").dataset.session = forked.session_id;
    $("#notice").hidden = false;
    $("#task-session").value = forked.session_id;
    showError(null);
  } catch (error) {
    showError(error);
  }
}

function pickSession(session) {
  state.session = session;
  $("#all-sessions").hidden = !session;
  refreshTasks().catch(showError);
}

// Each schedule: its cron (its name on hover), when it runs next, how many runs it made (and
// missed), its task's input and session (or a fresh session each run).
async function refreshSchedules() {
  const { schedules } = await api("/v1/schedules");
  const now = Date.now() / 1000;
  $("#schedules tbody").replaceChildren(...schedules.map((schedule) => {
    const row = document.createElement("tr");
    row.dataset.scheduleId = schedule.id;
    const next = new Date(schedule.next_run_at * 1000).toISOString();
    const session = schedule.task.session_id ?? "a fresh session each run";
    const task = `${schedule.task.input.split("\n")[0]} (${session})`;
    cell(row, schedule.cron, "cron", `${schedule.name ?? schedule.id}: ${schedule.cron} (UTC)`);
    cell(row, `in ${age(schedule.next_run_at - now)}`, "next", next);
    cell(row, String(schedule.runs), "number", `${schedule.runs} runs, ${schedule.missed_runs} missed`);
    cell(row, task, "input", task);
    return row;
  }));
}

async function refreshSystem() {
  const view = await api("/v1/system");
  $("#queues tbody").replaceChildren(...view.queues.map((queue) => {
    const row = document.createElement("tr");
    cell(row, queue.name, "", queue.name);
    cell(row, String(queue.depth), "number");
    return row;
  }));
  $("#workers").replaceChildren(...(view.workers.length ? view.workers : ["none answering"]).map((name) => {
    const item = document.createElement("li");
    item.textContent = item.title = name;
    return item;
  }));
  $("#replicas tbody").replaceChildren(...view.replicas.map((replica) => {
    const row = document.createElement("tr");
    const model = replica.model === "*" ? "any model" : replica.model;
    const lines = [line(replica.name, "name"), line(model, "model")];
    cell(row, lines, "replica", `${replica.name}: ${model}`);
    cell(row, replica.healthy ? "healthy" : "down", replica.healthy ? "healthy" : "down");
    cell(row, String(replica.in_flight), "number");
    cell(row, `${replica.latency_ms.toFixed(1)} ms`, "number");
    return row;
  }));
}

async function open(taskId) {
  state.following?.controller.abort();
  const controller = new AbortController();
  state.following = { taskId, controller };
  $("#transcript-title").textContent = `Transcript of ${taskId}`;
  const decide = (callId, approved) =>
    api(`/v1/tasks/${taskId}/approvals/${encodeURIComponent(callId)}`, {
      method: "POST",
      body: { decision: approved ? "approve" : "deny" },
    });
  const transcript = new Transcript($("#transcript"), decide);
  $("#transcript").dataset.taskId = taskId;
  try {
    for await (const event of follow(taskId, controller.signal)) transcript.handle(event);
  } catch (error) {
    if (!controller.signal.aborted) showError(error);
  }
}

async function submit(event) {
  event.preventDefault();
  const body = { input: $("#task-input").value };
  const session = $("#task-session").value.trim();
  if (session) body.session_id = session;
  try {
    const task = await api("/v1/tasks", { method: "POST", body });
    $("#task-input").value = "";
    await refreshTasks();
    open(task.id);
  } catch (error) {
    showError(error);
  }
}

function every(ms, refresh) {
  const run = () => refresh().then(() => showError(null), showError);
  run();
  state.timers.push(setInterval(run, ms));
}

function signIn(key) {
  credentials.set(key);
  $("#sign-in").hidden = true;
  $("#signed-in").hidden = false;
  $("#app").hidden = false;
  every(TASKS_EVERY_MS, refreshTasks);
  every(SYSTEM_EVERY_MS, refreshSystem);
  every(SCHEDULES_EVERY_MS, refreshSchedules);
}

function signOut() {
  credentials.clear();
  state.timers.forEach(clearInterval);
  state.timers = [];
  state.following?.controller.abort();
  $("#sign-in").hidden = false;
  $("#signed-in").hidden = true;
  $("#app").hidden = true;
}

$("#sign-in").addEventListener("submit", (event) => {
  event.preventDefault();
  signIn($("#api-key").value.trim());
});
$("#sign-out").addEventListener("click", signOut);
$("#new-task").addEventListener("submit", submit);
$("#all-sessions").addEventListener("click", () => pickSession(null));
if (credentials.key) signIn(credentials.key);
