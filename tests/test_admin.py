"""The admin: read-only views of engine state and runs, constant query counts."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib import admin as django_admin
from django.contrib.admin.utils import quote
from django.db import connection, models
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.factories import (
    ClaimFactory,
    EngineFactory,
    GlobalLeaseFactory,
    OwnershipMarkerFactory,
    UpdateRequestFactory,
    WorkflowEventFactory,
    WorkflowRunFactory,
    WorkflowSignalFactory,
)
from weft_django.admin import LEASE_STYLE, precise, render_lease_state
from weft_django.models import (
    Claim,
    Engine,
    GlobalLease,
    OwnershipMarker,
    UpdateRequest,
    WorkflowEvent,
    WorkflowRun,
    WorkflowSignal,
)
from weft_django.ownership.leases.state import LeaseState, lease_state, lease_state_expression

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    """admin_client logs a superuser in for every test: skip PBKDF2's deliberate cost."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


ALL_MODELS = [
    Engine,
    Claim,
    OwnershipMarker,
    GlobalLease,
    WorkflowRun,
    WorkflowEvent,
    WorkflowSignal,
    UpdateRequest,
]


def changelist(model: type[models.Model]) -> str:
    return reverse(f"admin:weft_django_{model._meta.model_name}_changelist")


def change(obj: models.Model, view: str = "change") -> str:
    return reverse(f"admin:weft_django_{obj._meta.model_name}_{view}", args=[quote(obj.pk)])


@pytest.fixture
def populated() -> dict[str, Any]:
    """A little of everything: live/expired/stopped engines, held and unheld claims."""
    live = EngineFactory(hostname="alpha.example")
    expired = EngineFactory(hostname="beta.example", expired=True)
    stopped = EngineFactory(hostname="gamma.example", stopped=True, kind="celery")
    runs = {
        "live": WorkflowRunFactory(id="run-live", waiting=True, claim=live, claim__epoch=4),
        "expired": WorkflowRunFactory(id="run-expired", running=True, claim=expired),
        "unheld": WorkflowRunFactory(id="run-unheld", waiting=True, claim=True),
        "none": WorkflowRunFactory(id="run-none", workflow_name="shop.refund"),
        "done": WorkflowRunFactory(id="run-done", completed=True),
    }
    ClaimFactory(workflow_id="purged-run", unheld=True, epoch=7)
    WorkflowEventFactory(run=runs["live"], seq=1)
    WorkflowEventFactory(run=runs["live"], seq=2, kind="signal", name="decision")
    WorkflowSignalFactory(run=runs["live"])
    WorkflowSignalFactory(run=runs["live"], consumed=True)
    UpdateRequestFactory(run=runs["live"])
    UpdateRequestFactory(run=runs["live"], applied=True)
    marker = OwnershipMarkerFactory(established_by=live.id)
    lease = GlobalLeaseFactory(holder=live)
    return {
        "engines": {"live": live, "expired": expired, "stopped": stopped},
        "runs": runs,
        "marker": marker,
        "lease": lease,
    }


def result_map(response: Any, attr: str, key: str = "pk") -> dict[Any, Any]:
    return {getattr(obj, key): getattr(obj, attr) for obj in response.context["cl"].result_list}


# -- rendering --------------------------------------------------------------------


def test_admin_index_lists_every_model(admin_client: Any, populated: dict[str, Any]) -> None:
    response = admin_client.get(reverse("admin:app_list", args=["weft_django"]))
    assert response.status_code == 200
    for model in ALL_MODELS:
        assert changelist(model) in response.content.decode()


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda m: m.__name__)
def test_changelist_renders(admin_client: Any, populated: dict[str, Any], model: Any) -> None:
    response = admin_client.get(changelist(model))
    assert response.status_code == 200
    assert len(response.context["cl"].result_list) == model.objects.count() > 0


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda m: m.__name__)
def test_change_page_renders_read_only(
    admin_client: Any, populated: dict[str, Any], model: Any
) -> None:
    for obj in model.objects.all():
        response = admin_client.get(change(obj))
        assert response.status_code == 200, obj
        assert 'name="_save"' not in response.content.decode()
        assert response.context["has_change_permission"] is False


def test_run_change_page_shows_history_inlines(
    admin_client: Any, populated: dict[str, Any]
) -> None:
    response = admin_client.get(change(populated["runs"]["live"]))
    content = response.content.decode()
    assert "reserve_stock" in content  # event
    assert "set_quantity" in content  # update request
    assert "sig-" in content  # signal id
    assert "weft-lease-live" in content
    assert populated["engines"]["live"].id in content


# -- lease state ------------------------------------------------------------------


def test_claim_lease_states(admin_client: Any, populated: dict[str, Any]) -> None:
    response = admin_client.get(changelist(Claim))
    states = result_map(response, "lease_state")
    assert states == {
        "run-live": "live",
        "run-expired": "expired",
        "run-unheld": "unheld",
        "purged-run": "unheld",
    }
    content = response.content.decode()
    assert content.count("weft-lease-live") == 1
    assert content.count("weft-lease-expired") == 1
    assert content.count("weft-lease-unheld") == 2
    live = populated["engines"]["live"]
    assert f"{live.id} @ alpha.example" in content
    assert "purged / none" in content


def test_engine_lease_states_and_claim_counts(admin_client: Any, populated: dict[str, Any]) -> None:
    ClaimFactory.create_batch(3, holder=populated["engines"]["live"])
    response = admin_client.get(changelist(Engine))
    engines = populated["engines"]
    assert result_map(response, "lease_state") == {
        engines["live"].id: "live",
        engines["expired"].id: "expired",
        engines["stopped"].id: "expired",
    }
    assert result_map(response, "claims_held") == {
        engines["live"].id: 4,
        engines["expired"].id: 1,
        engines["stopped"].id: 0,
    }
    content = response.content.decode()
    assert "holder__id__exact=" + engines["live"].id in content
    assert precise(engines["live"].lease_expires_at) in content  # to the second


def test_run_owner_columns_come_from_the_claim_table(
    admin_client: Any, populated: dict[str, Any]
) -> None:
    response = admin_client.get(changelist(WorkflowRun))
    live = populated["engines"]["live"]
    assert result_map(response, "owner_lease_state") == {
        "run-live": "live",
        "run-expired": "expired",
        "run-unheld": "unheld",
        "run-none": "unheld",
        "run-done": "unheld",
    }
    assert result_map(response, "claim_holder_id")["run-live"] == live.id
    assert result_map(response, "claim_epoch") == {
        "run-live": 4,
        "run-expired": 1,
        "run-unheld": 1,
        "run-none": None,
        "run-done": None,
    }
    content = response.content.decode()
    assert f"{live.id} @ alpha.example" in content
    assert "signal: decision" in content  # waiting_on


@pytest.mark.parametrize(
    ("traits", "expected"),
    [({}, "live"), ({"expired": True}, "expired"), ({"unheld": True}, "unheld")],
)
def test_global_lease_states(admin_client: Any, traits: dict[str, bool], expected: str) -> None:
    lease = GlobalLeaseFactory(**traits)
    response = admin_client.get(changelist(GlobalLease))
    assert result_map(response, "lease_state") == {lease.pk: expected}
    assert f"weft-lease-{expected}" in response.content.decode()


def test_lease_state_boundary_is_strict(db: None) -> None:
    """``expires_at + 2 x renew < now`` is expired; equal is still live (SQL and Python)."""
    engine = EngineFactory()
    expires = Engine.objects.get(pk=engine.pk).lease_expires_at
    tick = timedelta(microseconds=1)
    assert lease_state(expires, expires) == LeaseState.LIVE
    assert lease_state(expires, expires + tick) == LeaseState.EXPIRED
    assert lease_state(None, expires) == LeaseState.UNHELD
    for cutoff_at, expected in ((expires, "live"), (expires + tick, "expired")):
        state = (
            Engine.objects.filter(pk=engine.pk)
            .annotate(state=lease_state_expression("lease_expires_at", cutoff_at))
            .values_list("state", flat=True)
            .get()
        )
        assert state == expected


def test_lease_state_uses_the_claim_renew_interval(
    admin_client: Any, weft_settings: Callable[..., None]
) -> None:
    """Expired once past ``lease_expires_at`` by more than 2 x CLAIM_RENEW_INTERVAL."""
    from django.utils import timezone

    engine = EngineFactory(lease_expires_at=timezone.now() - timedelta(seconds=60))
    ClaimFactory(workflow_id="wf-grace", holder=engine)
    weft_settings(CLAIM_TTL=300, CLAIM_RENEW_INTERVAL=40)  # grace 80 s > 60 s
    response = admin_client.get(changelist(Claim))
    assert result_map(response, "lease_state") == {"wf-grace": "live"}
    weft_settings(CLAIM_TTL=60, CLAIM_RENEW_INTERVAL=20)  # grace 40 s < 60 s
    response = admin_client.get(changelist(Claim))
    assert result_map(response, "lease_state") == {"wf-grace": "expired"}


def test_render_lease_state_has_an_icon_and_colour_per_state() -> None:
    for state in LeaseState:
        html = render_lease_state(state.value)
        colour, icon = LEASE_STYLE[state]
        assert colour in html and icon in html and f"weft-lease-{state.value}" in html
    assert render_lease_state(None) == "-"


# -- read-only --------------------------------------------------------------------


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda m: m.__name__)
def test_no_add_change_or_delete(admin_client: Any, populated: dict[str, Any], model: Any) -> None:
    model_admin = django_admin.site._registry[model]
    request = admin_client.get(changelist(model)).wsgi_request
    obj = model.objects.first()
    assert model_admin.has_view_permission(request, obj)
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request, obj)
    assert not model_admin.has_delete_permission(request, obj)
    expected_actions = (
        {"cancel_runs", "suspend_runs", "resume_runs", "purge_runs"}
        if model is WorkflowRun
        else set()
    )
    assert set(model_admin.get_actions(request)) == expected_actions  # never delete_selected
    before = list(model.objects.order_by("pk").values())

    add_url = reverse(f"admin:weft_django_{model._meta.model_name}_add")
    assert admin_client.get(add_url).status_code == 403
    assert admin_client.post(add_url, {}).status_code == 403
    assert admin_client.post(change(obj), {"epoch": 99, "status": "stopped"}).status_code == 403
    assert admin_client.post(change(obj, "delete"), {"post": "yes"}).status_code == 403
    response = admin_client.post(
        changelist(model), {"action": "delete_selected", "_selected_action": [obj.pk]}
    )
    assert response.status_code in (200, 302)
    assert list(model.objects.order_by("pk").values()) == before


def test_changelists_have_no_action_checkboxes(
    admin_client: Any, populated: dict[str, Any]
) -> None:
    for model in ALL_MODELS:
        if model is WorkflowRun:
            continue  # runs have operator actions (tests/test_admin_actions.py)
        content = admin_client.get(changelist(model)).content.decode()
        assert "action-select" not in content, model


# -- query counts -----------------------------------------------------------------


def _rows_engines(n: int) -> None:
    for i in range(n):
        engine = EngineFactory(expired=bool(i % 2))
        ClaimFactory.create_batch(2, holder=engine)


def _rows_claims(n: int) -> None:
    for i in range(n):
        ClaimFactory(**[{}, {"expired": True}, {"unheld": True}][i % 3])


def _rows_runs(n: int) -> None:
    engine = EngineFactory()
    for i in range(n):
        WorkflowRunFactory(waiting=True, claim=engine if i % 2 else True)


def _rows_events(n: int) -> None:
    run = WorkflowRunFactory(running=True)
    WorkflowEventFactory.create_batch(n, run=run)


ROW_MAKERS: dict[type[models.Model], Callable[[int], Any]] = {
    Engine: _rows_engines,
    Claim: _rows_claims,
    WorkflowRun: _rows_runs,
    WorkflowEvent: _rows_events,
    WorkflowSignal: lambda n: WorkflowSignalFactory.create_batch(n),
    UpdateRequest: lambda n: UpdateRequestFactory.create_batch(n),
}


def _count_queries(client: Any, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return len(captured.captured_queries)


FLAT_CASES = [(model, "") for model in ROW_MAKERS] + [
    (Engine, "?lease_state=expired&q=host"),
    (Claim, "?lease_state=live&q=wf-"),
    (WorkflowRun, "?owner_lease=unheld&status__exact=waiting&q=run-"),
    (WorkflowSignal, "?consumed_at__isempty=1"),
]


@pytest.mark.parametrize(
    ("model", "query"), FLAT_CASES, ids=lambda v: v.__name__ if isinstance(v, type) else v
)
def test_changelist_query_count_is_flat(admin_client: Any, model: Any, query: str) -> None:
    make = ROW_MAKERS[model]
    url = changelist(model) + query
    make(3)
    admin_client.get(url)  # warm up session and caches
    few = _count_queries(admin_client, url)
    make(27)
    many = _count_queries(admin_client, url)
    assert few == many, (model, query)
    assert many <= 12


# -- search and filters -----------------------------------------------------------


def _ids(admin_client: Any, model: Any, query: str) -> set[Any]:
    response = admin_client.get(changelist(model) + query)
    assert response.status_code == 200
    return {obj.pk for obj in response.context["cl"].result_list}


def test_claim_search_and_filters(admin_client: Any, populated: dict[str, Any]) -> None:
    live_engine = populated["engines"]["live"].id
    assert _ids(admin_client, Claim, f"?q={live_engine}") == {"run-live"}  # by holder id
    assert _ids(admin_client, Claim, "?q=run-live") == {"run-live"}
    assert _ids(admin_client, Claim, "?q=purged-run") == {"purged-run"}
    assert _ids(admin_client, Claim, "?q=purged") == set()
    assert _ids(admin_client, Claim, "?lease_state=unheld") == {"run-unheld", "purged-run"}
    assert _ids(admin_client, Claim, "?lease_state=expired") == {"run-expired"}
    assert _ids(admin_client, Claim, "?lease_state=live") == {"run-live"}
    holder = populated["engines"]["live"].id
    assert _ids(admin_client, Claim, f"?holder__id__exact={holder}") == {"run-live"}


def test_engine_search_and_filters(admin_client: Any, populated: dict[str, Any]) -> None:
    engines = populated["engines"]
    assert _ids(admin_client, Engine, "?q=beta.example") == {engines["expired"].id}
    assert _ids(admin_client, Engine, "?q=beta") == set()  # exact, not a substring
    assert _ids(admin_client, Engine, "?lease_state=live") == {engines["live"].id}
    assert _ids(admin_client, Engine, "?lease_state=expired") == {
        engines["expired"].id,
        engines["stopped"].id,
    }
    assert _ids(admin_client, Engine, "?kind__exact=celery") == {engines["stopped"].id}
    assert _ids(admin_client, Engine, "?status__exact=running") == {
        engines["live"].id,
        engines["expired"].id,
    }


def test_run_search_and_filters(admin_client: Any, populated: dict[str, Any]) -> None:
    assert _ids(admin_client, WorkflowRun, "?q=run-expired") == {"run-expired"}
    # Exact and case-sensitive: the primary key's index answers it.
    assert _ids(admin_client, WorkflowRun, "?q=run-exp") == set()
    assert _ids(admin_client, WorkflowRun, "?q=RUN-EXPIRED") == set()
    assert _ids(admin_client, WorkflowRun, "?q=shop.refund") == {"run-none"}
    assert _ids(admin_client, WorkflowRun, "?status__exact=waiting") == {"run-live", "run-unheld"}
    assert _ids(admin_client, WorkflowRun, "?workflow_name=shop.refund") == {"run-none"}
    assert _ids(admin_client, WorkflowRun, "?owner_lease=live") == {"run-live"}
    assert _ids(admin_client, WorkflowRun, "?owner_lease=expired") == {"run-expired"}
    assert _ids(admin_client, WorkflowRun, "?owner_lease=unheld&status__exact=waiting") == {
        "run-unheld"
    }
    # An unknown filter value filters nothing away rather than erroring.
    assert len(_ids(admin_client, WorkflowRun, "?owner_lease=bogus")) == 5


def test_history_search_and_filters(admin_client: Any, populated: dict[str, Any]) -> None:
    signals = _ids(admin_client, WorkflowSignal, "?consumed_at__isempty=1")
    assert len(signals) == 1
    assert len(_ids(admin_client, WorkflowSignal, "?q=run-live")) == 2
    assert len(_ids(admin_client, UpdateRequest, "?status__exact=pending")) == 1
    assert len(_ids(admin_client, WorkflowEvent, "?kind=signal")) == 1
    assert len(_ids(admin_client, WorkflowEvent, "?q=run-live")) == 2
    assert len(_ids(admin_client, WorkflowEvent, "?q=run-l")) == 0  # exact run id


def test_ordering_by_annotations(admin_client: Any, populated: dict[str, Any]) -> None:
    engine_admin = django_admin.site._registry[Engine]
    columns = list(engine_admin.list_display)
    column = columns.index("claims_held_display")
    response = admin_client.get(changelist(Engine) + f"?o=-{column}")
    counts = [obj.claims_held for obj in response.context["cl"].result_list]
    assert counts == sorted(counts, reverse=True)
    run_admin = django_admin.site._registry[WorkflowRun]
    column = list(run_admin.list_display).index("owner_lease_display")
    assert admin_client.get(changelist(WorkflowRun) + f"?o={column}").status_code == 200


# -- the marker ---------------------------------------------------------------------


def test_corrupt_marker_is_reported_in_the_admin(admin_client: Any) -> None:
    OwnershipMarkerFactory(mode="bogus-mode")
    response = admin_client.get(changelist(OwnershipMarker))
    assert response.status_code == 200
    content = response.content.decode()
    assert "cannot be decoded" in content
    assert "weft_marker --reset" in content


def test_corrupt_marker_change_page_redirects_with_the_repair_hint(admin_client: Any) -> None:
    marker = OwnershipMarkerFactory(mode="bogus-mode")
    response = admin_client.get(change(marker), follow=True)
    assert response.redirect_chain[-1][0] == changelist(OwnershipMarker)
    assert "weft_marker --reset" in response.content.decode()


@pytest.mark.skipif(connection.vendor != "sqlite", reason="only SQLite stores such a value")
@pytest.mark.parametrize("stored", ["2024-13-45 99:99:99", "garbage"])
def test_undecodable_marker_timestamp_still_lists(admin_client: Any, stored: str) -> None:
    OwnershipMarkerFactory()
    with connection.cursor() as cursor:
        cursor.execute("UPDATE weft_django_ownershipmarker SET established_at = %s", [stored])
    response = admin_client.get(changelist(OwnershipMarker))
    assert response.status_code == 200
    content = response.content.decode()
    assert stored in content and "undecodable" in content
    assert "cannot be decoded" in content


def test_marker_timestamp_is_shown_to_the_second(admin_client: Any) -> None:
    marker = OwnershipMarkerFactory()
    response = admin_client.get(changelist(OwnershipMarker))
    assert precise(marker.established_at) in response.content.decode()


def test_marker_matches_configured_mode(admin_client: Any, weft_settings: Any) -> None:
    OwnershipMarkerFactory(mode="lease")
    response = admin_client.get(changelist(OwnershipMarker))
    assert "icon-no" in response.content.decode()
    weft_settings(OWNERSHIP="lease")
    response = admin_client.get(changelist(OwnershipMarker))
    assert "icon-yes" in response.content.decode()
