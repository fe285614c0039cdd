"""Namespaces on the real stack, in process: replay records and switches them, an erasure that arrives
while a replay builds leaves nothing in its namespace, and dropping one removes its data and no other's.
"""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import pytest

from memlog.dev.processes import run_cli
from memlog.services import Services, open_backends
from projections.archives import ConversationRef
from projections.namespaces import ABANDONED, ACTIVE, PREVIOUS
from projections.position import Position
from projections.session import ThreadKey
from schemas.errors import Conflict
from schemas.events import SESSION_THREAD, Envelope, SubjectErased
from schemas.exchanges import ReportedExchange
from streams.projectors import PROJECTIONS
from streams.replay import replay

TENANT = "castle"


async def dump(services: Services, namespace: str) -> str:
    """Every Redis key and value, and every MongoDB document, of one namespace, as text."""
    scoped = services.settings.model_copy(update={"namespace": namespace})
    client = services.redis
    parts = []
    async for key in client.scan_iter(match=f"{scoped.redis_prefix}:*", count=1000):
        kind = (await client.type(key)).decode()
        value: Any = f"<{kind}>"
        if kind == "hash":
            value = await client.hgetall(key)  # type: ignore[misc]
        elif kind == "list":
            value = await client.lrange(key, 0, -1)  # type: ignore[misc]
        elif kind == "string":
            value = await client.get(key)
        elif kind == "set":
            value = await client.smembers(key)  # type: ignore[misc]
        elif kind == "zset":
            value = await client.zrange(key, 0, -1)
        parts.append(f"{key!r} {value!r}")
    database = services.mongo[scoped.mongo_db_name]
    for collection in await database.list_collection_names():
        parts.extend(json.dumps(doc, default=str) for doc in await database[collection].find({}).to_list())
    return "\n".join(parts)


async def record(services: Services, subject: str) -> None:
    exchange = {
        "tenant": TENANT,
        "subject": subject,
        "question": f"where is {subject.upper()}-MARK?",
        "answer": "over there",
        "idempotency_key": f"{subject}-1",
    }
    await services.exchanges.record(ReportedExchange.from_payload(exchange))
    await services.memory.remember(
        TENANT, subject, f"likes {subject.upper()}-FACT", agent=None, scope=None, source="subject"
    )


async def erase_requested(services: Services, subject: str) -> None:
    """An erasure on the privacy topic that no worker has applied yet: the subject's data key still opens."""
    env = Envelope(tenant=TENANT, subject=subject, thread=SESSION_THREAD, producer="test")
    await services.producer.produce([SubjectErased(env, str(uuid.uuid4()), "test", None)])


async def test_an_erasure_arriving_while_a_replay_builds_leaves_nothing_of_the_subject_in_it(
    services: Services,
) -> None:
    settings = services.settings
    await record(services, "ann")
    await record(services, "bob")
    await erase_requested(services, "ann")
    report = await replay(settings, switch=False, out=io.StringIO(), open_backends=open_backends)
    try:
        assert report.erased_meanwhile == 1 and not report.skipped  # ann's key still opened her events
        rebuilt = await dump(services, report.namespace)
        assert "BOB-MARK" in rebuilt and "BOB-FACT" in rebuilt
        assert "ANN-MARK" not in rebuilt and "ANN-FACT" not in rebuilt
        entry = await services.shared.namespaces.get(report.namespace)
        assert entry is not None and entry.state == ABANDONED and entry.note == "built with --no-switch"
    finally:
        await services.namespaces.drop(report.namespace)


async def test_a_replay_of_facts_with_the_switch_rebuilds_every_projection_with_every_index(
    services: Services,
) -> None:
    settings = services.settings
    await record(services, "ann")
    await services.current.privacy_checkpoints.advance(Position("privacy", 2, 7))  # as a live worker left it
    out = io.StringIO()
    report = await replay(settings, ("facts",), switch=True, out=out, open_backends=open_backends)
    try:
        assert report.projections == PROJECTIONS and report.switched
        assert "rebuilding sessions, archives, traces as well" in out.getvalue()
        new = services.stores(report.namespace)
        session = await new.sessions.read(ThreadKey.session(TENANT, "ann"))
        assert session is not None and "ANN-MARK" in session.render()
        assert await new.conversations.entries(
            ConversationRef(TENANT, SESSION_THREAD, "ann"), scope="history", snapshot=2**61
        )
        facts = await new.facts.load(TENANT, "ann")
        assert facts is not None and [fact.text for fact in facts.facts] == ["likes ANN-FACT"]
        indexes = await services.mongo[new.database.name]["idempotency"].index_information()
        assert indexes["kept_until"]["expireAfterSeconds"] == 0  # the API's claims expire in it too
        assert await new.privacy_checkpoints.applied("privacy", 2) == 7  # requests applied are not applied again
        assert await services.pointer.active() == report.namespace
        states = {e.namespace: e.state for e in await services.shared.namespaces.entries()}
        assert states == {settings.namespace: PREVIOUS, report.namespace: ACTIVE}
        with pytest.raises(Conflict, match="is the active namespace"):
            await services.namespaces.drop(report.namespace)
    finally:
        await services.pointer.switch(settings.namespace)
        await services.namespaces.drop(report.namespace)


async def test_dropping_a_namespace_removes_its_database_and_keys_and_nothing_of_others(services: Services) -> None:
    settings = services.settings
    names = [settings.namespace, f"{settings.namespace}-r1", f"{settings.namespace}-r1x"]  # one's prefix in another's
    for name in names:
        scoped = settings.model_copy(update={"namespace": name})
        await services.redis.set(f"{scoped.redis_prefix}:probe", name)
        await services.redis.set(f"{scoped.redis_prefix}:{{thread:1:a}}:h", name)
        await services.mongo[scoped.mongo_db_name]["probe"].insert_one({"name": name})
        await services.shared.namespaces.building(name)
        await services.shared.namespaces.abandon(name, "built with --no-switch")
    with pytest.raises(Conflict, match="is the active namespace"):
        await services.namespaces.drop(settings.namespace)
    dropped = await services.namespaces.drop(names[1])
    assert dropped.state == ABANDONED
    assert await services.shared.namespaces.get(names[1]) is None
    assert await dump(services, names[1]) == ""
    assert names[1] not in await services.mongo.list_database_names()
    for kept in (names[0], names[2]):
        assert f"{kept}" in await dump(services, kept)
    await services.namespaces.drop(names[2])


async def test_the_namespaces_command_lists_them_and_drops_one_but_never_the_active_one(services: Services) -> None:
    settings = services.settings
    old = f"{settings.namespace}-r20250101000000"
    await services.shared.namespaces.building(old, "replay of facts by cli")
    await services.shared.namespaces.abandon(old, "built with --no-switch")
    listed = run_cli(settings, "namespaces", "list")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split()[1] for line in listed.stdout.splitlines()[1:]}
    assert rows == {settings.namespace: ACTIVE, old: ABANDONED}
    assert "built with --no-switch" in listed.stdout
    refused = run_cli(settings, "namespaces", "drop", settings.namespace)
    assert refused.returncode == 1 and "is the active namespace" in refused.stderr
    unknown = run_cli(settings, "namespaces", "drop", "never-was")
    assert unknown.returncode == 1 and "no namespace never-was" in unknown.stderr
    dropped = run_cli(settings, "namespaces", "drop", old)
    assert dropped.returncode == 0 and f"dropped {old} (abandoned)" in dropped.stdout, dropped.stderr
    assert [e.namespace for e in await services.shared.namespaces.entries()] == [settings.namespace]
