"""Erasure, export and replay on the real broker, Redis and MongoDB-protocol server.

Two subjects record exchanges (their sessions and the public thread), facts and traces; one is
erased. Nothing of theirs may be left in Redis, MongoDB or a decrypted read of any topic, the other
must be untouched, and a replay of every topic into a fresh namespace must not bring them back.
"""

from __future__ import annotations

import io
import json

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from memlog.adapters.mongo_privacy import KEYS_PER_QUERY
from memlog.config.settings import Settings
from memlog.dev.processes import free_port, run_cli
from memlog.services import open_backends, open_services
from projections.sealing import SealError, open_sealed
from streams.replay import Progress, ReplayFailed, _drain_in_processes
from tests.e2e.conftest import api_client, memlog, own_settings, replayed
from tests.e2e.subject_records import GONE, KEPT, TENANT, marks, mongo_dump, record_everything, redis_dump


async def decrypted_topics(settings: Settings) -> tuple[str, int]:
    """Every record of every subject topic, opened where its key still exists; and how many would not open."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, enable_auto_commit=False)
    await consumer.start()
    texts: list[str] = []
    shredded = 0
    async with open_services(settings) as services:
        try:
            tps = [TopicPartition(t, p) for t in settings.subject_topics for p in range(settings.partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            ends = await consumer.end_offsets(tps)
            done = {tp: ends[tp] == 0 for tp in tps}
            while not all(done.values()):
                for tp, records in (await consumer.getmany(timeout_ms=1000)).items():
                    for record in records:
                        decoded = services.codec.decode(record.value)
                        envelope = decoded.record["envelope"]
                        box = envelope.get("sealed")
                        if box is None:
                            texts.append(json.dumps(decoded.record, default=str))
                        else:
                            keys = await services.vault.keys_by_id([box["key_id"]])
                            if box["key_id"] not in keys:
                                shredded += 1
                                texts.append(json.dumps({k: v for k, v in decoded.record.items()}, default=str))
                                continue
                            try:
                                opened = open_sealed(decoded.full_name, decoded.record, keys[box["key_id"]])
                            except SealError:
                                shredded += 1
                                continue
                            texts.append(json.dumps(opened, default=str))
                        if record.offset + 1 >= ends[tp]:
                            done[tp] = True
        finally:
            await consumer.stop()
    return "\n".join(texts), shredded


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_erasure_leaves_nothing_and_a_replay_does_not_bring_it_back(stack: Settings) -> None:
    settings = own_settings(stack)
    settings = settings.model_copy(update={"privacy_database": f"memlogprivacy_{settings.namespace}"})
    with memlog(settings):
        async with api_client(settings) as http:
            # the kept subject opens the public thread, so its bookkeeping (creator, first entry) is theirs
            opened = await http.post(
                "/v1/exchanges", json={"tenant": TENANT, "subject": KEPT, "thread": "public", "question": "hello all"}
            )
            tokens = [opened.json()["position"]]
            tokens += await record_everything(http, GONE) + await record_everything(http, KEPT)
            wait = {"after": ",".join(tokens), "wait": 30}
            read = await http.get(f"/v1/tenants/{TENANT}/subjects/{KEPT}/context", params=wait)
            assert read.status_code == 200, read.text
            namespace_dbs = [settings.mongo_db_name, settings.privacy_database]
            before = await redis_dump(settings, settings.app_id) + await mongo_dump(settings, namespace_dbs)
            for mark in marks(GONE) + marks(KEPT):
                assert mark in before, mark  # the check below can fail: everything was there

            # erase one subject through the operator route
            erased = await http.post(f"/v1/tenants/{TENANT}/subjects/{GONE}/erase", json={"reason": "request 1"})
            assert erased.status_code == 200, erased.text
            outcome = erased.json()
            assert outcome["done"] is True
            deleted = outcome["ledger"]["deleted"]
            assert deleted["session_exchanges"] == 1 and deleted["shared_thread_lines"] == 1
            # the subject's standing key (facts) and its key of this period (exchanges, traces)
            assert deleted["facts"] == 1 and deleted["traces"] == 1 and deleted["data_keys"] == 2
            assert deleted["conversation_entries"] >= 4 and deleted["idempotency_keys"] == 1

            after = await redis_dump(settings, settings.app_id) + await mongo_dump(settings, namespace_dbs)
            assert GONE not in after and GONE.upper() not in after  # not even the name, keys included
            for mark in marks(KEPT):
                assert mark in after, mark
            topics, shredded = await decrypted_topics(settings)
            assert shredded >= 6  # the subject's sealed events no longer open
            for mark in marks(GONE):
                assert mark not in topics, mark
            for mark in marks(KEPT):
                assert mark in topics, mark

            # the other subject is untouched; the erased one starts over with an empty memory
            kept = (await http.get(f"/v1/tenants/{TENANT}/subjects/{KEPT}/context", params={"fill": "recent"})).json()
            assert marks(KEPT)[0] in kept["rendered"] and marks(KEPT)[4] in json.dumps(kept)
            again = await http.post(
                "/v1/exchanges", json={"tenant": TENANT, "subject": GONE, "question": "hello again", "answer": "hi"}
            )
            fresh = await http.get(
                f"/v1/tenants/{TENANT}/subjects/{GONE}/context", params={"after": again.json()["position"], "wait": 30}
            )
            assert "hello again" in fresh.json()["rendered"] and marks(GONE)[0] not in fresh.text
            assert (await http.post(f"/v1/tenants/{TENANT}/subjects/{GONE}/erase")).json()["done"] is True
            again = await http.post(
                "/v1/exchanges", json={"tenant": TENANT, "subject": GONE, "question": "third start", "answer": "ok"}
            )
            await http.get(
                f"/v1/tenants/{TENANT}/subjects/{GONE}/context", params={"after": again.json()["position"], "wait": 30}
            )

            # export: one bundle with everything about the kept subject
            bundle = await http.post(f"/v1/tenants/{TENANT}/subjects/{KEPT}/export")
            assert bundle.status_code == 200, bundle.text
            content = bundle.json()
            assert content["subject"] == KEPT and len(content["facts"]) == 1 and len(content["traces"]) == 1
            assert len(content["shared_thread_lines"]) == 2 and len(content["session"]["exchanges"]) == 1
            for mark in marks(KEPT):
                assert mark in bundle.text, mark
            ledger = (await http.get(f"/v1/tenants/{TENANT}/ledger")).json()
            kinds = [entry["kind"] for entry in ledger]
            assert kinds.count("erased") == 2 and "exported" in kinds and "erase-requested" in kinds
            assert GONE not in json.dumps(ledger)

            # replay every topic into a fresh namespace: the erased subject's old data stays gone
            previous = settings.namespace
            by_cli = run_cli(settings, "replay", "--projection", "all")
            assert by_cli.returncode == 0, by_cli.stdout + by_cli.stderr
            assert "skipped" in by_cli.stdout and "erased" in by_cli.stdout, by_cli.stdout
            rebuilt = by_cli.stdout.split("replayed ", 1)[1].split(" into ", 1)[1].split(" ", 1)[0]
            assert rebuilt.startswith(f"{previous}-r")
            scoped = settings.model_copy(update={"namespace": rebuilt})
            dump = await redis_dump(scoped, scoped.redis_prefix) + await mongo_dump(scoped, [scoped.mongo_db_name])
            for mark in marks(GONE):
                assert mark not in dump, mark
            assert "third start" in dump and marks(KEPT)[0] in dump
            verified = run_cli(settings, "verify", previous, rebuilt)
            assert verified.returncode == 0, verified.stdout + verified.stderr
            assert verified.stdout.strip().endswith("identical")

            # the same rebuild by two processes sharing the partitions: the same result, the same skips
            shared = run_cli(settings, "replay", "--projection", "all", "--workers", "2", "--no-switch")
            assert shared.returncode == 0, shared.stdout + shared.stderr
            assert "reads still use" in shared.stdout, shared.stdout
            again_rebuilt = shared.stdout.split("replayed ", 1)[1].split(" into ", 1)[1].split(" ", 1)[0]
            assert again_rebuilt != rebuilt
            skips = [line for line in by_cli.stdout.splitlines() if line.startswith("skipped")]
            assert skips and skips == [line for line in shared.stdout.splitlines() if line.startswith("skipped")]
            verified = run_cli(settings, "verify", previous, again_rebuilt)
            assert verified.returncode == 0, verified.stdout + verified.stderr
            assert verified.stdout.strip().endswith("identical")

            # reads follow the switch, and keep working
            for _ in range(100):
                kept = await http.get(f"/v1/tenants/{TENANT}/subjects/{KEPT}/context")
                if kept.status_code == 200 and marks(KEPT)[0] in kept.json()["rendered"]:
                    break
            assert marks(KEPT)[0] in kept.json()["rendered"]

            # a replay through the operator API (two processes), without switching; then erasure from the CLI
            async def reads_keep_working() -> None:
                during = await http.get(f"/v1/tenants/{TENANT}/subjects/{KEPT}/context")
                assert during.status_code == 200 and marks(KEPT)[0] in during.json()["rendered"]

            replay = {"projection": "facts", "switch": False, "workers": 2}
            status = await replayed(http, replay, meanwhile=reads_keep_working, pause=0.2)
            assert status["state"] == "done" and status["events"] > 0 and not status["switched"], status
            assert status["skipped_events"] > 0 and "erased" in status["skipped_because"][0], status
            cli = run_cli(settings, "erase", TENANT, KEPT)
            assert cli.returncode == 0 and f"erased {KEPT}" in cli.stdout, cli.stdout + cli.stderr
            gone = await http.get(f"/v1/tenants/{TENANT}/subjects/{KEPT}/context")
            assert marks(KEPT)[0] not in gone.text
            exported = run_cli(settings, "export", TENANT, KEPT)
            assert exported.returncode == 0 and json.loads(exported.stdout)["facts"] == [], exported.stderr
            assert "erased" in run_cli(settings, "ledger", TENANT).stdout


async def test_the_key_vault_answers_for_more_keys_than_one_query_asks(settings: Settings) -> None:
    """keys_by_id splits its lookup; every active key comes back, erased and unknown ids do not."""
    tenant = f"vault-{settings.namespace}"
    count = KEYS_PER_QUERY * 2 + 7
    async with open_services(settings) as services:
        await services.vault.prepare()
        made = {}
        for number in range(count):
            key_id, key = await services.vault.key_for_write(tenant, f"s{number}")
            made[key_id] = key
        erased_id = next(iter(made))
        await services.vault.begin_erasure(tenant, "s0")
        found = await services.vault.keys_by_id([*made, "no-such-key"])
    assert erased_id not in found
    assert found == {key_id: key for key_id, key in made.items() if key_id != erased_id}
    assert len(found) == count - 1


async def test_a_replay_process_that_fails_fails_the_replay(settings: Settings) -> None:
    """A process of a shared replay that cannot do its part is named in the replay's error."""
    broken = settings.model_copy(update={"kafka_bootstrap": f"127.0.0.1:{free_port()}"})  # nothing listens
    tp = TopicPartition(settings.threads_topic, 0)
    progress = Progress(io.StringIO(), 10)
    with pytest.raises(ReplayFailed, match=r"replay process 0 failed: .*"):
        await _drain_in_processes(broken, ("sessions",), [tp], {tp: 0}, {tp: 10}, 1, progress, 100, open_backends)
