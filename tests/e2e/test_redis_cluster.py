"""memlog on a local 3-master Redis Cluster (`MEMLOG_REDIS_CLUSTER=true`): the worker projects sessions and
shared threads into it, the API reads them back, and an erasure removes the subject's keys."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from memlog.adapters.connections import redis_client
from memlog.config.settings import Settings
from tests.e2e.conftest import memlog, own_settings

TENANT = "cluster"

# redis-py's cluster client closes its node connections without waiting for their sockets, which
# Python reports, after the test, as an unclosed stream; nothing leaks while the client is in use.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture(scope="module")
def live(stack: Settings, redis_cluster: str) -> Iterator[Settings]:
    settings = own_settings(stack, redis_url=redis_cluster, redis_cluster=True)
    with memlog(settings):
        yield settings


async def test_sessions_and_shared_threads_live_in_the_cluster_and_erasure_clears_them(
    http: httpx.AsyncClient, live: Settings
) -> None:
    tokens = []
    for subject in ("ann", "bob", "cy"):
        for n in range(3):
            body = {"tenant": TENANT, "subject": subject, "question": f"{subject} asks {n}", "answer": f"reply {n}"}
            recorded = await http.post("/v1/exchanges", json=body)
            assert recorded.status_code == 202, recorded.text
            tokens.append(recorded.json()["position"])
        public = {"tenant": TENANT, "subject": subject, "thread": "public", "question": f"{subject} to all"}
        recorded = await http.post("/v1/exchanges", json=public)
        assert recorded.status_code == 202, recorded.text
        tokens.append(recorded.json()["position"])
    waited = {"after": ",".join(tokens), "wait": 30}
    for subject in ("ann", "bob", "cy"):
        read = await http.get(f"/v1/tenants/{TENANT}/subjects/{subject}/context", params=waited)
        assert read.status_code == 200, read.text
        assert [e["question"] for e in read.json()["exchanges"]] == [f"{subject} asks {n}" for n in range(3)]
    shared = (await http.get(f"/v1/tenants/{TENANT}/public/context", params=waited)).json()
    assert [e["question"] for e in shared["exchanges"]] == ["ann: ann to all", "bob: bob to all", "cy: cy to all"]

    client = redis_client(live)
    try:
        keys = [key async for key in client.scan_iter(match=f"{live.redis_prefix}:*")]
        nodes = {client.get_node_from_key(key).name for key in keys}  # type: ignore[attr-defined]
        assert len(nodes) > 1, nodes  # the threads are spread over the cluster's masters

        erased = await http.post(f"/v1/tenants/{TENANT}/subjects/bob/erase")
        assert erased.status_code == 200 and erased.json()["done"] is True, erased.text
        left = [key async for key in client.scan_iter(match=f"{live.redis_prefix}:*")]
        assert not [key for key in left if b"bob" in key]
    finally:
        await client.aclose()
    read = (await http.get(f"/v1/tenants/{TENANT}/subjects/bob/context")).json()
    assert read["exchanges"] == []
    shared = (await http.get(f"/v1/tenants/{TENANT}/public/context")).json()
    assert [e["question"] for e in shared["exchanges"]] == ["ann: ann to all", "cy: cy to all"]
