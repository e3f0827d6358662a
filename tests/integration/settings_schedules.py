"""The integration settings plus a schedule firing every second (``it.noop_steps``
with one step, every missed tick caught up): the real-worker schedule tests and
the chaos campaign's schedules mode."""

from tests.integration.settings import *  # noqa: F403
from tests.integration.settings import WEFT

WEFT = {
    **WEFT,
    "SCHEDULES": {
        "it-every-second": {
            "workflow": "it.noop_steps",
            "cron": "* * * * * *",
            "kwargs": {"n": 1},
            "catch_up": "all",
        }
    },
}
