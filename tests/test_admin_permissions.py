"""The admin's permission matrix (docs/admin.md, "Permissions"), the 403 that comes
before any existence check, the query-string lookups the admin allows, and
malformed ids in URLs (404, never 500, on every database)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.factories import (
    EngineFactory,
    UpdateRequestFactory,
    WorkflowEventFactory,
    WorkflowRunFactory,
    WorkflowSignalFactory,
)
from weft_django.models import RunStatus, WorkflowRun

pytestmark = pytest.mark.django_db

#: The permission sets of the matrix (codenames; "super" is a superuser).
SETS: dict[str, tuple[str, ...]] = {
    "staff": (),
    "view": ("view_workflowrun",),
    "change": ("change_workflowrun",),
    "payload": ("view_workflowrun", "view_workflowevent"),
    "engine": ("view_workflowrun", "view_engine"),
    "lists": ("view_workflowsignal", "view_claim", "view_updaterequest"),
    "operate": ("view_workflowrun", "operate_workflowrun"),
    "op+del": ("view_workflowrun", "operate_workflowrun", "delete_workflowrun"),
    "delete": ("view_workflowrun", "delete_workflowrun"),
    "super": (),
}

#: What each permission set sees (Y) and may do (Y); "-": a 403, the part
#: left out of the page, or the operation refused with nothing changed. The
#: same matrix as docs/admin.md's "Permissions".
MATRIX = """
                         staff view change payload engine lists operate op+del delete super
run list                   -    Y    -      Y       Y      -     Y       Y      Y      Y
run page                   -    Y    -      Y       Y      -     Y       Y      Y      Y
run page payloads          -    -    -      Y       -      -     -       -      -      Y
run page engine host       -    -    -      -       Y      -     -       -      -      Y
overview                   -    Y    -      Y       Y      -     Y       Y      Y      Y
overview payloads          -    -    -      Y       -      -     -       -      -      Y
overview engine hosts      -    -    -      -       Y      -     -       -      -      Y
event list                 -    -    -      Y       -      -     -       -      -      Y
signal list                -    -    -      -       -      Y     -       -      -      Y
signal page payload        -    -    -      -       -      -     -       -      -      Y
update request list        -    -    -      -       -      Y     -       -      -      Y
claim list                 -    -    -      -       -      Y     -       -      -      Y
claim list engine host     -    -    -      -       -      -     -       -      -      Y
engine list                -    -    -      -       Y      -     -       -      -      Y
engine page                -    -    -      -       Y      -     -       -      -      Y
signal form                -    -    -      -       -      -     Y       Y      -      Y
send signal                -    -    -      -       -      -     Y       Y      -      Y
suspend                    -    -    -      -       -      -     Y       Y      -      Y
resume                     -    -    -      -       -      -     Y       Y      -      Y
cancel                     -    -    -      -       -      -     -       Y      -      Y
purge                      -    -    -      -       -      -     -       Y      Y      Y
"""


def parse_matrix() -> dict[str, dict[str, bool]]:
    header, *lines = MATRIX.strip().splitlines()
    names = header.split()
    assert names == list(SETS)
    table = {}
    for line in lines:
        words = line.split()
        row, cells = " ".join(words[: -len(names)]), words[-len(names) :]
        table[row] = {name: cell == "Y" for name, cell in zip(names, cells, strict=True)}
    return table


TABLE = parse_matrix()

HOST = "host-secret.example"
#: The engine's pid: digits no page shows by chance (4242 once matched a number
#: elsewhere on the overview, a timestamp or a token).
PID = 7_654_321
SECRETS = ("ARGS-SECRET", "SIGNAL-SECRET", "STEP-SECRET", "UPDATE-SECRET")


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def login(client: Client, name: str) -> User:
    if name == "super":
        user = User.objects.create_superuser("super", password="pw")
    else:
        user = User.objects.create_user(name, password="pw", is_staff=True)
        for codename in SETS[name]:
            user.user_permissions.add(Permission.objects.get(codename=codename))
    client.force_login(user)
    return user


def url(name: str, *args: Any) -> str:
    return reverse(f"admin:weft_django_{name}", args=args)


@pytest.fixture
def world() -> dict[str, Any]:
    """A live engine on a known host holding a waiting run with a payload in every place."""
    engine = EngineFactory(hostname=HOST, pid=PID)
    run = WorkflowRunFactory(waiting=True, claim=engine, args=["ARGS-SECRET"])
    old = timezone.now() - timedelta(hours=1)
    signal = WorkflowSignalFactory(run=run, payload={"note": "SIGNAL-SECRET"}, created_at=old)
    WorkflowEventFactory(run=run, seq=1, result={"note": "STEP-SECRET"}, engine_id=engine.pk)
    UpdateRequestFactory(run=run, payload={"note": "UPDATE-SECRET"}, created_at=old)
    failed = WorkflowRunFactory(failed=True, error={"message": "ERROR-SECRET"})
    suspended = WorkflowRunFactory(suspended=True)
    return {
        "engine": engine,
        "run": run,
        "signal": signal,
        "failed": failed,
        "suspended": suspended,
    }


def seen(client: Client, path: str, *texts: str) -> bool:
    """Whether the page answers 200 and shows ``texts``: all of them or none
    (a page that shows some of them fails the test); a 403 is "not seen"."""
    response = client.get(path)
    assert response.status_code in (200, 403), (path, response.status_code)
    if response.status_code == 403:
        return False
    content = response.content.decode()
    shown = {text: text in content for text in texts}
    assert len(set(shown.values())) <= 1, (path, shown)
    return all(shown.values())


def observed(client: Client, world: dict[str, Any]) -> dict[str, bool]:
    """Each row of the matrix as this client finds it."""
    run, engine = world["run"], world["engine"]
    run_page = url("workflowrun_change", run.pk)
    overview = url("overview_changelist") + "?older_than=0"
    found = {
        "run list": seen(client, url("workflowrun_changelist"), run.pk),
        "run page": seen(client, run_page, run.pk),
        "run page payloads": seen(client, run_page, *SECRETS),
        "run page engine host": seen(client, run_page, HOST),
        "overview": seen(client, overview),
        "overview payloads": seen(client, overview, "ERROR-SECRET", "SIGNAL-SECRET"),
        "overview engine hosts": seen(client, overview, HOST, str(PID)),
        "event list": seen(client, url("workflowevent_changelist"), run.pk),
        "signal list": seen(client, url("workflowsignal_changelist"), run.pk),
        "signal page payload": seen(
            client, url("workflowsignal_change", world["signal"].pk), "SIGNAL-SECRET"
        ),
        "update request list": seen(client, url("updaterequest_changelist"), run.pk),
        "claim list": seen(client, url("claim_changelist"), run.pk),
        "claim list engine host": seen(client, url("claim_changelist"), HOST),
        "engine list": seen(client, url("engine_changelist"), HOST),
        "engine page": seen(client, url("engine_change", engine.pk), HOST),
        "signal form": seen(client, url("workflowrun_signal", run.pk), 'name="payload"'),
    }
    # Operations: done (True) or refused with nothing changed (False).
    before = WorkflowRun.objects.get(pk=run.pk).status
    response = client.post(url("workflowrun_signal", run.pk), {"name": "go", "payload": "1"})
    found["send signal"] = run.signals.filter(name="go").exists()
    assert response.status_code in (302, 403)

    response = client.post(url("workflowrun_operate", run.pk, "suspend"))
    found["suspend"] = WorkflowRun.objects.get(pk=run.pk).status == RunStatus.SUSPENDED
    assert response.status_code in (302, 403)

    suspended = world["suspended"]
    response = client.post(url("workflowrun_operate", suspended.pk, "resume"))
    found["resume"] = WorkflowRun.objects.get(pk=suspended.pk).status != RunStatus.SUSPENDED
    assert response.status_code in (302, 403)

    response = client.post(url("workflowrun_cancel", suspended.pk), {"post": "yes"})
    found["cancel"] = WorkflowRun.objects.get(pk=suspended.pk).status == RunStatus.CANCELLED
    assert response.status_code in (302, 403)

    failed = world["failed"]
    data = {"action": "purge_runs", "_selected_action": [failed.pk], "post": "yes"}
    response = client.post(url("workflowrun_changelist"), data)
    found["purge"] = not WorkflowRun.objects.filter(pk=failed.pk).exists()
    assert response.status_code in (200, 302, 403)
    assert before == RunStatus.WAITING
    return found


@pytest.mark.parametrize("name", list(SETS))
def test_the_permission_matrix(client: Client, world: dict[str, Any], name: str) -> None:
    login(client, name)
    expected = {row: cells[name] for row, cells in TABLE.items()}
    assert observed(client, world) == expected


# -- 403 before any existence check --------------------------------------------


def run_views(run_id: str) -> list[tuple[str, str]]:
    return [
        ("get", url("workflowrun_change", run_id)),
        ("get", url("workflowrun_history", run_id)),
        ("get", url("workflowrun_signal", run_id)),
        ("post", url("workflowrun_signal", run_id)),
        ("post", url("workflowrun_operate", run_id, "suspend")),
        ("post", url("workflowrun_operate", run_id, "resume")),
        ("post", url("workflowrun_operate", run_id, "cancel")),
        ("post", url("workflowrun_operate", run_id, "no-such-verb")),
        ("get", url("workflowrun_cancel", run_id)),
        ("post", url("workflowrun_cancel", run_id)),
    ]


@pytest.mark.parametrize("name", ["staff", "change"])
def test_no_view_permission_is_403_for_existing_and_missing_runs(client: Client, name: str) -> None:
    run = WorkflowRunFactory(waiting=True)
    login(client, name)
    for run_id in (run.pk, "no-such-run", "a\x00b"):
        for method, path in run_views(run_id):
            assert getattr(client, method)(path).status_code == 403, (method, path)


def test_no_operate_permission_is_403_for_existing_and_missing_runs(client: Client) -> None:
    run = WorkflowRunFactory(waiting=True)
    login(client, "view")
    for run_id in (run.pk, "no-such-run", "a\x00b"):
        for method, path in run_views(run_id)[2:]:
            if "no-such-verb" not in path:
                assert getattr(client, method)(path).status_code == 403, (method, path)


def test_no_engine_permission_is_403_for_existing_and_missing_engines(client: Client) -> None:
    engine = EngineFactory()
    login(client, "view")
    for engine_id in (engine.pk, "no-such-engine", "a\x00b"):
        assert client.get(url("engine_change", engine_id)).status_code == 403
        assert client.get(url("engine_history", engine_id)).status_code == 403


def test_with_the_permission_a_missing_run_is_404(client: Client) -> None:
    login(client, "op+del")
    for method, path in run_views("no-such-run")[2:]:
        assert getattr(client, method)(path).status_code == 404, (method, path)


# -- query-string lookups ------------------------------------------------------------

CHANGELISTS = (
    "workflowrun",
    "workflowevent",
    "workflowsignal",
    "updaterequest",
    "claim",
    "engine",
    "globallease",
    "ownershipmarker",
    "passsummary",
)


@pytest.mark.parametrize("model", CHANGELISTS)
def test_generic_lookups_are_refused(admin_client: Client, model: str) -> None:
    path = url(f"{model}_changelist")
    for query in ("id__regex=^([0-9a-f]+)+Z", "pk__gt=0", "status__startswith=r"):
        response = admin_client.get(f"{path}?{query}")
        assert response.status_code in (302, 400), (query, response.status_code)
        if response.status_code == 302:
            assert response.url.endswith("?e=1")


@pytest.mark.parametrize("model", CHANGELISTS)
def test_every_offered_filter_still_works(
    admin_client: Client, world: dict[str, Any], model: str
) -> None:
    path = url(f"{model}_changelist")
    response = admin_client.get(path)
    assert response.status_code == 200
    changelist = response.context["cl"]
    queries = {
        choice["query_string"]
        for spec in changelist.filter_specs
        for choice in spec.choices(changelist)
    }
    for query in queries:
        assert admin_client.get(f"{path}{query}").status_code == 200, query


@pytest.mark.parametrize(
    "model, query",
    [
        ("workflowrun", "?status__exact=failed&o=-9"),
        ("workflowrun", "?workflow_name=shop.approve_order"),
        ("workflowrun", "?q=run-00001"),
        ("claim", "?holder__id__exact=engine-0001"),
        ("claim", "?lease_state=expired"),
    ],
)
def test_documented_query_strings_work(admin_client: Client, model: str, query: str) -> None:
    assert admin_client.get(url(f"{model}_changelist") + query).status_code == 200


# -- malformed ids and values: 404 / the invalid-filter page, never 500 -------------


def test_a_nul_in_an_id_is_404_on_every_page(admin_client: Client) -> None:
    bad = "a\x00b"
    paths = [
        url("workflowrun_change", bad),
        url("workflowrun_history", bad),
        url("workflowrun_signal", bad),
        url("workflowrun_cancel", bad),
        url("engine_change", bad),
        url("engine_history", bad),
        url("claim_change", bad),
        url("workflowsignal_change", bad),
        url("workflowevent_change", bad),
        url("updaterequest_change", bad),
        url("passsummary_change", bad),
    ]
    for path in paths:
        assert admin_client.get(path).status_code == 404, path
    for verb in ("cancel", "suspend", "resume"):
        assert admin_client.post(url("workflowrun_operate", bad, verb)).status_code == 404
    assert admin_client.post(url("workflowrun_signal", bad), {"name": "go"}).status_code == 404
    assert admin_client.get("/admin/weft_django/workflowrun/a%00b/change/").status_code == 404


def test_an_id_longer_than_any_key_is_404(admin_client: Client) -> None:
    assert admin_client.get(url("workflowrun_change", "x" * 300)).status_code == 404
    assert admin_client.get(url("engine_change", "x" * 65)).status_code == 404


@pytest.mark.parametrize(
    "model, query",
    [
        ("workflowrun", "workflow_name=a%00b"),
        ("workflowrun", "q=a%00b"),
        ("workflowrun", "status__exact=a%00b"),
        ("claim", "holder__id__exact=a%00b"),
        ("workflowevent", "kind=a%00b"),
        ("engine", "q=a%00b"),
    ],
)
def test_a_nul_in_a_filter_value_is_the_invalid_filter_page(
    admin_client: Client, model: str, query: str
) -> None:
    path = url(f"{model}_changelist")
    response = admin_client.get(f"{path}?{query}")
    assert (response.status_code, response.url) == (302, f"{path}?e=1")
    assert admin_client.get(response.url).status_code == 200
