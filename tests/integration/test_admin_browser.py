"""The admin in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) driven by Selenium, against a live server and a real
``weft_worker`` process on the test database.

An operator logs in, opens the overview, finds the worker's engine and the run
it holds, sends the ``decision`` signal from the run page and watches the run
complete. Screenshots go to ``WEFT_SCREENSHOT_DIR`` (default: the test's tmp
dir); docs/img/ holds two of them. Without Chromium the test is skipped with
the reason, except under CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import weft_django as weft
from tests.conftest import services_required
from tests.integration.helpers import FAST, wait_for
from weft_django.models import Claim, RunStatus, WorkflowRun

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

    # Log in, straight to the overview.
    browser.get(f"{live_server.url}/admin/login/?next=/admin/weft_django/overview/")
    browser.find_element(By.NAME, "username").send_keys("operator")
    browser.find_element(By.NAME, "password").send_keys("op-secret-1")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    browser.find_element(By.ID, "toggle-nav-sidebar").click()  # room for the tables
    row = browser.find_element(By.CSS_SELECTOR, f'tr.weft-engine[data-engine="{worker.engine_id}"]')
    assert "live" in row.find_element(By.CSS_SELECTOR, ".weft-state").text
    browser.save_screenshot(str(shots / "admin-overview.png"))

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
    if os.environ.get("WEFT_SCREENSHOT_DOCS"):  # refresh docs/img/ from a run
        docs = Path(__file__).resolve().parents[2] / "docs" / "img"
        docs.mkdir(exist_ok=True)
        for name in ("admin-overview.png", "admin-run-signal.png"):
            shutil.copy(shots / name, docs / name)
