"""The admin's pictures: the run's timeline (steps as bars sized by duration,
waits as labelled gaps, owner bands, failures marked), the overview's last
hour as charts (counts per minute from bounded range scans, plans on
PostgreSQL), and times and durations written for people."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.db import connection
from django.template import Context, Template
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from tests.factories import EngineFactory, WorkflowRunFactory
from weft_django.admin import activity
from weft_django.admin.charts import human_duration, minute_chart
from weft_django.admin.pictures import GUTTER, PLOT, timeline_picture
from weft_django.admin.timeline import timeline_rows
from weft_django.models import WorkflowEvent, WorkflowRun

from .plans import plan_nodes

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def event(
    seq: int,
    kind: str,
    name: str,
    seconds: float,
    engine: str = "A",
    epoch: int = 1,
    error: Any = None,
) -> WorkflowEvent:
    return WorkflowEvent(
        run_id="r",
        seq=seq,
        kind=kind,
        name=name,
        result={"deadline": None} if kind == "wait" else None,
        error=error,
        engine_id=engine,
        epoch=epoch,
        created_at=at(seconds),
    )


def history() -> list[WorkflowEvent]:
    """Steps of 1 s and 3 s, a 60 s wait for a signal, the signal, then engine
    B (epoch 2) takes over: a 2 s step, a step that failed after 3 attempts."""
    return [
        event(1, "step", "fetch", 1),
        event(2, "step", "price", 4),
        event(3, "wait", "signal:go", 5),
        event(4, "signal", "go", 65),
        event(5, "step", "ship", 67, engine="B", epoch=2),
        event(
            6,
            "step",
            "notify",
            69,
            engine="B",
            epoch=2,
            error={"type": "ValueError", "message": "no", "attempts": 3},
        ),
    ]


# -- durations and times --------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0042, "4.2 ms"),
        (0.25, "250 ms"),
        (1.2, "1.2 s"),
        (59.94, "59.9 s"),
        (184, "3 min 4 s"),
        (180, "3 min"),
        (7500, "2 h 5 min"),
        (273600, "3 d 4 h"),
        (timedelta(seconds=90), "1 min 30 s"),
        (None, ""),
    ],
)
def test_durations_read_like_a_person(seconds: Any, text: str) -> None:
    assert human_duration(seconds) == text
    rendered = Template("{% load weft_admin %}{{ v|duration }}").render(Context({"v": seconds}))
    assert rendered == text


def test_times_are_shown_in_the_users_time_zone_with_the_exact_value_on_hover() -> None:
    value = datetime(2026, 12, 1, 12, 0, 5, 123456, tzinfo=UTC)
    template = Template("{% load weft_admin %}{{ v|when }}")
    with timezone.override("Europe/Paris"):
        html = template.render(Context({"v": value}))
    assert html == (
        '<time datetime="2026-12-01T12:00:05.123456+00:00" '
        'title="2026-12-01 13:00:05.123456+01:00">2026-12-01 13:00:05</time>'
    )
    assert template.render(Context({"v": None})) == ""


# -- the timeline's geometry -----------------------------------------------------------


def test_steps_are_bars_sized_by_duration_and_waits_are_labelled_gaps() -> None:
    picture = timeline_picture(timeline_rows(history(), None))
    assert picture is not None
    # The axis: from the first event (1 s) to the last (69 s).
    assert picture.start == at(1) and picture.end == at(69)
    per_second = PLOT / 68.0
    bars = {bar.name: bar for bar in picture.bars}
    assert list(bars) == ["fetch", "price", "ship", "notify"]
    # fetch is the first event (no duration known): a minimal bar at its time.
    assert bars["fetch"].x == GUTTER and bars["fetch"].seconds is None
    assert bars["price"].width == pytest.approx(3 * per_second, abs=0.2)
    assert bars["price"].x == pytest.approx(GUTTER, abs=0.1)
    assert bars["notify"].width == pytest.approx(2 * per_second, abs=0.2)
    assert bars["ship"].seconds == 2.0  # from the signal that ended the wait
    assert bars["ship"].width == pytest.approx(2 * per_second, abs=0.2)
    assert bars["notify"].failed and bars["notify"].attempts == 3
    assert "failed after 3 attempt(s)" in bars["notify"].title
    (gap,) = picture.gaps
    assert gap.label == "waits on signal go (1 min)"
    assert gap.width == pytest.approx(60 * per_second, abs=0.2)
    assert gap.x == pytest.approx(GUTTER + 4 * per_second, abs=0.2)
    assert [m.kind for m in picture.markers] == ["signal"]


def test_a_step_right_after_a_sleep_has_no_recorded_start() -> None:
    events = [event(1, "sleep", "", 0), event(2, "step", "wake", 30)]
    events[0].result = {"until": at(30).isoformat()}
    picture = timeline_picture(timeline_rows(events, None))
    assert picture is not None
    (bar,) = picture.bars
    (gap,) = picture.gaps
    # The sleep's gap holds the time; the step is a tick at its end.
    assert bar.seconds is None and bar.width == 2.0 and "duration not recorded" in bar.title
    assert gap.width == PLOT and gap.label.startswith("sleeps until 2026-12-01T12:00:30")
    assert gap.label.endswith("(30.0 s)")


def test_owner_bands_are_contiguous_sized_by_duration_and_mark_the_takeover() -> None:
    picture = timeline_picture(timeline_rows(history(), None))
    assert picture is not None
    first, second = picture.bands
    assert (first.engine_id, first.epoch, second.engine_id, second.epoch) == ("A", 1, "B", 2)
    # A recorded up to the signal (65 s); B from there to the end (69 s).
    assert (first.start, first.end, second.start, second.end) == (at(1), at(65), at(65), at(69))
    assert first.width == pytest.approx(PLOT * 64 / 68, abs=0.2)
    assert second.x == pytest.approx(first.x + first.width, abs=0.1)
    assert not first.changed and second.changed and picture.takeovers == [second]
    assert "took over from A" in second.title
    # Without the engine permission the bands name the epoch only.
    hidden = timeline_picture(timeline_rows(history(), None), show_engines=False)
    assert hidden is not None and [b.label for b in hidden.bands] == ["epoch 1", "epoch 2"]


def test_a_run_still_waiting_is_drawn_up_to_now() -> None:
    rows = timeline_rows(history()[:3], None)
    picture = timeline_picture(rows, until=at(125))
    assert picture is not None and picture.end == at(125)
    (gap,) = picture.gaps
    assert gap.open and gap.seconds == 120 and gap.label.endswith("(2 min+)")
    assert timeline_picture([]) is None


# -- the pictures on the pages -----------------------------------------------------------


def run_url(run_id: str, query: str = "") -> str:
    return reverse("admin:weft_django_workflowrun_change", args=[quote(run_id)]) + query


@pytest.mark.django_db
def test_the_run_page_draws_bars_gaps_and_owner_bands(admin_client: Any) -> None:
    run = WorkflowRunFactory(id="pictured", completed=True)
    for e in history():
        e.run = run
        e.save()
    html = admin_client.get(run_url(run.pk)).content.decode()
    svg = html[html.index('<figure class="weft-picture"') : html.index("</figure>")]
    assert svg.count('<g class="weft-bar') == 4 and svg.count("weft-bar-failed") == 1
    assert svg.count('<g class="weft-gap') == 1 and "waits on signal go (1 min)" in svg
    bands = re.findall(r'<g class="weft-band [^"]*"[^>]*data-engine="(\w+)" data-epoch="(\d)"', svg)
    assert bands == [("A", "1"), ("B", "2")]
    assert "weft-band-changed" in svg and 'class="weft-takeover"' in svg
    assert "<title>#6 step notify: 2.0 s, failed after 3 attempt(s)" in svg
    # The table's times: the user's time zone, to the second, exact on hover.
    assert '<time datetime="2026-12-01T12:00:01+00:00"' in html


@pytest.mark.django_db
def test_the_timeline_picture_follows_the_tables_pages(admin_client: Any) -> None:
    run = WorkflowRunFactory(id="long", waiting=True)
    WorkflowEvent.objects.bulk_create(
        [
            WorkflowEvent(run=run, seq=seq, kind="step", name=f"s{seq}", created_at=at(seq))
            for seq in range(1, 151)
        ]
    )
    second = admin_client.get(run_url(run.pk, "?events_page=2")).context["timeline_picture"]
    assert [bar.seq for bar in second.bars] == list(range(101, 151))
    # The page starts where the event before it ended: seq 101 lasted 1 s too.
    assert second.start == at(100) and second.bars[0].seconds == pytest.approx(1.0)


# -- the overview's charts ----------------------------------------------------------------


def test_a_minute_chart_has_a_column_per_minute_sized_by_count() -> None:
    now = T0 + timedelta(minutes=10, seconds=30)
    chart = minute_chart(
        "steps",
        "Steps per second",
        {T0 + timedelta(minutes=9): 120, T0 + timedelta(minutes=10): 60},
        now,
        per_second=True,
    )
    assert len(chart.columns) == 60 and chart.last == T0 + timedelta(minutes=10)
    # 120 steps in a whole minute: 2/s; 60 in the 30 s of the current one: 2/s.
    assert [c.value for c in chart.columns[-2:]] == [2.0, 2.0] and chart.peak == 2.0
    assert chart.columns[-1].height == chart.plot_height and chart.columns[0].height == 0


@pytest.mark.django_db
def test_the_overview_charts_count_the_last_hour_per_minute(admin_client: Any) -> None:
    from weft_django.ownership import db_now

    now = db_now()
    minute = now.replace(second=0, microsecond=0)
    for _ in range(3):
        WorkflowRunFactory(created_at=minute - timedelta(minutes=5))
    WorkflowRunFactory(created_at=now - timedelta(hours=2))  # outside the hour
    done = WorkflowRunFactory(completed=True, finished_at=minute - timedelta(minutes=2))
    WorkflowRunFactory(failed=True, finished_at=minute - timedelta(minutes=1))
    for seq in range(1, 5):
        WorkflowEvent.objects.create(
            run=done,
            seq=seq,
            kind="step" if seq < 4 else "wait",
            name="s",
            created_at=minute - timedelta(minutes=2),
        )
    EngineFactory(id="eng-charts")
    response = admin_client.get("/admin/weft_django/overview/")
    charts = {chart.name: chart for chart in response.context["charts"]}

    def by_minute(name: str) -> dict[int, float]:
        return {
            int((minute - c.at).total_seconds() // 60): c.value
            for c in charts[name].columns
            if c.value
        }

    assert by_minute("started")[5] == 3
    assert by_minute("completed") == {2: 1} and by_minute("failed") == {1: 1}
    assert by_minute("steps") == {2: pytest.approx(3 / 60, abs=0.01)}
    assert [c.title for c in charts["claims"].columns] == ["eng-charts: 0 claims held"]
    html = response.content.decode()
    assert html.count('class="weft-chart weft-chart-') == 5


@pytest.mark.django_db
def test_the_steps_chart_reads_only_the_newest_events(
    admin_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from weft_django.ownership import db_now

    monkeypatch.setattr(activity, "STEP_SAMPLE", 3)
    now = db_now()
    run = WorkflowRunFactory()
    WorkflowEvent.objects.bulk_create(
        [
            WorkflowEvent(
                run=run,
                seq=seq,
                kind="step",
                name="s",
                created_at=now - timedelta(minutes=50 - seq),
            )
            for seq in range(1, 6)
        ]
    )
    charts = {c.name: c for c in activity.activity_charts(now, [], using="default")}
    assert charts["steps"].total == 3 and "from the newest 3 events" in charts["steps"].note


# -- plans on PostgreSQL ---------------------------------------------------------------------

RUNS = 30_000


def load_runs(count: int) -> None:
    """``count`` runs over the last 30 days, a third finished (completed or
    failed), 10 events each for the newest tenth, in bulk, no ANALYZE."""
    run = connection.ops.quote_name(WorkflowRun._meta.db_table)
    events = connection.ops.quote_name(WorkflowEvent._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {run} (id, workflow_name, workflow_version, status, args, kwargs, "
            "parent_id, created_at, updated_at, finished_at) "
            "SELECT 'x-' || n, 't.wf', 1, CASE WHEN n %% 3 = 0 THEN 'completed' "
            "WHEN n %% 3 = 1 THEN 'failed' ELSE 'waiting' END, '[]', '{}', '', "
            "now() - interval '30 days' * (n::float / %s), now(), "
            "CASE WHEN n %% 3 < 2 THEN now() - interval '30 days' * (n::float / %s) END "
            "FROM generate_series(0, %s) n",
            [count, count, count - 1],
        )
        cursor.execute(
            f"INSERT INTO {events} (run_id, seq, kind, name, engine_id, epoch, created_at) "
            "SELECT 'x-' || n, e, 'step', 's', 'A', 1, now() - interval '1 second' * n "
            "FROM generate_series(0, %s) n CROSS JOIN generate_series(1, 10) e",
            [count // 10],
        )


def explain(sql: str, params: Any) -> list[dict[str, Any]]:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        (raw,) = cursor.fetchone()
    plan = raw if isinstance(raw, list) else json.loads(raw)
    return plan_nodes(plan[0]["Plan"])


@dataclass
class Statement:
    sql: str
    params: Any


def chart_statements(now: datetime) -> list[tuple[str, Statement]]:
    since, until = activity.window(now)
    newest, low, _ = activity.step_bounds("default")
    assert newest is not None and low
    found = []
    for name, queryset in (
        ("started", activity.started_query(since, until, "default")),
        ("finished", activity.finished_query(since, until, "default")),
        ("steps", activity.steps_query(since, until, low, newest, "default")),
    ):
        field = "finished_at" if name == "finished" else "created_at"
        extra = ("status",) if name == "finished" else ()
        grouped = activity.counted_per_minute(queryset, field, *extra)
        sql, params = grouped.query.sql_with_params()
        found.append((name, Statement(sql, params)))
    return found


INDEXES = {
    "started": {"weft_run_created_idx"},
    "finished": {"weft_run_finished_idx", "weft_run_failed_idx"},
    "steps": {f"{WorkflowEvent._meta.db_table}_pkey"},
}


@pytest.mark.postgres
def test_postgresql_counts_the_last_hour_off_indexes(
    db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after a bulk load (no statistics) and after ANALYZE, each chart
    statement is a range scan on its index, never a sequential scan; the
    steps' bounds walk the primary key backwards (a sample a thirtieth of the
    events, as 50,000 is of bench/admin_pages.py's 10,000,000 and more)."""
    from weft_django.ownership import db_now

    monkeypatch.setattr(activity, "STEP_SAMPLE", 1_000)

    load_runs(RUNS)
    for analyzed in (False, True):
        if analyzed:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"ANALYZE {WorkflowRun._meta.db_table}, {WorkflowEvent._meta.db_table}"
                )
        for name, statement in chart_statements(db_now()):
            nodes = explain(statement.sql, statement.params)
            assert not [n for n in nodes if n["Node Type"] == "Seq Scan"], (name, analyzed, nodes)
            # An index scan, or a bitmap of the index's range: driven by the index.
            used = {n["Index Name"] for n in nodes if "Index Name" in n}
            assert used and used <= INDEXES[name], (name, analyzed, used)
        with CaptureQueriesContext(connection) as queries:
            activity.step_bounds("default")
        (bounds,) = queries.captured_queries
        nodes = explain(bounds["sql"], None)
        assert not [n for n in nodes if n["Node Type"] in ("Seq Scan", "Sort")], nodes
