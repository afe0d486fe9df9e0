"""The dashboard (/ui) in a real headless browser: Debian's chromium driven by Playwright,
against the local stack. A task submitted through the API appears in the page and its
transcript streams in live; a tool call is approved from the page (once approvals exist); the
layout fits a laptop screen and a phone, with a page full of long ids and inputs.

`TASKYARD_UPDATE_SCREENSHOT=1` writes the screenshot the README and docs/operations.md show
(docs/dashboard.png) from the laptop-sized one."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from e2e_support import configure_model, wait_status
from playwright.sync_api import BrowserContext, Page, ViewportSize, expect, sync_playwright

from devstack.cli import DEMO_TASK
from devstack.procs import free_port
from devstack.stack import LocalStack, StackPorts
from taskyard.client import TaskyardClient

pytestmark = pytest.mark.e2e

CHROMIUM = "/usr/bin/chromium"  # Debian's package; Playwright's own download is not reachable
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "dashboard.png"
APPROVALS_ROUTE = "/v1/tasks/{task_id}/approvals/{call_id}"
# The agent of a task whose code waits for a person's approval (issue 9's approval policy).
APPROVAL_AGENT = {"approval": {"tools": ["IPythonInterpreter"]}}
WAIT_MS = 30_000
STREAMING_TOKENS_PER_S = 2  # the model's pace: slow enough that the page shows it arriving
LAPTOP = ViewportSize(width=1280, height=800)
PHONE = ViewportSize(width=390, height=844)
LEDGER_SESSION = "acme-support.eu-west-1:ticket-2026-12-02-000417-nightly-ledger-export-checksum"
CAPACITY_SESSION = "capacity-planning.q1-2027:gpu-fleet-replica-headroom-forecast-inference-tier"
# A question whose tool call holds a long unbroken line and whose output is one long word.
LEDGER_TASK = (
    "The nightly ledger export for eu-west-1 wrote a checksum that no longer matches what the "
    "downstream loader computes, and the loader now rejects every partition. Recompute it from "
    "the object's key and print the digest three times so the on-call engineer can compare it "
    "against the manifest:\n```python\nimport hashlib\n"
    'key = "s3://acme-ledger-exports-eu-west-1/nightly/2026/12/02/customer-ledger-part-00017-of'
    '-00064.parquet?versionId=3HL4kqtJlcpXyQaa9dAyvPLK1q0uOqXw"\n'
    "print(hashlib.sha256(key.encode()).hexdigest() * 3)\n```"
)
BUSY_TASKS = [
    (LEDGER_TASK, LEDGER_SESSION),
    (DEMO_TASK, LEDGER_SESSION),
    (
        "Before the quarterly capacity review, tell me how many distinct 128-bit request ids "
        "the gateway can hand out before one repeats, i.e. what is 2 ** 128?",
        CAPACITY_SESSION,
    ),
    (DEMO_TASK, None),
]
# In the page: every problem of layout, as sentences naming the element. A panel is the header
# or a section of main. Each rendered element must lie inside its panel, or inside the area the
# nearest scroll container (overflow auto/scroll) scrolls through on that axis, and its content
# must not spill out of it unless clipped; panels stay inside the window and apart; the page has
# no horizontal scroll.
LAYOUT_PROBLEMS = """() => {
  const problems = [];
  const SLACK = 1;  // sub-pixel rounding
  const show = (b) => `[x ${Math.round(b.left)}..${Math.round(b.right)},`
    + ` y ${Math.round(b.top)}..${Math.round(b.bottom)}]`;
  const name = (el) => el.tagName.toLowerCase() + (el.id ? `#${el.id}` : "")
    + [...el.classList].map((c) => `.${c}`).join("");
  const scrolls = (value) => value === "auto" || value === "scroll";
  const area = (el, axis) => {
    const r = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    if (axis === "x" && scrolls(style.overflowX)) {
      const left = r.left + el.clientLeft - el.scrollLeft;
      return [left, left + el.scrollWidth];
    }
    if (axis === "y" && scrolls(style.overflowY)) {
      const top = r.top + el.clientTop - el.scrollTop;
      return [top, top + el.scrollHeight];
    }
    return axis === "x" ? [r.left, r.right] : [r.top, r.bottom];
  };
  const holder = (el, panel, axis) => {
    const key = axis === "x" ? "overflowX" : "overflowY";
    for (let up = el.parentElement; up && up !== panel; up = up.parentElement) {
      if (scrolls(getComputedStyle(up)[key])) return up;
    }
    return panel;
  };
  const rendered = (el) => el.getClientRects().length > 0;
  const panels = [...document.querySelectorAll("body > header, body > #error, main > section")]
    .filter(rendered);
  for (const panel of panels) {
    const p = panel.getBoundingClientRect();
    if (p.left < -SLACK || p.right > innerWidth + SLACK) {
      problems.push(`${name(panel)} ${show(p)} is outside the window (width ${innerWidth})`);
    }
    for (const el of panel.querySelectorAll("*")) {
      if (!rendered(el)) continue;
      const b = el.getBoundingClientRect();
      for (const axis of ["x", "y"]) {
        const within = holder(el, panel, axis);
        const [low, high] = area(within, axis);
        const [start, end] = axis === "x" ? [b.left, b.right] : [b.top, b.bottom];
        if (start < low - SLACK || end > high + SLACK) {
          problems.push(`${name(el)} ${show(b)} overflows ${name(within)}`
            + ` ${show(within.getBoundingClientRect())} on ${axis} (panel ${name(panel)})`);
        }
      }
      const style = getComputedStyle(el);
      if (style.overflowX === "visible" && el.clientWidth > 0
          && el.scrollWidth > el.clientWidth + SLACK) {
        problems.push(`${name(el)} ${show(b)}: its content is ${el.scrollWidth}px wide, `
          + `it is ${el.clientWidth}px (panel ${name(panel)})`);
      }
    }
  }
  panels.forEach((one, i) => panels.slice(i + 1).forEach((two) => {
    const a = one.getBoundingClientRect(), b = two.getBoundingClientRect();
    const wide = Math.min(a.right, b.right) - Math.max(a.left, b.left);
    const high = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    if (wide > SLACK && high > SLACK) {
      problems.push(`${name(one)} ${show(a)} overlaps ${name(two)} ${show(b)}`);
    }
  }));
  const page = document.documentElement.scrollWidth;
  if (page > innerWidth) {
    problems.push(`the page scrolls sideways: ${page}px wide in a ${innerWidth}px window`);
  }
  return problems;
}"""


def _replicas(model_port: int) -> str:
    """Four replicas as an operator would see them: two serving any model, one named, and one
    named whose server is not running (it shows as down; nothing asks for its model)."""
    scripted = f"http://127.0.0.1:{model_port}/v1"
    return ",".join([
        scripted, scripted,
        f"Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4={scripted}",
        f"meta-llama/Llama-3.1-405B-Instruct-FP8=http://127.0.0.1:{free_port()}/v1",
    ])  # fmt: skip


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    # A model slow enough that its answer streams for a while: the page shows it arriving.
    ports = StackPorts()
    stack = LocalStack(
        ports=ports, sandbox_backend="docker", model_tokens_per_s=STREAMING_TOKENS_PER_S,
        extra_env={"TASKYARD_PROXY_UPSTREAMS": _replicas(ports.model)},
    ).start()  # fmt: skip
    yield stack
    stack.stop()


@pytest.fixture(scope="module")
def busy_tasks(stack: LocalStack) -> list[str]:
    """Tasks with long inputs in sessions with long ids, ended; the first one's transcript has a
    tool call with a long line and a long output. The model answers them at full speed: the
    layout tests look at them ended, not streaming."""
    with _full_speed(stack), TaskyardClient(stack.gateway_url, stack.api_key) as client:
        ids = [client.submit(text, session_id=session)["id"] for text, session in BUSY_TASKS]
        for task_id in ids:
            wait_status(client, task_id)
    return ids


@contextlib.contextmanager
def _full_speed(stack: LocalStack) -> Iterator[None]:
    """The model answers as fast as it can meanwhile, then at the streaming pace again."""
    configure_model(stack, tokens_per_s=0)
    try:
        yield
    finally:
        configure_model(stack, tokens_per_s=STREAMING_TOKENS_PER_S)


@pytest.fixture(scope="module")
def busy_schedule(stack: LocalStack) -> dict:
    """A schedule with a long name, input and session (it never fires during the tests)."""
    with TaskyardClient(stack.gateway_url, stack.api_key) as client:
        return client.create_schedule(
            "0 9 * * 1-5", LEDGER_TASK, session_id=LEDGER_SESSION, name=CAPACITY_SESSION
        )


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh user-data-dir
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1440, "height": 900},
        )  # fmt: skip
        yield context
        context.close()


@pytest.fixture
def page(browser: BrowserContext, stack: LocalStack) -> Iterator[Page]:
    page = browser.new_page()
    page.goto(f"{stack.gateway_url}/ui/")
    page.fill("#api-key", stack.api_key)
    page.click("#sign-in button")
    expect(page.locator("#app")).to_be_visible()
    yield page
    page.close()


def _open(page: Page, task_id: str) -> None:
    row = page.locator(f'#tasks tr[data-task-id="{task_id}"]')
    row.wait_for(timeout=WAIT_MS)  # the list refreshes by itself
    row.click()


def test_a_task_submitted_through_the_api_streams_into_the_page(
    page: Page, client: TaskyardClient
) -> None:
    task_id = client.submit(DEMO_TASK, session_id="dashboard")["id"]
    _open(page, task_id)
    transcript = page.locator("#transcript")
    # Live: the model's answer is in the page token by token while the task still runs.
    page.wait_for_function(
        "() => { const t = document.querySelector('#transcript');"
        " const s = t.querySelector('.msg.streaming .text');"
        " return s && s.textContent.length > 0 && !t.dataset.final; }",
        timeout=WAIT_MS,
    )
    expect(transcript).to_have_attribute("data-final", "succeeded", timeout=WAIT_MS)
    expect(transcript.locator(".msg.user")).to_contain_text(DEMO_TASK)
    expect(transcript.locator(".msg.tool-call pre")).to_contain_text("math.sqrt(2)")
    expect(transcript.locator(".msg.tool-output pre")).to_have_text("1.414213562373")
    answer = transcript.locator(".msg.assistant").last
    expect(answer).to_contain_text("1.414213562373")
    expect(transcript.locator(".msg.streaming")).to_have_count(0)
    row = page.locator(f'#tasks tr[data-task-id="{task_id}"]')
    expect(row.locator(".badge")).to_have_text("succeeded", timeout=WAIT_MS)
    expect(page.locator("#sessions li[data-session='dashboard']")).to_be_visible()
    expect(page.locator("#queues")).to_contain_text("tools.IPythonInterpreter")
    expect(page.locator("#workers")).to_contain_text("agent@")
    expect(page.locator("#workers")).to_contain_text("tools@")
    expect(page.locator("#replicas")).to_contain_text("healthy")


def test_the_tenants_schedules_are_listed(page: Page, client: TaskyardClient) -> None:
    made = client.create_schedule("*/30 * * * *", "Summarise the night's alerts", name="alerts")
    row = page.locator(f'#schedules tr[data-schedule-id="{made["id"]}"]')
    expect(row).to_be_visible(timeout=WAIT_MS)  # the list refreshes by itself
    expect(row.locator(".cron")).to_have_text("*/30 * * * *")
    expect(row.locator(".cron")).to_have_attribute("title", "alerts: */30 * * * * (UTC)")
    expect(row.locator(".input")).to_have_text(
        "Summarise the night's alerts (a fresh session each run)"
    )
    expect(row.locator(".next")).to_contain_text("in ")
    client.delete_schedule(made["id"])
    expect(row).to_have_count(0, timeout=WAIT_MS)


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_nothing_overflows_or_overlaps_on_a_laptop_or_a_phone(
    page: Page, busy_tasks: list[str], busy_schedule: dict, viewport: ViewportSize, tmp_path: Path
) -> None:
    page.set_viewport_size(viewport)
    _open(page, busy_tasks[0])
    transcript = page.locator("#transcript")
    expect(transcript).to_have_attribute("data-final", "succeeded", timeout=WAIT_MS)
    expect(transcript.locator(".msg.tool-call pre")).to_contain_text("versionId=")
    for task_id in busy_tasks:
        badge = page.locator(f'#tasks tr[data-task-id="{task_id}"] .badge')
        expect(badge).to_have_text("succeeded", timeout=WAIT_MS)
    expect(page.locator(f'#sessions li[data-session="{CAPACITY_SESSION}"]')).to_be_attached()
    expect(
        page.locator(f'#schedules tr[data-schedule-id="{busy_schedule["id"]}"]')
    ).to_be_attached()
    expect(page.locator("#queues tbody tr")).not_to_have_count(0)
    replicas = page.locator("#replicas tbody tr")
    expect(replicas).to_have_count(4, timeout=WAIT_MS)
    expect(replicas.locator(".down")).to_have_count(1, timeout=WAIT_MS)
    shot = tmp_path / f"dashboard-{viewport['width']}x{viewport['height']}.png"
    page.screenshot(path=str(shot))
    page.screenshot(path=str(shot.with_suffix(".full.png")), full_page=True)  # to look at
    problems = page.evaluate(LAYOUT_PROBLEMS)
    assert not problems, f"{len(problems)} layout problems at {viewport} (see {shot}):\n" + (
        "\n".join(problems[:25])
    )
    if viewport == LAPTOP and os.environ.get("TASKYARD_UPDATE_SCREENSHOT"):
        SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copy(shot.with_suffix(".full.png"), SCREENSHOT)  # the whole page, laptop-wide


def test_the_key_stays_in_the_tab_and_a_wrong_one_is_refused(
    browser: BrowserContext, stack: LocalStack
) -> None:
    page = browser.new_page()
    page.goto(f"{stack.gateway_url}/ui/")
    page.fill("#api-key", "not-a-key")
    page.click("#sign-in button")
    expect(page.locator("#error")).to_contain_text("missing or invalid API key")
    expect(page.locator("#sign-in")).to_be_visible()
    assert page.evaluate("() => [localStorage.length, document.cookie]") == [0, ""]
    page.close()


def test_a_call_is_approved_from_the_page(
    page: Page, client: TaskyardClient, stack: LocalStack
) -> None:
    paths = httpx.get(f"{stack.gateway_url}/openapi.json").json()["paths"]
    if APPROVALS_ROUTE not in paths:
        pytest.skip(
            f"the gateway has no approvals route (POST {APPROVALS_ROUTE}) in this tree; "
            "issue 9 adds it, and this test runs once it lands"
        )
    with _full_speed(stack):  # the page is not watched streaming here
        task_id = client.submit(DEMO_TASK, agent=APPROVAL_AGENT)["id"]
        _open(page, task_id)
        approval = page.locator("#transcript .msg.approval")
        expect(approval.locator("pre")).to_contain_text("math.sqrt(2)", timeout=WAIT_MS)
        expect(page.locator("#transcript")).to_have_attribute("data-status", "waiting_approval")
        approval.locator("button.approve").click()
        expect(approval.locator(".decided")).to_have_text("approved")
        transcript = page.locator("#transcript")
        expect(transcript).to_have_attribute("data-final", "succeeded", timeout=WAIT_MS)
        expect(transcript.locator(".msg.tool-output pre")).to_have_text("1.414213562373")


def test_a_session_is_forked_from_the_page(
    page: Page, client: TaskyardClient, stack: LocalStack
) -> None:
    with _full_speed(stack):  # the page is not watched streaming here
        source = "fork-from-the-page"
        talk = {"system_prompt": "Count the messages.", "tools": []}  # no interpreter to copy
        wait_status(client, client.submit("What is 2 + 2?", session_id=source, agent=talk)["id"])
        item = page.locator(f'#sessions li[data-session="{source}"]')
        item.locator("button.fork").click()  # the list refreshes by itself: it waits for it
        notice = page.locator("#notice")
        expect(notice).to_contain_text(f"Forked {source} into ", timeout=WAIT_MS)
        expect(notice).to_contain_text("(no running interpreter to copy)")
        forked = notice.get_attribute("data-session")
        assert forked and client.session(forked)["forked_from"] == source
        expect(page.locator("#task-session")).to_have_value(forked)
        page.fill("#task-input", "```python\nprint(6 * 7)\n```")
        page.click("#new-task button")  # the next task runs in the fork
        transcript = page.locator("#transcript")
        expect(transcript).to_have_attribute("data-final", "succeeded", timeout=WAIT_MS)
        expect(transcript.locator(".msg.tool-output pre")).to_have_text("42")
