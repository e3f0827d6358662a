"""The integration settings plus a schedule firing every second (``it.noop_steps``
with one step, every missed tick caught up): the real-worker schedule tests and
the chaos campaign's schedules mode.

With ``WEFT_IT_SCHEDULES=policies`` the schedules are those of the catch-up and
overlap test instead (tests/integration/test_schedule_policies.py): one per
policy, every second (the ``skip`` one every 5 s), the overlap ones firing
``it.lingers``, a run that lasts longer than the interval.
"""

import os

from tests.integration.settings import *  # noqa: F403
from tests.integration.settings import WEFT

EVERY_SECOND = "* * * * * *"
ONE_STEP = {"workflow": "it.noop_steps", "cron": EVERY_SECOND, "kwargs": {"n": 1}}
LINGERS = {"workflow": "it.lingers", "cron": EVERY_SECOND, "kwargs": {"seconds": 2.5}}
POLICIES = {
    "po-skip": {**ONE_STEP, "cron": "*/5 * * * * *", "catch_up": "skip"},
    "po-latest": {**ONE_STEP, "catch_up": "latest"},
    "po-all": {**ONE_STEP, "catch_up": "all"},
    "po-all-2": {**ONE_STEP, "catch_up": "all", "max_catch_up": 2},
    "po-overlap-skip": {**LINGERS, "overlap": "skip"},
    "po-overlap-queue": {**LINGERS, "overlap": "queue"},
}

WEFT = {
    **WEFT,
    "SCHEDULES": (
        POLICIES
        if os.environ.get("WEFT_IT_SCHEDULES") == "policies"
        else {"it-every-second": {**ONE_STEP, "catch_up": "all"}}
    ),
}
