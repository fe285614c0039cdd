"""Namespaces with memlog running as processes: an erasure after replays reaches every namespace, a
replay of one projection that switches keeps every read, and the namespace switched away from goes
once its grace period has passed.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from memlog.adapters.mongo_store import mongo_client
from memlog.config.settings import Settings
from memlog.dev.processes import run_cli
from memlog.services import open_services
from projections.namespaces import ABANDONED, ACTIVE, PREVIOUS
from tests.e2e.conftest import api_client, memlog, own_settings
from tests.e2e.subject_records import (
    GONE,
    KEPT,
    TENANT,
    marks,
    mongo_dump,
    record_everything,
    redis_dump,
)


def replayed_into(stdout: str) -> str:
    return stdout.split("replayed ", 1)[1].split(" into ", 1)[1].split(" ", 1)[0]


async def app_databases(settings: Settings) -> list[str]:
    """Every MongoDB database of the test's app: each namespace's, and the privacy database."""
    mongo = mongo_client(settings.mongo)
    try:
        names = await mongo.list_database_names()
    finally:
        await mongo.close()
    return [name for name in names if name.startswith(settings.mongo_db_name)] + [settings.privacy_database]


async def everything(settings: Settings) -> str:
    """Every Redis key of the app (every namespace's prefix) and every MongoDB document of its databases."""
    return await redis_dump(settings, settings.app_id) + await mongo_dump(settings, await app_databases(settings))


async def namespace_states(settings: Settings) -> dict[str, str]:
    async with open_services(settings) as services:
        return {entry.namespace: entry.state for entry in await services.shared.namespaces.entries()}


async def readable(http: httpx.AsyncClient, subject: str) -> str:
    """The subject's context and their session's archive, as the API answers them."""
    context = await http.get(f"/v1/tenants/{TENANT}/subjects/{subject}/context", params={"fill": "recent"})
    archive = await http.get(f"/v1/tenants/{TENANT}/threads/session:{subject}/conversations/main/export")
    assert context.status_code == 200 and archive.status_code == 200, context.text + archive.text
    return context.text + archive.text


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_an_erasure_after_replays_leaves_nothing_of_the_subject_in_any_namespace(stack: Settings) -> None:
    settings = own_settings(stack)
    settings = settings.model_copy(update={"privacy_database": f"memlogprivacy_{settings.namespace}"})
    with memlog(settings):
        async with api_client(settings) as http:
            tokens = await record_everything(http, GONE) + await record_everything(http, KEPT)
            read = await http.get(
                f"/v1/tenants/{TENANT}/subjects/{KEPT}/context", params={"after": ",".join(tokens), "wait": 30}
            )
            assert read.status_code == 200, read.text

            # one replay switches (the first namespace becomes previous), one is built and left
            switched = run_cli(settings, "replay", "--projection", "all")
            assert switched.returncode == 0, switched.stdout + switched.stderr
            active = replayed_into(switched.stdout)
            left = run_cli(settings, "replay", "--projection", "facts", "--no-switch")
            assert left.returncode == 0, left.stdout + left.stderr
            abandoned = replayed_into(left.stdout)
            assert await namespace_states(settings) == {
                settings.namespace: PREVIOUS,
                active: ACTIVE,
                abandoned: ABANDONED,
            }
            before = await everything(settings)
            for name in (settings.namespace, active):  # the erased subject is in both, and in the one left
                scoped = settings.model_copy(update={"namespace": name})
                assert marks(GONE)[0] in await redis_dump(scoped, scoped.redis_prefix), name
            for mark in marks(GONE):
                assert mark in before, mark

            # the worker follows the switch, then erases in every namespace
            erased = run_cli(settings, "erase", TENANT, GONE)
            assert erased.returncode == 0, erased.stdout + erased.stderr
            after = await everything(settings)
            assert GONE not in after and GONE.upper() not in after  # not even the name, keys included
            for mark in marks(KEPT):
                assert mark in after, mark
            ledger = (await http.get(f"/v1/tenants/{TENANT}/ledger")).json()
            (entry,) = [item for item in ledger if item["kind"] == "erased"]
            # whichever namespace the worker was in, the erasure reached the two others
            assert len(entry["deleted_elsewhere"]) == 2, entry
            assert set(entry["deleted_elsewhere"]) < {settings.namespace, active, abandoned}, entry
            assert all(count > 0 for count in entry["deleted_elsewhere"].values()), entry

            listed = run_cli(settings, "namespaces", "list")
            assert listed.returncode == 0, listed.stderr
            assert {line.split()[0] for line in listed.stdout.splitlines()[1:]} == {
                settings.namespace,
                active,
                abandoned,
            }
            for name in (settings.namespace, abandoned):
                dropped = run_cli(settings, "namespaces", "drop", name)
                assert dropped.returncode == 0 and f"dropped {name}" in dropped.stdout, dropped.stderr
            refused = run_cli(settings, "namespaces", "drop", active)
            assert refused.returncode == 1 and "is the active namespace" in refused.stderr
            assert await namespace_states(settings) == {active: ACTIVE}
            databases = [name for name in await app_databases(settings) if name != settings.privacy_database]
            assert databases == [f"{settings.mongo_database}_{active}"]


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_a_replay_of_facts_with_the_switch_keeps_sessions_and_archive_readable(stack: Settings) -> None:
    settings = own_settings(stack, namespace_grace_seconds=5, namespace_check_seconds=1.0)
    with memlog(settings):
        async with api_client(settings) as http:
            tokens = await record_everything(http, KEPT)
            waited = {"after": ",".join(tokens), "wait": 30}
            assert (await http.get(f"/v1/tenants/{TENANT}/subjects/{KEPT}/context", params=waited)).status_code == 200
            before = await readable(http, KEPT)
            shown = [*marks(KEPT)[:3], marks(KEPT)[4]]  # question, tool, answer, fact
            for mark in shown:
                assert mark in before, mark

            replayed = run_cli(settings, "replay", "--projection", "facts")
            assert replayed.returncode == 0, replayed.stdout + replayed.stderr
            assert "rebuilding sessions, archives, traces as well" in replayed.stderr, replayed.stderr
            assert "rebuilt: sessions, archives, facts, traces" in replayed.stdout, replayed.stdout
            rebuilt = replayed_into(replayed.stdout)

            # the worker, restarted in the new namespace, drops the old one once its 5 s of grace are over
            deadline = time.monotonic() + 120
            while (states := await namespace_states(settings)) != {rebuilt: ACTIVE}:
                assert time.monotonic() < deadline, states
                await asyncio.sleep(0.5)
            assert f"{settings.mongo_database}_{settings.namespace}" not in await app_databases(settings)
            assert f"{settings.app_id}:{settings.namespace}:" not in await redis_dump(settings, settings.app_id)

            # reads can only come from the rebuilt namespace now, and they hold everything
            after = await readable(http, KEPT)
            for mark in shown:
                assert mark in after, mark
            mongo = mongo_client(settings.mongo)
            try:
                scoped = settings.model_copy(update={"namespace": rebuilt})
                indexes: dict[str, Any] = await mongo[scoped.mongo_db_name]["idempotency"].index_information()
            finally:
                await mongo.close()
            assert indexes["kept_until"]["expireAfterSeconds"] == 0

            # and the new namespace takes new writes, idempotent ones included
            body = {"tenant": TENANT, "subject": KEPT, "question": "NEW-QUESTION", "idempotency_key": "after-switch"}
            first = await http.post("/v1/exchanges", json=body)
            again = await http.post("/v1/exchanges", json=body)
            assert first.status_code == 202 and again.json()["idempotent"] is True, again.text
            fresh = await http.get(
                f"/v1/tenants/{TENANT}/subjects/{KEPT}/context", params={"after": first.json()["position"], "wait": 30}
            )
            assert "NEW-QUESTION" in json.dumps(fresh.json())
