"""Local days in IANA zones (projections/calendar.py): bounds across DST changes, bucketing, windows."""

from __future__ import annotations

import datetime as dt
import itertools
import zoneinfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.calendar import (
    DAY_MS,
    FIRST_MS,
    LAST_MS,
    MAX_CALENDAR_DAYS,
    calendar_window,
    count_days,
    day_bounds,
    day_of,
    day_start,
    narrow,
    parse_day,
    zone,
)
from schemas.errors import InvalidEvent

HOUR = 3_600_000
BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
NEW_YORK = zoneinfo.ZoneInfo("America/New_York")
ZONES = sorted(zoneinfo.available_timezones())
# 1900..2100: the zones' recorded history and their rules going forward
instants = st.integers(-2_208_988_800_000, 4_102_444_800_000)


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp() * 1000)


@pytest.mark.parametrize(
    ("tz", "day", "hours", "start"),
    [
        (BERLIN, "2026-03-29", 23, "2026-03-28T23:00:00+00:00"),  # spring forward: 02:00 -> 03:00
        (BERLIN, "2026-10-25", 25, "2026-10-24T22:00:00+00:00"),  # fall back: 03:00 -> 02:00
        (BERLIN, "2026-03-28", 24, "2026-03-27T23:00:00+00:00"),
        (BERLIN, "2026-10-26", 24, "2026-10-25T23:00:00+00:00"),
        (NEW_YORK, "2026-03-08", 23, "2026-03-08T05:00:00+00:00"),
        (NEW_YORK, "2026-11-01", 25, "2026-11-01T04:00:00+00:00"),
        (zoneinfo.ZoneInfo("UTC"), "2026-03-29", 24, "2026-03-29T00:00:00+00:00"),
    ],
)
def test_a_day_across_a_dst_change_is_23_or_25_hours(tz: dt.tzinfo, day: str, hours: int, start: str) -> None:
    begin, end = day_bounds(parse_day(day), tz)
    assert begin == ms(start)
    assert end - begin == hours * HOUR
    assert day_of(begin, tz) == parse_day(day)
    assert day_of(end - 1, tz) == parse_day(day)
    assert day_of(begin - 1, tz) == parse_day(day) - dt.timedelta(days=1)
    assert day_of(end, tz) == parse_day(day) + dt.timedelta(days=1)


def test_the_hour_berlin_repeats_belongs_to_the_day_it_is_on() -> None:
    # 2026-10-25 02:30 happens twice in Berlin (00:30 and 01:30 UTC): both are on the 25th
    assert day_of(ms("2026-10-25T00:30:00+00:00"), BERLIN) == dt.date(2026, 10, 25)
    assert day_of(ms("2026-10-25T01:30:00+00:00"), BERLIN) == dt.date(2026, 10, 25)
    # 23:30 UTC on the 24th is 01:30 local on the 25th; 21:59 UTC is still the 24th
    assert day_of(ms("2026-10-24T23:30:00+00:00"), BERLIN) == dt.date(2026, 10, 25)
    assert day_of(ms("2026-10-24T21:59:59+00:00"), BERLIN) == dt.date(2026, 10, 24)


def test_a_skipped_date_is_an_empty_day() -> None:
    apia = zoneinfo.ZoneInfo("Pacific/Apia")  # 2011-12-29 23:59 -10 was followed by 2011-12-31 00:00 +14
    begin, end = day_bounds(dt.date(2011, 12, 30), apia)
    assert begin == end
    assert day_bounds(dt.date(2011, 12, 29), apia)[1] == begin


def test_a_jump_across_midnight_starts_the_day_at_the_jump() -> None:
    toronto = zoneinfo.ZoneInfo("America/Toronto")  # 1919-03-30 23:30 -> 1919-03-31 00:30
    start = day_start(dt.date(1919, 3, 31), toronto)
    assert day_of(start, toronto) == dt.date(1919, 3, 31)
    assert day_of(start - 1, toronto) == dt.date(1919, 3, 30)


@given(st.sampled_from(ZONES), instants)
def test_every_instant_is_in_the_bounds_of_its_day(name: str, instant: int) -> None:
    tz = zoneinfo.ZoneInfo(name)
    day = day_of(instant, tz)
    begin, end = day_bounds(day, tz)
    assert begin <= instant < end
    assert end - begin <= 2 * DAY_MS


@given(st.sampled_from(ZONES), st.dates(dt.date(1900, 1, 1), dt.date(2100, 1, 1)))
def test_days_follow_one_another(name: str, day: dt.date) -> None:
    tz = zoneinfo.ZoneInfo(name)
    begin, end = day_bounds(day, tz)
    assert begin <= end == day_start(day + dt.timedelta(days=1), tz)
    if begin < end:
        assert day_of(begin, tz) == day
        assert day_of(end - 1, tz) == day


@given(st.lists(instants, max_size=40), st.sampled_from(["Europe/Berlin", "America/New_York", "Asia/Kolkata", "UTC"]))
def test_counting_by_day_matches_the_bounds_of_each_day(times: list[int], name: str) -> None:
    tz = zoneinfo.ZoneInfo(name)
    counts = count_days(times, tz)
    assert sum(counts.values()) == len(times)
    for day, n in counts.items():
        begin, end = day_bounds(day, tz)
        assert n == sum(begin <= t < end for t in times)


def test_instants_outside_the_calendar_land_on_its_first_or_last_day() -> None:
    assert day_of(-(2**62), BERLIN) == day_of(FIRST_MS, BERLIN)
    assert day_of(2**62, BERLIN) == day_of(LAST_MS, BERLIN)


@pytest.mark.parametrize(
    "name",
    [
        *("Mars/Olympus", "", " Europe/Berlin", "../etc/passwd", "/etc/localtime", "x" * 300),
        # issue 41: names the zone database holds that are no Area/Location: the server's own zone and others
        *("localtime", "posixrules", "Factory", "US/Eastern", "EST5EDT", "GMT", "Etc/GMT+5", "Europe/../localtime"),
    ],
)
def test_an_unknown_zone_is_refused_naming_tz(name: str) -> None:
    with pytest.raises(InvalidEvent) as refused:
        zone(name)
    assert refused.value.field == "tz"


def test_no_zone_means_utc() -> None:
    assert zone(None).key == "UTC"
    assert zone("Europe/Berlin").key == "Europe/Berlin"
    assert zone("UTC").key == "UTC"
    assert zone("America/Argentina/Buenos_Aires").key == "America/Argentina/Buenos_Aires"


WIDE_DIGITS = "\uff12\uff10\uff12\uff16-01-01"  # digits, to str.isdigit, but not [0-9]


@pytest.mark.parametrize("text", ["2026-3-29", "2026-02-30", "29.03.2026", "2026-03-29T00:00", WIDE_DIGITS, ""])
def test_a_malformed_day_is_refused_naming_day(text: str) -> None:
    with pytest.raises(InvalidEvent) as refused:
        parse_day(text)
    assert refused.value.field == "day"


def test_a_day_narrows_since_and_until_by_intersection() -> None:
    begin, end = day_bounds(dt.date(2026, 3, 29), BERLIN)
    assert narrow(None, None, "2026-03-29", "Europe/Berlin") == (begin, end)
    assert narrow(begin + 5, None, "2026-03-29", "Europe/Berlin") == (begin + 5, end)
    assert narrow(0, end + 5, "2026-03-29", "Europe/Berlin") == (begin, end)
    assert narrow(1, 2, None, None) == (1, 2)
    since, until = narrow(end + 10, None, "2026-03-29", "Europe/Berlin")  # disjoint: matches nothing
    assert since is not None and until is not None and since >= until
    with pytest.raises(InvalidEvent):
        narrow(None, None, None, "Nowhere/Land")  # the zone is checked even without a day


def test_a_window_spans_at_most_366_days_ending_with_the_newest() -> None:
    newest = ms("2026-10-25T12:00:00+00:00")
    window = calendar_window(newest, FIRST_MS, LAST_MS, BERLIN)
    assert len(window.days) == MAX_CALENDAR_DAYS
    assert window.days[-1] == dt.date(2026, 10, 25)
    assert window.days[0] == dt.date(2026, 10, 25) - dt.timedelta(days=MAX_CALENDAR_DAYS - 1)
    assert len(window.bounds) == len(window.days) + 1
    assert list(window.bounds) == sorted(set(window.bounds))
    for day, begin, end in zip(window.days, window.bounds, window.bounds[1:], strict=False):
        assert (begin, end) == day_bounds(day, BERLIN)


def test_a_window_is_cut_to_the_range() -> None:
    since, until = ms("2026-03-28T12:00:00+00:00"), ms("2026-03-29T12:00:00+00:00")
    window = calendar_window(until - 1, since, until, BERLIN)
    assert window.days == (dt.date(2026, 3, 28), dt.date(2026, 3, 29))
    assert window.bounds == (since, day_start(dt.date(2026, 3, 29), BERLIN), until)


@given(instants, st.integers(0, 800 * DAY_MS), st.integers(0, 800 * DAY_MS), st.integers(1, 400))
def test_a_window_covers_contiguous_days_inside_the_range(since: int, span: int, back: int, days: int) -> None:
    until = since + span + 1
    newest = max(since, until - 1 - back)
    window = calendar_window(newest, since, until, NEW_YORK, days)
    assert 1 <= len(window.days) <= days
    assert window.bounds[0] >= since and window.bounds[-1] <= until
    assert all(a < b for a, b in itertools.pairwise(window.bounds))
    assert window.bounds[0] <= newest < window.bounds[-1]
    assert list(window.days) == [window.days[0] + dt.timedelta(days=n) for n in range(len(window.days))]
