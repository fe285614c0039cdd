"""Days and time zones end to end (issue 17 item 2): exchanges recorded around DST changes appear on the
right local days in the calendar, under `day=` on search and on export; unknown conversations answer 404."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
import pytest

from memlog.config.settings import Settings
from tests.e2e.conftest import StartMemlog

TENANT = "castle-tz"
HOUR = 3_600_000
OPS = ("compact", "reset", "rename", "fork", "archive")


def utc(text: str) -> int:
    return int(dt.datetime.fromisoformat(text + "+00:00").timestamp() * 1000)


# Berlin sets its clocks back on 2026-10-25 at 03:00 (01:00 UTC): that day is 25 hours long
AUTUMN = {
    "before": utc("2026-10-24T21:30"),  # Berlin 24th 23:30 · New York 24th 17:30
    "midnight": utc("2026-10-24T22:30"),  # Berlin 25th 00:30
    "first": utc("2026-10-25T00:30"),  # Berlin 25th 02:30 CEST
    "second": utc("2026-10-25T01:30"),  # Berlin 25th 02:30 CET, the hour again
    "late": utc("2026-10-25T22:30"),  # Berlin 25th 23:30 · New York 25th 18:30
    "next": utc("2026-10-25T23:30"),  # Berlin 26th 00:30
    "long ago": utc("2024-01-10T12:00"),  # more than 366 days before: on the calendar's next page
}
# ...and forward on 2026-03-29 at 02:00 (01:00 UTC): 23 hours; New York on 2026-03-08 at 07:00 UTC
SPRING = {
    "berlin start": utc("2026-03-28T23:30"),  # Berlin 29th 00:30 CET
    "berlin end": utc("2026-03-29T21:30"),  # Berlin 29th 23:30 CEST
    "berlin after": utc("2026-03-29T22:30"),  # Berlin 30th 00:30
    "new york before": utc("2026-03-08T04:30"),  # New York 7th 23:30 EST
    "new york start": utc("2026-03-08T05:30"),  # New York 8th 00:30 EST
    "new york end": utc("2026-03-09T03:30"),  # New York 8th 23:30 EDT
}


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    return start_memlog()


def thread(subject: str) -> str:
    return f"/v1/tenants/{TENANT}/threads/session:{subject}"


async def record(http: httpx.AsyncClient, subject: str, times: dict[str, int]) -> str:
    """One exchange per time, the question naming it; the last position, once the archive has it."""
    position = ""
    for name, at in times.items():
        body = {"tenant": TENANT, "subject": subject, "question": f"lantern {name}", "answer": "ok", "occurred_at": at}
        accepted = await http.post("/v1/exchanges", json=body)
        assert accepted.status_code == 202, accepted.text
        position = accepted.json()["position"]
    listed = await http.get(f"{thread(subject)}/conversations", params={"after": position, "wait": 30})
    assert listed.status_code == 200, listed.text
    return position


async def get(http: httpx.AsyncClient, path: str, **params: Any) -> dict[str, Any]:
    response = await http.get(path, params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def counts(calendar: dict[str, Any]) -> list[tuple[str, int, float]]:
    return [(d["day"], d["entries"], (d["end"] - d["start"]) / HOUR) for d in calendar["days"]]


async def test_the_calendar_puts_entries_on_their_local_days_across_dst(http: httpx.AsyncClient) -> None:
    s = "autumn-ann"
    await record(http, s, AUTUMN)
    berlin = await get(http, f"{thread(s)}/calendar", tz="Europe/Berlin")
    assert berlin["tz"] == "Europe/Berlin"
    assert counts(berlin) == [("2026-10-26", 2, 24), ("2026-10-25", 8, 25), ("2026-10-24", 2, 24)]
    new_york = await get(http, f"{thread(s)}/calendar", tz="America/New_York")
    assert counts(new_york)[:2] == [("2026-10-25", 4, 24), ("2026-10-24", 8, 24)]
    default = await get(http, f"{thread(s)}/calendar")  # UTC
    assert counts(default)[:2] == [("2026-10-25", 8, 24), ("2026-10-24", 4, 24)]
    # at most 366 days an answer: the entry of 2024 is on the next page, the empty months skipped
    assert berlin["next_cursor"] is not None
    older = await get(http, f"{thread(s)}/calendar", tz="Europe/Berlin", cursor=berlin["next_cursor"])
    assert counts(older) == [("2024-01-10", 2, 24)] and older["next_cursor"] is None
    refused = await http.get(
        f"{thread(s)}/calendar", params={"tz": "America/New_York", "cursor": berlin["next_cursor"]}
    )
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"][-1] == "cursor"
    # since/until cut the days: from the start of Berlin's 25th
    since = AUTUMN["midnight"] - 30 * 60_000
    cut = await get(http, f"{thread(s)}/calendar", tz="Europe/Berlin", since=since)
    assert counts(cut) == [("2026-10-26", 2, 24), ("2026-10-25", 8, 25)] and cut["next_cursor"] is None
    unknown = await http.get(f"{thread(s)}/calendar", params={"conversation": "no-such"})
    assert unknown.status_code == 404 and "no-such" in unknown.text


async def test_the_calendar_across_spring_changes(http: httpx.AsyncClient) -> None:
    s = "spring-ann"
    await record(http, s, SPRING)
    berlin = counts(await get(http, f"{thread(s)}/calendar", tz="Europe/Berlin"))
    assert ("2026-03-29", 4, 23) in berlin and ("2026-03-30", 2, 24) in berlin
    new_york = counts(await get(http, f"{thread(s)}/calendar", tz="America/New_York"))
    assert ("2026-03-08", 4, 23) in new_york and ("2026-03-07", 2, 24) in new_york


async def test_day_filters_search_and_export_by_the_local_day(http: httpx.AsyncClient) -> None:
    s = "filter-ann"
    await record(http, s, AUTUMN)
    found = await get(http, f"{thread(s)}/search", q="lantern", day="2026-10-25", tz="Europe/Berlin", neighbours=0)
    on_day = {AUTUMN["midnight"], AUTUMN["first"], AUTUMN["second"], AUTUMN["late"]}
    assert {r["occurred_at"] for r in found["results"]} == on_day
    in_new_york = await get(http, f"{thread(s)}/search", q="lantern", day="2026-10-25", tz="America/New_York")
    assert {r["occurred_at"] for r in in_new_york["results"]} == {AUTUMN["late"], AUTUMN["next"]}
    # with since/until: the intersection (here: from the repeated hour on)
    narrowed = await get(
        http, f"{thread(s)}/search", q="lantern", day="2026-10-25", tz="Europe/Berlin", since=AUTUMN["second"]
    )
    assert {r["occurred_at"] for r in narrowed["results"]} == {AUTUMN["second"], AUTUMN["late"]}
    exported = await get(http, f"{thread(s)}/conversations/main/export", day="2026-10-25", tz="Europe/Berlin")
    assert [e["occurred_at"] for e in exported["entries"]] == sorted(t for t in on_day for _ in "qa")
    assert [e["role"] for e in exported["entries"]] == ["question", "answer"] * 4
    paged = await get(http, f"{thread(s)}/conversations/main/export", day="2026-10-25", tz="Europe/Berlin", limit=3)
    rest = await get(
        http,
        f"{thread(s)}/conversations/main/export",
        day="2026-10-25",
        tz="Europe/Berlin",
        limit=3,
        cursor=paged["next_cursor"],
    )
    assert [e["entry_id"] for e in paged["entries"] + rest["entries"]] == [e["entry_id"] for e in exported["entries"]][
        :6
    ]
    undated = await http.get(f"{thread(s)}/conversations/main/export", params={"cursor": paged["next_cursor"]})
    assert undated.status_code == 422 and undated.json()["detail"][0]["loc"][-1] == "cursor"
    utc_day = await get(http, f"{thread(s)}/conversations/main/export", day="2026-10-25")  # UTC by default
    assert {e["occurred_at"] for e in utc_day["entries"]} == {
        AUTUMN["first"],
        AUTUMN["second"],
        AUTUMN["late"],
        AUTUMN["next"],
    }


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"tz": "Mars/Olympus"}, "tz"),
        ({"tz": "../../etc/passwd", "day": "2026-10-25"}, "tz"),
        ({"day": "2026-13-01"}, "day"),
        ({"day": "25.10.2026", "tz": "Europe/Berlin"}, "day"),
    ],
)
async def test_an_unknown_zone_or_a_malformed_day_is_refused_naming_it(
    http: httpx.AsyncClient, params: dict[str, str], field: str
) -> None:
    for path, extra in (
        (f"{thread('any-ann')}/search", {"q": "lantern"}),
        (f"{thread('any-ann')}/conversations/main/export", {}),
        (f"{thread('any-ann')}/calendar", {}),
    ):
        if "day" in params and path.endswith("/calendar"):
            continue  # the calendar takes no day
        response = await http.get(path, params={**extra, **params})
        assert response.status_code == 422, (path, response.text)
        assert response.json()["detail"][0]["loc"][-1] == field, (path, response.text)


async def test_an_unknown_conversation_answers_404_naming_it(http: httpx.AsyncClient) -> None:
    s = "ghost-ann"
    await record(http, s, {"only": utc("2026-10-24T12:00")})
    base = f"{thread(s)}/conversations/nowhere"
    for method, path, body in (
        ("GET", f"{base}/export", None),
        ("GET", f"{thread(s)}/search?q=lantern&conversation=nowhere", None),
        ("POST", f"{base}/compact", None),
        ("POST", f"{base}/reset", {}),
        ("POST", f"{base}/rename", {"target": "elsewhere"}),
        ("POST", f"{base}/fork", {"target": "elsewhere"}),
        ("POST", f"{base}/archive", {"archived": True}),
    ):
        response = await http.request(method, path, json=body)
        assert response.status_code == 404, (method, path, response.text)
        assert "'nowhere'" in response.json()["detail"][0]["msg"], response.text
    spec = (await http.get("/openapi.json")).json()["paths"]
    for path, method in (
        ("/v1/tenants/{tenant}/threads/{thread}/calendar", "get"),
        ("/v1/tenants/{tenant}/threads/{thread}/search", "get"),
        ("/v1/tenants/{tenant}/threads/{thread}/conversations/{conversation}/export", "get"),
        *((f"/v1/tenants/{{tenant}}/threads/{{thread}}/conversations/{{conversation}}/{op}", "post") for op in OPS),
    ):
        assert "404" in spec[path][method]["responses"], (path, method)
    # main always exists, empty until its first entry; a subject never seen reads as empty
    assert (await get(http, f"{thread('never-ann')}/conversations/main/export"))["entries"] == []
    assert (await get(http, f"{thread('never-ann')}/calendar"))["days"] == []
