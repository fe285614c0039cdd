"""The ledger route pages (issue 17): several erasures read back one or two entries at a time through
the `Next-Cursor` header give the whole ledger once, newest first, and a cursor stays bound to its filter."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from memlog.config.settings import Settings
from tests.e2e.conftest import StartMemlog

TENANT = f"castle-ledger-{uuid.uuid4().hex[:8]}"  # the ledger lives in the shared privacy database
SUBJECTS = [f"gone-{n}" for n in range(4)]


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    return start_memlog()


async def pages(http: httpx.AsyncClient, limit: int, **params: Any) -> list[list[dict[str, Any]]]:
    found: list[list[dict[str, Any]]] = []
    cursor: str | None = None
    while True:
        query = {**params, "limit": limit, **({"cursor": cursor} if cursor else {})}
        response = await http.get(f"/v1/tenants/{TENANT}/ledger", params=query)
        assert response.status_code == 200, response.text
        found.append(response.json())
        cursor = response.headers.get("Next-Cursor")
        if cursor is None:
            return found
        assert len(found) < 50, "the cursor does not move on"


async def test_the_ledger_pages_through_several_erasures(http: httpx.AsyncClient) -> None:
    for subject in SUBJECTS:
        body = {"tenant": TENANT, "subject": subject, "question": "remember me", "answer": "ok"}
        assert (await http.post("/v1/exchanges", json=body)).status_code == 202
        erased = await http.post(f"/v1/tenants/{TENANT}/subjects/{subject}/erase", json={"reason": "asked"})
        assert erased.status_code == 200 and erased.json()["done"] is True, erased.text
    whole = await http.get(f"/v1/tenants/{TENANT}/ledger", params={"limit": 1000})
    assert whole.status_code == 200 and "Next-Cursor" not in whole.headers
    entries = whole.json()
    assert len(entries) == 2 * len(SUBJECTS)  # each erasure: requested, then done
    kinds: dict[str, list[str]] = {}  # the ledger names a subject by its digest, never in clear
    for entry in reversed(entries):
        kinds.setdefault(entry["subject_digest"], []).append(entry["kind"])
    assert list(kinds.values()) == [["erase-requested", "erased"]] * len(SUBJECTS)
    for limit in (1, 2):
        paged = await pages(http, limit)
        assert all(len(page) == limit for page in paged[:-1]) and 1 <= len(paged[-1]) <= limit
        assert [e for page in paged for e in page] == entries  # each entry once, in the same order
    one = [e for page in await pages(http, 1, subject=SUBJECTS[0]) for e in page]
    assert [e["kind"] for e in one] == ["erased", "erase-requested"]
    assert len({e["subject_digest"] for e in one}) == 1 and one == [
        e for e in entries if e["subject_digest"] == one[0]["subject_digest"]
    ]
    first = await http.get(f"/v1/tenants/{TENANT}/ledger", params={"limit": 1})
    elsewhere = await http.get(
        f"/v1/tenants/{TENANT}/ledger",
        params={"limit": 1, "subject": SUBJECTS[1], "cursor": first.headers["Next-Cursor"]},
    )
    assert elsewhere.status_code == 422 and elsewhere.json()["detail"][0]["loc"][-1] == "cursor"
