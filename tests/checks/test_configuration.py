"""System checks: every problem with ``settings.WEFT`` is a ``weft.E00x`` error with a hint."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from datetime import timedelta
from importlib.util import find_spec
from typing import Any

import pytest
from django.core import checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

CONF_IDS = {f"weft.E00{n}" for n in range(1, 9)}
DURATION_KEYS = (
    "CLAIM_TTL",
    "CLAIM_RENEW_INTERVAL",
    "LEASE_TTL",
    "LEASE_RENEW_INTERVAL",
    "TICK_INTERVAL",
    "UPDATE_RESPONSE_TTL",
)
BAD_DURATIONS = [
    0,
    0.0,
    -1,
    -0.5,
    "30",
    None,
    [30],
    math.nan,
    math.inf,
    -math.inf,
    True,
    False,
    timedelta(0),
    timedelta(seconds=-5),
    10**400,
    1e300,
    timedelta(days=999_999_999),
]


def weft_errors(**kwargs: Any) -> list[checks.CheckMessage]:
    return [m for m in checks.run_checks(tags=["weft"], **kwargs) if m.id in CONF_IDS]


def ids(messages: list[checks.CheckMessage]) -> list[str]:
    return sorted(m.id for m in messages)


@pytest.fixture
def weft(settings: Any) -> Any:
    """Set ``settings.WEFT`` to exactly the given dict (or any other value)."""

    def apply(value: Any) -> None:
        settings.WEFT = value

    return apply


def test_weft_is_a_registered_check_tag() -> None:
    assert checks.tag_exists("weft")


def test_example_settings_are_valid() -> None:
    assert weft_errors() == []


def test_absent_or_empty_settings_are_valid(settings: Any, weft: Any) -> None:
    weft({})
    assert weft_errors() == []
    del settings.WEFT
    assert weft_errors() == []


def test_timedeltas_and_ints_are_accepted(weft: Any) -> None:
    weft(
        {
            "CLAIM_TTL": timedelta(minutes=1),
            "CLAIM_RENEW_INTERVAL": timedelta(seconds=10),
            "LEASE_TTL": 60,
            "LEASE_RENEW_INTERVAL": 20,  # exactly TTL / 3: allowed
            "TICK_INTERVAL": timedelta(milliseconds=100),
            "UPDATE_RESPONSE_TTL": 600,
            "MAX_PAYLOAD_BYTES": 1024,
            "NOTIFY": False,
            "OWNERSHIP": "lease",
        }
    )
    assert weft_errors() == []


@pytest.mark.parametrize("value", ["workflow-lease", ["OWNERSHIP"], 42, ("a", 1)])
def test_e001_not_a_dict(weft: Any, value: Any) -> None:
    weft(value)
    errors = weft_errors()
    assert ids(errors) == ["weft.E001"]
    assert "must be a dict" in errors[0].msg


@pytest.mark.parametrize(
    "value", [{"CLAIM_TTLL": 30}, {"claim_ttl": 30}, {1: 2}, {"OWNERSHIP": "lease", "X": 1}]
)
def test_e002_unknown_keys(weft: Any, value: dict[Any, Any]) -> None:
    weft(value)
    errors = weft_errors()
    assert ids(errors) == ["weft.E002"]
    for key in value:
        if key != "OWNERSHIP":
            assert str(key) in errors[0].msg
    assert "CLAIM_RENEW_INTERVAL" in errors[0].hint  # lists the valid keys


@pytest.mark.parametrize("mode", ["workflow_lease", "LEASE", "", None, ["lease"], 1])
def test_e003_unknown_mode(weft: Any, mode: Any) -> None:
    weft({"OWNERSHIP": mode})
    errors = weft_errors()
    assert ids(errors) == ["weft.E003"]
    assert "'workflow-lease'" in errors[0].hint and "'none'" in errors[0].hint


@pytest.mark.parametrize("key", DURATION_KEYS)
@pytest.mark.parametrize("value", BAD_DURATIONS, ids=repr)
def test_e004_bad_durations(weft: Any, key: str, value: Any) -> None:
    weft({key: value})
    errors = weft_errors()
    assert ids(errors) == ["weft.E004"]
    assert key in errors[0].msg
    assert key in errors[0].hint


@pytest.mark.parametrize("prefix", ["CLAIM", "LEASE"])
@pytest.mark.parametrize(("ttl", "renew"), [(5, 5), (5, 10), (timedelta(seconds=3), 3.0)])
def test_e005_renew_not_shorter_than_ttl(weft: Any, prefix: str, ttl: Any, renew: Any) -> None:
    weft({f"{prefix}_TTL": ttl, f"{prefix}_RENEW_INTERVAL": renew})
    errors = weft_errors()
    assert ids(errors) == ["weft.E005"]  # never also E006 for the same pair
    assert f"{prefix}_RENEW_INTERVAL" in errors[0].msg and f"{prefix}_TTL" in errors[0].msg
    assert errors[0].hint


@pytest.mark.parametrize("prefix", ["CLAIM", "LEASE"])
@pytest.mark.parametrize(("ttl", "renew"), [(10, 4), (11.999, 4), (6, 2.5)])
def test_e006_ttl_under_three_renewals(weft: Any, prefix: str, ttl: float, renew: float) -> None:
    weft({f"{prefix}_TTL": ttl, f"{prefix}_RENEW_INTERVAL": renew})
    errors = weft_errors()
    assert ids(errors) == ["weft.E006"]
    assert "3 x" in errors[0].msg
    assert f"{3 * renew:g}" in errors[0].hint


@pytest.mark.parametrize("prefix", ["CLAIM", "LEASE"])
def test_ttl_exactly_three_renewals_is_fine(weft: Any, prefix: str) -> None:
    weft({f"{prefix}_TTL": 12, f"{prefix}_RENEW_INTERVAL": 4})
    assert weft_errors() == []


def test_timing_pair_is_not_judged_when_a_duration_is_invalid(weft: Any) -> None:
    weft({"CLAIM_TTL": -1, "CLAIM_RENEW_INTERVAL": 5})
    assert ids(weft_errors()) == ["weft.E004"]


@pytest.mark.parametrize("size", [0, -1, 1.5, 262144.0, "262144", None, True, False])
def test_e007_bad_payload_limit(weft: Any, size: Any) -> None:
    weft({"MAX_PAYLOAD_BYTES": size})
    errors = weft_errors()
    assert ids(errors) == ["weft.E007"]
    assert "262144" in errors[0].hint


@pytest.mark.parametrize("notify", ["yes", "true", 1, 0, None])
def test_e008_notify_not_bool(weft: Any, notify: Any) -> None:
    weft({"NOTIFY": notify})
    errors = weft_errors()
    assert ids(errors) == ["weft.E008"]
    assert "NOTIFY" in errors[0].hint


def test_every_problem_is_reported_at_once(weft: Any) -> None:
    weft(
        {
            "BOGUS": 1,
            "OWNERSHIP": "maybe",
            "TICK_INTERVAL": 0,
            "CLAIM_TTL": 5,
            "CLAIM_RENEW_INTERVAL": 5,
            "LEASE_TTL": 10,
            "LEASE_RENEW_INTERVAL": 4,
            "MAX_PAYLOAD_BYTES": -1,
            "NOTIFY": "no",
        }
    )
    errors = weft_errors()
    assert ids(errors) == [f"weft.E00{n}" for n in range(2, 9)]
    for message in errors:
        assert isinstance(message, checks.Error)
        assert message.level == checks.ERROR
        assert message.hint
        assert message.is_serious()


@pytest.mark.django_db  # Django >= 6.0's model checks ask the database about JSONField
def test_manage_py_check_fails_on_invalid_settings(weft: Any) -> None:
    weft({"OWNERSHIP": "maybe"})
    with pytest.raises(SystemCheckError, match=r"weft\.E003"):
        call_command("check")


def test_manage_py_check_passes_on_valid_settings() -> None:
    call_command("check", tags=["weft"])


# -- the Celery beat schedule (weft.E011, weft.E012) ------------------------------------


def _celery_errors() -> list[checks.CheckMessage]:
    from weft_django.checks.configuration import check_celery_schedule

    return check_celery_schedule()


def test_a_weft_beat_schedule_with_celery_installed_is_fine(settings: Any) -> None:
    from weft_django.beat import beat_schedule

    settings.CELERY_BEAT_SCHEDULE = beat_schedule()
    assert _celery_errors() == []


def test_e011_without_celery(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from weft_django.beat import beat_schedule

    settings.CELERY_BEAT_SCHEDULE = beat_schedule(update_every=None)
    monkeypatch.setitem(sys.modules, "celery", None)  # import fails
    (error,) = _celery_errors()
    assert error.id == "weft.E011"
    assert "weft_django.signal_poll_pass" in error.msg and "celery is not installed" in error.msg
    assert "pip install 'weft-django[celery]'" in error.hint


@pytest.fixture
def without(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Hide modules (their import fails) and make kombu's redis transport module be
    imported afresh, as in a process where they were never installed."""
    import kombu.transport
    import kombu.transport.redis

    def hide(*modules: str) -> None:
        for module in modules:
            monkeypatch.setitem(sys.modules, module, None)
        monkeypatch.delitem(sys.modules, "kombu.transport.redis")
        # a fresh import rebinds the package attribute: put the original back after
        monkeypatch.setattr(kombu.transport, "redis", kombu.transport.redis)

    return hide


@pytest.mark.parametrize(
    ("hidden", "says"),
    [
        (["packaging", "packaging.version"], "packaging cannot be imported"),  # issue 24
        (["redis"], "redis cannot be imported"),
    ],
)
@pytest.mark.parametrize("broker", ["redis://127.0.0.1:6379/0", "rediss://h:6380/1"])
def test_e011_the_redis_transport_cannot_be_loaded(
    settings: Any, without: Callable[..., None], hidden: list[str], says: str, broker: str
) -> None:
    from weft_django.beat import beat_schedule

    settings.CELERY_BEAT_SCHEDULE = beat_schedule(update_every=None)
    settings.CELERY_BROKER_URL = broker
    assert _celery_errors() == []  # installed here: the transport loads
    without(*hidden)
    (error,) = _celery_errors()
    assert error.id == "weft.E011"
    assert "weft_django.signal_poll_pass" in error.msg
    assert "transport of CELERY_BROKER_URL" in error.msg and says in error.msg
    assert "pip install 'weft-django[celery]'" in error.hint and "celery[redis]" in error.hint


@pytest.mark.skipif(find_spec("botocore") is not None, reason="botocore is installed here")
def test_e011_a_transport_whose_library_is_not_installed(settings: Any) -> None:
    """Nothing hidden: kombu's SQS transport imports botocore, which is not installed."""
    from weft_django.beat import beat_schedule

    settings.CELERY_BEAT_SCHEDULE = beat_schedule()
    settings.CELERY_BROKER_URL = "sqs://"
    (error,) = _celery_errors()
    assert error.id == "weft.E011"
    assert "'sqs' transport" in error.msg and "botocore" in error.msg
    assert "pip install 'celery[sqs]'" in error.hint


@pytest.mark.parametrize(
    ("broker", "transport"),
    [
        (None, "amqp"),
        ("", "amqp"),
        ("redis://h:6379/0", "redis"),
        ("rediss://h", "rediss"),
        ("redis://a:6379/0;redis://b:6379/0", "redis"),
        (["sqs://", "redis://h"], "sqs"),
        ("sqla+postgresql://u@h/db", "sqla"),
        ("sentinel://h:26379;sentinel://i:26379", "sentinel"),
    ],
)
def test_e011_the_transport_of_a_broker_url(broker: Any, transport: str) -> None:
    from weft_django.checks.configuration import broker_transport

    assert broker_transport(broker) == transport


@pytest.mark.skipif(find_spec("sqlalchemy") is not None, reason="sqlalchemy is installed here")
def test_e011_the_hint_names_the_celery_extra_of_the_transport(settings: Any) -> None:
    from weft_django.beat import beat_schedule
    from weft_django.checks.configuration import transport_hint

    settings.CELERY_BEAT_SCHEDULE = beat_schedule()
    settings.CELERY_BROKER_URL = "sqla+sqlite:////tmp/broker.sqlite3"
    (error,) = _celery_errors()
    assert "'sqla' transport" in error.msg and "sqlalchemy" in error.msg
    assert error.hint == "Install that transport's packages: pip install 'celery[sqlalchemy]'."
    assert transport_hint("etcd") == "Install the packages kombu's 'etcd' transport needs."


def test_e011_a_broker_url_kombu_cannot_parse_is_left_to_celery(settings: Any) -> None:
    from weft_django.beat import beat_schedule

    settings.CELERY_BEAT_SCHEDULE = beat_schedule()
    settings.CELERY_BROKER_URL = "nosuchtransport://x"
    assert _celery_errors() == []


def test_e009_redis_is_not_needed_with_another_broker(
    settings: Any, without: Callable[..., None]
) -> None:
    from weft_django.beat import beat_schedule

    settings.CELERY_BEAT_SCHEDULE = beat_schedule()
    settings.CELERY_BROKER_URL = "amqp://guest:guest@127.0.0.1:5672//"
    without("redis", "packaging", "packaging.version")
    assert _celery_errors() == []


def test_e009_a_schedule_without_weft_tasks_is_not_weft_business(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CELERY_BEAT_SCHEDULE = {"mine": {"task": "shop.tasks.report", "schedule": 60}}
    monkeypatch.setitem(sys.modules, "celery", None)
    assert _celery_errors() == []


def test_e010_an_unknown_weft_task_is_an_error(settings: Any) -> None:
    settings.CELERY_BEAT_SCHEDULE = {"x": {"task": "weft_django.signal_pass", "schedule": 30}}
    (error,) = _celery_errors()
    assert error.id == "weft.E012"
    assert "weft_django.signal_pass" in error.msg


def test_a_malformed_schedule_is_left_to_celery(settings: Any) -> None:
    settings.CELERY_BEAT_SCHEDULE = ["not", "a", "mapping"]
    assert _celery_errors() == []
