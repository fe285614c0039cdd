"""The Counters contract, run against every implementation.

The contract suite; the test module test_counters.py runs it against each adapter."""

from __future__ import annotations

from collections.abc import Callable

from projections.ports import Counters

Open = Callable[[str], Counters]  # the counters of a namespace


class CountersContract:
    async def test_nothing_is_counted_at_first(self, open_counters: Open) -> None:
        assert await open_counters("live").dead_letters() == {}

    async def test_dead_letters_are_counted_per_source_topic(self, open_counters: Open) -> None:
        counters = open_counters("live")
        for topic in ["memlog.threads", "memlog.facts", "memlog.threads"]:
            await counters.count_dead_letter(topic)
        assert await counters.dead_letters() == {"memlog.threads": 2, "memlog.facts": 1}

    async def test_namespaces_count_apart(self, open_counters: Open) -> None:
        await open_counters("live").count_dead_letter("memlog.threads")
        await open_counters("rebuilt").count_dead_letter("memlog.facts")
        assert await open_counters("live").dead_letters() == {"memlog.threads": 1}
        assert await open_counters("rebuilt").dead_letters() == {"memlog.facts": 1}
