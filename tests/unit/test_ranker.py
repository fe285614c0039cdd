"""A search's ranking in processes of its own (memlog/app/ranker.py): the same page as in a thread, and a
killed process costs the search nothing."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator

import pytest

from memlog.app.ranker import Ranker, centres
from memlog.app.search import CrossSearch
from tests.unit.test_search_across import CURSORS, world


@pytest.fixture
async def ranker() -> AsyncIterator[Ranker]:
    pool = Ranker(workers=1)
    yield pool
    pool.close()


async def test_a_search_ranked_in_processes_reads_as_one_ranked_in_a_thread(ranker: Ranker) -> None:
    archive, in_thread, _ = await world()
    apart = CrossSearch(archive, archive, archive.checkpoints, cursors=CURSORS, ranker=ranker)
    for query in ("red chest", "bread", "forge"):
        assert await apart.agent("castle", "smith", query) == await in_thread.agent("castle", "smith", query)
        assert await apart.tenant("castle", query) == await in_thread.tenant("castle", query)
    assert await ranker.run(os.getpid) != os.getpid()  # it did run elsewhere
    assert await ranker.run(os.nice, 0) > 0  # below the API's priority


async def test_a_killed_ranking_process_costs_the_search_nothing(ranker: Ranker) -> None:
    worker = await ranker.run(os.getpid)
    os.kill(worker, signal.SIGKILL)
    # the pool breaks: this call still answers (in a thread), the next one in a new process
    assert await ranker.run(centres, "red chest", ["a red chest", "none"]) == [2, 0]
    assert await ranker.run(os.getpid) not in (worker, os.getpid())
