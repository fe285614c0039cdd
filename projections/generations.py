"""Main's older generations (issue 36): the age limit of what folds and resets took out of the current
conversation's transcript, pure rules.

A generation is what one fold or reset took out of a conversation's transcript: its entries share the
offset of that operation (`taken_at`; in MongoDB no archive group spans a thread operation, so a group's
entries share it too). Retention never purges `main` itself (seed 004), but once enabled it purges main's
generations `RetentionPolicy.generation_ms` after their newest entry, oldest first, with a `ThreadPurged`
naming the newest offset due (`generations_until`): the transcript, and so a running exchange, stays.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from projections.archives import NEVER, ConversationMeta, Entry, RetentionPolicy
from schemas.events import MAIN_CONVERSATION


def taken_at(entry: Entry) -> int:
    """The offset of the fold or reset that took the entry out of the transcript; NEVER while it is in it.
    Every entry of one archive group shares it: no group spans a thread operation."""
    return min(entry.compacted_at, entry.reset_at)


@dataclass(frozen=True)
class GenerationAge:
    """One generation of a conversation: the entries one fold or reset took out of its transcript."""

    taken_at: int  # that fold's or reset's offset
    newest: int  # occurred_at of its newest entry: where its lifetime starts
    entries: int


def generation_ages(entries: Iterable[Entry]) -> list[GenerationAge]:
    """The generations the entries make, oldest first (entries still in the transcript make none)."""
    newest: dict[int, int] = {}
    count: dict[int, int] = {}
    for entry in entries:
        taken = taken_at(entry)
        if taken != NEVER:
            newest[taken] = max(newest.get(taken, entry.occurred_at), entry.occurred_at)
            count[taken] = count.get(taken, 0) + 1
    return [GenerationAge(taken, newest[taken], count[taken]) for taken in sorted(newest)]


def generations_due(ages: Sequence[GenerationAge], keep_ms: int, now_ms: int) -> GenerationAge | None:
    """The newest of the oldest generations that have all lived `keep_ms` (a purge up to its offset takes
    them); None when the oldest has not."""
    due = None
    for age in sorted(ages, key=lambda a: a.taken_at):
        if now_ms - age.newest < keep_ms:
            break
        due = age
    return due


def generations_kept(meta_generations: Sequence[str], remaining: Iterable[Entry]) -> tuple[str, ...]:
    """A conversation's generations once some are purged: those an entry left still belongs to."""
    held = {name for entry in remaining for name in entry.archives}
    return tuple(name for name in meta_generations if name in held)


def generations_reason(meta: ConversationMeta, policy: RetentionPolicy) -> str | None:
    """Why main's older generations are kept whatever their age; None when their age limit applies."""
    if not policy.enabled:
        return "retention is disabled"
    if meta.ref.conversation != MAIN_CONVERSATION:
        return "not the current conversation (its generations go with it)"
    if meta.protected:
        return "protected"
    if not meta.generations:
        return "no generations"
    return None
