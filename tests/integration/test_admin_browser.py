"""The admin in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) driven by Selenium, against a live server and a real
``weft_worker`` process on the test database.

An operator logs in, opens the overview, finds the worker's engine and the run
it holds, sends the ``decision`` signal from the run page and watches the run
complete; then cancels a held run from its run page and another from the run
list, each through the cancel confirmation page with a reason, and finds both
in the admin's "Recent actions". On the way it opens a run with a takeover
in its history and checks the timeline picture draws the owner bands and the
step bars, and that the overview draws the last hour's charts. Screenshots go
to ``WEFT_SCREENSHOT_DIR`` (default: the test's tmp dir); with
``WEFT_SCREENSHOT_DOCS=1`` two of them (the overview and the run's timeline
picture) are copied to docs/img/. Without Chromium the test is skipped with
the reason, except under CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import weft_django as weft
from tests.conftest import services_required
from tests.integration.helpers import FAST, wait_for
from weft_django.models import Claim, RunStatus, WorkflowEvent, WorkflowRun

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CHROMIUM = os.environ.get("WEFT_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("WEFT_CHROMEDRIVER", "/usr/bin/chromedriver")


def browser_problem() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.exists(path) and os.access(path, os.X_OK)):
            return f"{path} is missing (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


@pytest.fixture
def browser() -> Iterator[Any]:
    from django.db import connection

    if connection.vendor != "sqlite":
        # The pages and their queries are tested on every database by
        # tests/test_admin_console.py; the browser adds the UI, the same on each.
        pytest.skip("the browser test runs in the SQLite passes")
    problem = browser_problem()
    if problem is not None:
        if services_required():
            pytest.fail(f"{problem}; CI must run the browser test")
        pytest.skip(f"needs headless Chromium: {problem}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1000",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(5)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    directory = Path(os.environ.get("WEFT_SCREENSHOT_DIR") or tmp_path / "screenshots")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def test_operator_signals_a_held_run_from_the_admin(
    browser: Any,
    live_server: Any,
    workers: Any,
    shots: Path,
    django_user_model: Any,
    weft_settings: Any,
) -> None:
    from selenium.webdriver.common.by import By

    # The live server judges leases with the workers' timings.
    weft_settings(
        CLAIM_TTL=float(FAST["WEFT_CLAIM_TTL"]),
        CLAIM_RENEW_INTERVAL=float(FAST["WEFT_CLAIM_RENEW_INTERVAL"]),
    )
    worker = workers.start("worker")
    django_user_model.objects.create_superuser("operator", "op@example.com", "op-secret-1")
    run_id = "browser-order-1"
    weft.start("orders.approve_order", 77, workflow_id=run_id)

    def held() -> bool:
        run = WorkflowRun.objects.get(pk=run_id)
        claim = Claim.objects.filter(pk=run_id, holder_id=worker.engine_id).first()
        return run.status == RunStatus.WAITING and claim is not None

    wait_for(held, 60, what=f"{run_id} to wait for its decision", on_timeout=workers.tails)

    takeover_run = fabricate_history(worker.engine_id)

    # Log in, straight to the overview.
    browser.get(f"{live_server.url}/admin/login/?next=/admin/weft_django/overview/")
    browser.find_element(By.NAME, "username").send_keys("operator")
    browser.find_element(By.NAME, "password").send_keys("op-secret-1")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    browser.find_element(By.ID, "toggle-nav-sidebar").click()  # room for the tables
    row = browser.find_element(By.CSS_SELECTOR, f'tr.weft-engine[data-engine="{worker.engine_id}"]')
    assert "live" in row.find_element(By.CSS_SELECTOR, ".weft-state").text
    # The last hour in charts: a column per minute, the fabricated runs counted.
    started = browser.find_element(By.ID, "weft-chart-started")
    drawn = [
        float(c.get_attribute("data-value"))
        for c in started.find_elements(By.CSS_SELECTOR, "rect.weft-column")
    ]
    assert len(drawn) == 60 and sum(drawn) >= 30
    assert browser.find_elements(By.CSS_SELECTOR, "#weft-chart-failed rect.weft-column")
    browser.save_screenshot(str(shots / "admin-overview.png"))
    check_the_timeline_picture(browser, live_server, takeover_run, worker.engine_id, shots)
    browser.get(f"{live_server.url}/admin/weft_django/overview/")
    row = browser.find_element(By.CSS_SELECTOR, f'tr.weft-engine[data-engine="{worker.engine_id}"]')

    # The worker's engine page lists the run it holds.
    row.find_element(By.LINK_TEXT, worker.engine_id).click()
    held_runs = [
        link.text for link in browser.find_elements(By.CSS_SELECTOR, "tr.weft-held-claim a")
    ]
    assert run_id in held_runs
    browser.find_element(By.LINK_TEXT, run_id).click()
    owner = browser.find_element(By.CSS_SELECTOR, "#weft-owner .weft-owner-engine").text
    assert owner.startswith(worker.engine_id)

    # Send the decision from the run page.
    browser.find_element(By.ID, "id_name").send_keys("decision")
    browser.find_element(By.ID, "id_payload").send_keys('{"status": "approved"}')
    browser.save_screenshot(str(shots / "admin-run-signal.png"))
    browser.find_element(By.NAME, "_send_signal").click()
    assert "Signal decision sent" in browser.find_element(By.CSS_SELECTOR, ".messagelist").text

    wait_for(
        lambda: WorkflowRun.objects.get(pk=run_id).status == RunStatus.COMPLETED,
        60,
        what=f"{run_id} to complete",
        on_timeout=workers.tails,
    )
    browser.refresh()
    status = browser.find_element(By.CSS_SELECTOR, "#weft-owner .weft-run-status").text
    assert status == "completed"
    timeline = browser.find_element(By.ID, "weft-timeline")
    assert "signal decision received" in timeline.text
    browser.execute_script("arguments[0].scrollIntoView();", timeline)
    browser.save_screenshot(str(shots / "admin-run-completed.png"))
    assert weft.result(run_id, timeout=0)["status"] == "approved"
    # A completed run offers no operation on itself, only a fork (a new run).
    assert not browser.find_elements(By.CSS_SELECTOR, "#weft-operate .weft-no-operations")
    assert browser.find_elements(By.CSS_SELECTOR, "#weft-recover a.weft-fork")
    assert not browser.find_elements(By.CSS_SELECTOR, "#weft-recover a.weft-retry")
    assert not browser.find_elements(By.ID, "weft-signal-form")
    assert not browser.find_elements(By.CSS_SELECTOR, ".weft-cancel, .weft-suspend")

    cancel_through_the_confirmation_pages(browser, live_server, workers, worker, shots)
    if os.environ.get("WEFT_SCREENSHOT_DOCS"):  # refresh docs/img/ from a run
        docs = Path(__file__).resolve().parents[2] / "docs" / "img"
        docs.mkdir(exist_ok=True)
        for name in ("admin-overview.png", "admin-run-timeline.png"):
            shutil.copy(shots / name, docs / name)


def cancel_through_the_confirmation_pages(
    browser: Any, live_server: Any, workers: Any, worker: Any, shots: Path
) -> None:
    from django.contrib.admin.models import LogEntry
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    single, batch = "browser-order-2", "browser-order-3"
    for run_id in (single, batch):
        weft.start("orders.approve_order", 78, workflow_id=run_id)

    def both_held() -> bool:
        return (
            Claim.objects.filter(pk__in=[single, batch], holder_id=worker.engine_id).count() == 2
            and WorkflowRun.objects.filter(pk__in=[single, batch], status=RunStatus.WAITING).count()
            == 2
        )

    wait_for(both_held, 60, what="two more runs to wait", on_timeout=workers.tails)

    # From the run page: the cancel button opens the confirmation page.
    browser.get(f"{live_server.url}/admin/weft_django/workflowrun/{single}/change/")
    browser.find_element(By.CSS_SELECTOR, "#weft-operate .weft-cancel").click()
    assert "weft-cancel-confirmation" in browser.find_element(By.TAG_NAME, "body").get_attribute(
        "class"
    )
    listed = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "tr.weft-cancel-run td")]
    assert listed[0] == single
    assert WorkflowRun.objects.get(pk=single).status == RunStatus.WAITING  # nothing yet
    browser.find_element(By.ID, "id_reason").send_keys("customer called")
    browser.save_screenshot(str(shots / "admin-cancel-confirmation.png"))
    browser.find_element(By.CSS_SELECTOR, "#weft-cancel-form .weft-confirm").click()
    assert (
        f"Cancelled 1 run(s): {single}"
        in browser.find_element(By.CSS_SELECTOR, ".messagelist").text
    )
    status = browser.find_element(By.CSS_SELECTOR, "#weft-owner .weft-run-status").text
    assert status == "cancelled"
    error = WorkflowRun.objects.get(pk=single).error
    assert error["message"] == "cancelled by operator: customer called"

    # From the run list: the action, then the same page.
    browser.get(f"{live_server.url}/admin/weft_django/workflowrun/?q={batch}")
    browser.find_element(By.CSS_SELECTOR, f'input.action-select[value="{batch}"]').click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("cancel_runs")
    browser.find_element(By.NAME, "index").click()
    assert browser.find_elements(By.CSS_SELECTOR, "body.weft-cancel-confirmation")
    assert WorkflowRun.objects.get(pk=batch).status == RunStatus.WAITING
    browser.find_element(By.ID, "id_reason").send_keys("stale")
    browser.find_element(By.CSS_SELECTOR, "#weft-cancel-form .weft-confirm").click()
    assert (
        f"Cancelled 1 run(s): {batch}" in browser.find_element(By.CSS_SELECTOR, ".messagelist").text
    )
    assert WorkflowRun.objects.get(pk=batch).status == RunStatus.CANCELLED

    # The audit trail: the operator's LogEntry rows, shown under "Recent actions".
    entries = LogEntry.objects.order_by("pk").values_list(
        "user__username", "object_id", "change_message"
    )
    assert list(entries) == [
        ("operator", "browser-order-1", entries[0][2]),  # the signal sent above
        ("operator", single, "Cancelled. Reason: customer called"),
        ("operator", batch, "Cancelled. Reason: stale"),
    ]
    assert entries[0][2].startswith("Signalled with 'decision'")
    browser.get(f"{live_server.url}/admin/")
    recent = browser.find_element(By.ID, "recent-actions-module").text
    assert f"orders.approve_order:{single}" in recent and f"orders.approve_order:{batch}" in recent


def fabricate_history(engine_id: str) -> str:
    """Forty runs over the last hour (a few failed) and one order whose history
    shows a takeover: the worker's engine reserves, charges and waits for the
    decision; another engine (epoch 2) takes over, ships, fails to notify after
    3 attempts and falls back. Written directly (no worker runs them)."""
    from django.utils import timezone

    now = timezone.now()
    for n in range(40):
        began = now - timedelta(minutes=58 - n * 1.4, seconds=n % 7)
        status = RunStatus.FAILED if n % 9 == 4 else RunStatus.COMPLETED
        WorkflowRun.objects.create(
            id=f"browser-past-{n:02d}",
            workflow_name="orders.approve_order",
            status=status,
            created_at=began,
            started_at=began,
            finished_at=began + timedelta(seconds=20 + n % 5),
            error={"type": "ValueError", "message": "card declined"}
            if status == RunStatus.FAILED
            else None,
        )
    run = WorkflowRun.objects.create(
        id="browser-takeover",
        workflow_name="orders.approve_order",
        status=RunStatus.COMPLETED,
        created_at=now - timedelta(minutes=3),
        finished_at=now - timedelta(seconds=20),
        result={"status": "shipped"},
    )
    other = "host-b-4242-5f0c1a2e"
    history = [
        (0.0, "step", "orders.reserve_stock", engine_id, 1, None),
        (1.6, "step", "orders.charge_card", engine_id, 1, None),
        (2.0, "wait", "signal:decision", engine_id, 1, None),
        (64.0, "signal", "decision", other, 2, None),
        (66.5, "step", "orders.ship", other, 2, None),
        (74.0, "step", "orders.notify", other, 2, {"type": "SMTPError", "attempts": 3}),
        (75.2, "step", "orders.notify_fallback", other, 2, None),
    ]
    began = now - timedelta(minutes=3)
    WorkflowEvent.objects.bulk_create(
        WorkflowEvent(
            run=run,
            seq=seq,
            kind=kind,
            name=name,
            result={"deadline": None} if kind == "wait" else {"ok": True},
            error=error,
            engine_id=engine,
            epoch=epoch,
            created_at=began + timedelta(seconds=offset),
        )
        for seq, (offset, kind, name, engine, epoch, error) in enumerate(history, start=1)
    )
    return run.pk


def check_the_timeline_picture(
    browser: Any, live_server: Any, run_id: str, first_engine: str, shots: Path
) -> None:
    """The run page draws a band per owner (the takeover marked) and a bar per
    step, each bar's width following its duration."""
    from selenium.webdriver.common.by import By

    browser.get(f"{live_server.url}/admin/weft_django/workflowrun/{run_id}/change/")
    picture = browser.find_element(By.ID, "weft-timeline-picture")
    bands = picture.find_elements(By.CSS_SELECTOR, "g.weft-band")
    assert [b.get_attribute("data-engine") for b in bands] == [first_engine, "host-b-4242-5f0c1a2e"]
    assert [b.get_attribute("data-epoch") for b in bands] == ["1", "2"]
    assert "weft-band-changed" in bands[1].get_attribute("class")
    assert picture.find_elements(By.CSS_SELECTOR, "line.weft-takeover")
    widths = [
        band.find_element(By.CSS_SELECTOR, "rect.weft-band-head").size["width"] for band in bands
    ]
    assert widths[0] > widths[1] > 0  # 64 s before the takeover, 11 s after
    bars = picture.find_elements(By.CSS_SELECTOR, "g.weft-bar")
    assert len(bars) == 5 and len(picture.find_elements(By.CSS_SELECTOR, "g.weft-bar-failed")) == 1
    drawn = {
        bar.get_attribute("data-seq"): bar.find_element(By.TAG_NAME, "rect").size["width"]
        for bar in bars
    }
    assert drawn["6"] > drawn["5"] > drawn["2"] > 0  # 7.5 s, 2.5 s, 1.6 s
    (gap,) = picture.find_elements(By.CSS_SELECTOR, "g.weft-gap")
    assert "waits on signal decision" in gap.text
    heading = browser.find_element(By.ID, "weft-timeline")
    browser.execute_script("arguments[0].scrollIntoView();", heading)
    picture.screenshot(str(shots / "admin-run-timeline-picture.png"))
    browser.save_screenshot(str(shots / "admin-run-timeline.png"))
    # The admin's dark theme restyles the picture (its colours are the admin's variables).
    fill = "return getComputedStyle(arguments[0]).fill;"
    band = bands[0].find_element(By.CSS_SELECTOR, "rect.weft-band-column")
    light = browser.execute_script(fill, band)
    browser.execute_script("document.documentElement.dataset.theme = 'dark';")
    assert browser.execute_script(fill, band) != light
    picture.screenshot(str(shots / "admin-run-timeline-picture-dark.png"))
    browser.execute_script("document.documentElement.dataset.theme = 'light';")
