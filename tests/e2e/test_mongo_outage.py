"""No hidden fallback (seed 004): a search while MongoDB is away answers 503, never an empty 200.

The test starts a MongoDB-protocol server of its own (SecantusDB, on a free port, in a temporary folder),
points a worker and an API at it, and stops it: the shared local stack's server is never touched."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlog.config.settings import Settings
from memlog.dev.localstack import port_open
from memlog.dev.processes import free_port
from tests.e2e.conftest import api_client, memlog, own_settings

TENANT = "castle-outage"
SUBJECT = "ivy"
WAIT_SECONDS = 60


@pytest.fixture(scope="module")
def own_mongo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = free_port()
    binary = Path(sys.executable).parent / "secantusd-py"
    command = [str(binary), "--host", "127.0.0.1", "--port", str(port), "--standalone"]
    command += ["--storage-path", str(tmp_path_factory.mktemp("mongo")), "--log-level", "WARNING"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(WAIT_SECONDS * 10):
        if port_open(port):
            break
        assert process.poll() is None, "the test's own SecantusDB did not start"
        asyncio.run(asyncio.sleep(0.1))
    yield process, port
    if process.poll() is None:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def live(stack: Settings, own_mongo: tuple[subprocess.Popen[bytes], int]) -> Iterator[Settings]:
    _, port = own_mongo
    settings = own_settings(stack, mongo_url=f"mongodb://127.0.0.1:{port}/?directConnection=true")
    assert str(stack.local_mongo_port) not in settings.mongo  # never the shared server
    with memlog(settings):
        yield settings


async def test_a_search_during_a_mongodb_outage_answers_503_never_an_empty_200(
    live: Settings, own_mongo: tuple[subprocess.Popen[bytes], int]
) -> None:
    searches = (
        f"/v1/tenants/{TENANT}/threads/session:{SUBJECT}/search",
        f"/v1/tenants/{TENANT}/search",
    )
    async with api_client(live) as http:
        body = {"tenant": TENANT, "subject": SUBJECT, "question": "where is the amber key?", "answer": "in the well"}
        accepted = await http.post("/v1/exchanges", json=body)
        assert accepted.status_code == 202, accepted.text
        after = accepted.json()["position"]
        for route in searches:  # while MongoDB is up, the search finds it
            found = await http.get(route, params={"q": "amber key", "after": after})
            assert found.status_code == 200 and found.json()["results"], (route, found.text)

        process, port = own_mongo
        process.terminate()
        process.wait()
        assert not port_open(port)
        for route in searches:
            response = await http.get(route, params={"q": "amber key"})
            assert response.status_code == 503, (route, response.status_code, response.text[:300])
            assert response.headers.get("retry-after"), route  # the client is told to come back, not "nothing"
