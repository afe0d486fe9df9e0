"""The dashboard (/ui) in a real headless browser: Debian's chromium driven by Playwright,
against the local stack. A task submitted through the API appears in the page and its
transcript streams in live; a tool call is approved from the page (once approvals exist).

`TASKYARD_UPDATE_SCREENSHOT=1` writes the screenshot the README and docs/operations.md show
(docs/dashboard.png)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, expect, sync_playwright

from devstack.cli import DEMO_TASK
from devstack.stack import LocalStack
from shared.client import TaskyardClient

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


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    # A model slow enough that its answer streams for a while: the page shows it arriving.
    stack = LocalStack(sandbox_backend="docker", model_tokens_per_s=2).start()
    yield stack
    stack.stop()


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
    page: Page, client: TaskyardClient, tmp_path: Path
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
    shot = tmp_path / "dashboard.png"
    page.screenshot(path=str(shot))
    assert shot.read_bytes().startswith(b"\x89PNG")
    if os.environ.get("TASKYARD_UPDATE_SCREENSHOT"):
        SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copy(shot, SCREENSHOT)


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
