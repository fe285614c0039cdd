"""Days and time zones: pure rules (seed 004: "Calendar availability is calculated from retained rows;
day filters use the supplied timezone").

A local day in an IANA zone is the interval of instants [start(d), start(d + 1)), where start(d) is
the first instant at which the zone's clocks read midnight of d (the earlier one when midnight happens
twice; where midnight is skipped, the instant the clocks jump past it). So days partition the
timeline: every instant belongs to exactly one day, a day is 23 or 25 hours long across a DST change
(or empty, when a zone skips a whole date), and counting entries per day and filtering one day agree.

Times are epoch milliseconds, as every event's `occurred_at`. No I/O beyond the zone data zoneinfo
reads (the tzdata package, or the system's).
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from schemas.errors import InvalidEvent

DEFAULT_ZONE = "UTC"
DAY_MS = 86_400_000
MAX_CALENDAR_DAYS = 366  # days one calendar answer spans at most; older days are on the next page
# the dates a calendar speaks of: datetime's range with a day to spare at either end for any offset
FIRST_DAY = dt.date(2, 1, 1)
LAST_DAY = dt.date(9998, 12, 31)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MS = dt.timedelta(milliseconds=1)
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_ZONE_NAME_MAX = 255
_AREAS = ("Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific")
_AREA_LOCATION = re.compile(rf"(?:{'|'.join(_AREAS)})(?:/[A-Za-z][A-Za-z0-9_+-]*){{1,2}}")


def zone(name: str | None) -> zoneinfo.ZoneInfo:
    """An IANA zone by name (`Europe/Berlin`); None means UTC. 422 naming `tz` when there is no such zone.

    Only `UTC` and the Area/Location names of the IANA database's geographic areas (issue 41): not
    `localtime` (the server's own zone), `posixrules`, `Factory`, nor the backward links (`US/Eastern`)."""
    key = DEFAULT_ZONE if name is None else name
    if len(key) > _ZONE_NAME_MAX or not (key == DEFAULT_ZONE or _AREA_LOCATION.fullmatch(key)):
        raise InvalidEvent("tz", f"{key!r} is not an IANA time zone (UTC, or Area/City, e.g. Europe/Berlin)")
    try:
        return zoneinfo.ZoneInfo(key)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidEvent("tz", f"{key!r} is not an IANA time zone (Area/City, e.g. Europe/Berlin)") from None


def parse_day(text: str) -> dt.date:
    """`YYYY-MM-DD`, a real date; 422 naming `day` otherwise."""
    if not _DAY.fullmatch(text):
        raise InvalidEvent("day", f"{text!r} is not a date as YYYY-MM-DD")
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        raise InvalidEvent("day", f"{text!r} is not a date") from None
    if not FIRST_DAY <= day <= LAST_DAY:
        raise InvalidEvent("day", f"must be from {FIRST_DAY.isoformat()} to {LAST_DAY.isoformat()}")
    return day


def _ms(moment: dt.datetime) -> int:
    return (moment - _EPOCH) // _MS


FIRST_MS = _ms(dt.datetime.combine(FIRST_DAY, dt.time(0), tzinfo=dt.UTC))
LAST_MS = _ms(dt.datetime.combine(LAST_DAY, dt.time(0), tzinfo=dt.UTC))


def clamp(ms: int) -> int:
    """An instant moved into the range calendars speak of (entries outside it are on no local day)."""
    return min(max(ms, FIRST_MS), LAST_MS)


def day_start(day: dt.date, tz: dt.tzinfo) -> int:
    """The first instant (epoch ms) of `day` in `tz`: when its clocks first show that date.

    Midnight with fold=0: of two midnights (clocks set back across it), the earlier; a skipped
    midnight (clocks set forward across it) is read with the offset before the jump, which is the
    instant of the jump. A jump from before midnight to after it (Toronto, 1919-03-30 23:30 -> 00:30)
    puts that instant past the jump: then the day starts at the jump.
    """
    start = _ms(dt.datetime.combine(day, dt.time(0), tzinfo=tz))
    if _local_date(start - 1, tz) < day:
        return start
    low, high = start - 2 * DAY_MS, start  # the jump is in between: the date shown is day - 1 at low
    while high - low > 1:
        middle = (low + high) // 2
        if _local_date(middle, tz) < day:
            low = middle
        else:
            high = middle
    return high


def _local_date(ms: int, tz: dt.tzinfo) -> dt.date:
    return (_EPOCH + ms * _MS).astimezone(tz).date()


def day_bounds(day: dt.date, tz: dt.tzinfo) -> tuple[int, int]:
    """[start, end) of `day` in `tz`, epoch ms: 23 h or 25 h long across a DST change."""
    return day_start(day, tz), day_start(day + dt.timedelta(days=1), tz)


def day_of(ms: int, tz: dt.tzinfo) -> dt.date:
    """The local day an instant falls in: the day whose [start, end) holds it (see the module's note)."""
    day = _local_date(clamp(ms), tz)
    while day > FIRST_DAY and clamp(ms) < day_start(day, tz):
        day -= dt.timedelta(days=1)
    while day < LAST_DAY and clamp(ms) >= day_start(day + dt.timedelta(days=1), tz):
        day += dt.timedelta(days=1)
    return day


def count_days(times: Iterable[int], tz: dt.tzinfo) -> dict[dt.date, int]:
    """How many of `times` fall on each local day (the in-memory store's count; MongoDB buckets by day_bounds)."""
    return dict(Counter(day_of(ms, tz) for ms in times))


def narrow(since: int | None, until: int | None, day: str | None, tz_name: str | None) -> tuple[int | None, int | None]:
    """`since`/`until` (epoch ms) intersected with the local day `day` in `tz` (UTC by default).

    The zone is checked even without a day; an empty intersection matches nothing (it is not refused).
    """
    tz = zone(tz_name)
    if day is None:
        return since, until
    start, end = day_bounds(parse_day(day), tz)
    return (start if since is None else max(since, start)), (end if until is None else min(until, end))


@dataclass(frozen=True)
class CalendarWindow:
    """The days one calendar answer covers, newest last, and the instants bounding them.

    `bounds` is strictly ascending: day `days[i]` is [bounds[i], bounds[i + 1]), cut to the query's
    range; days of no length (a zone skipping a date) are left out.
    """

    days: tuple[dt.date, ...]
    bounds: tuple[int, ...]

    @property
    def start(self) -> int:
        return self.bounds[0]


def calendar_window(
    newest: int, since: int, until: int, tz: dt.tzinfo, max_days: int = MAX_CALENDAR_DAYS
) -> CalendarWindow:
    """The newest `max_days` local days of [since, until) that end with the day of `newest` (the newest entry)."""
    if max_days < 1:
        raise InvalidEvent("max_days", "must be at least 1")
    last = day_of(newest, tz)
    first = max(last - dt.timedelta(days=max_days - 1), day_of(since, tz), FIRST_DAY)
    days: list[dt.date] = []
    bounds: list[int] = []
    day = first
    while day <= last:
        start, end = day_bounds(day, tz)
        start, end = max(start, since), min(end, until)
        if start < end:  # consecutive days share a bound: a day's end is the next one's start
            days.append(day)
            bounds.extend([start, end] if not bounds else [end])
        day += dt.timedelta(days=1)
    return CalendarWindow(tuple(days), tuple(bounds))
