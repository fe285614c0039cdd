"""Conversation archives end to end: HTTP -> Kafka -> worker -> MongoDB-protocol server -> HTTP."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from memlog.config.settings import Settings
from memlog.dev.processes import settings_env
from tests.e2e.conftest import StartMemlog, exchange, post_exchange
from tests.kafka import end_offsets

MEMLOG = str(Path(sys.executable).parent / "memlog")  # the console script make install puts beside python
TENANT = "castle-eu-1"
DAY = 86_400_000


@pytest.fixture(scope="module")
def live(start_memlog: StartMemlog) -> Settings:
    return start_memlog(fork_entries=3, retention_enabled=True, fold_keep_min=1, fold_keep_max=1)


def thread(subject: str) -> str:
    return f"/v1/tenants/{TENANT}/threads/session:{subject}"


async def export(http: httpx.AsyncClient, subject: str, conversation: str = "main", **params: Any) -> dict[str, Any]:
    response = await http.get(f"{thread(subject)}/conversations/{conversation}/export", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def search(http: httpx.AsyncClient, subject: str, q: str, **params: Any) -> httpx.Response:
    return await http.get(f"{thread(subject)}/search", params={"q": q, **params})


async def test_originals_keep_escaped_nul_and_lone_surrogates_byte_for_byte(http: httpx.AsyncClient) -> None:
    raw = (
        '{"tenant":"castle-eu-1","subject":"nul-ann","question":"nul \\u0000 here, lone \\ud800 there",'
        ' "answer": "fine \\udc00", "tool_calls": [{"name":"t","arguments":{"k":"\\u0000"},"result":"\\ud83d"}]}'
    )
    accepted = await post_exchange(http, raw)
    held = await http.get(
        f"{thread('nul-ann')}/entries/{accepted['exchange_id']}.q/original", params={"after": accepted["position"]}
    )
    assert held.status_code == 200, held.text
    assert held.content == raw.encode()
    # the streaming routes keep theirs too
    part = '{"tenant":"castle-eu-1","subject":"nul-ann","question":"again \\u0000\\udfff"}'
    asked = await http.post(
        "/v1/exchanges/ex-stream/question", content=part, headers={"content-type": "application/json"}
    )
    assert asked.status_code == 202, asked.text
    again = await http.get(
        f"{thread('nul-ann')}/entries/ex-stream.q/original", params={"after": asked.json()["position"]}
    )
    assert again.content == part.encode()
    # the structured copy is searchable; the lone surrogate became U+FFFD there, the NUL stayed
    entry = (await http.get(f"{thread('nul-ann')}/entries/{accepted['exchange_id']}.q")).json()
    assert entry["text"] == "nul \x00 here, lone \ufffd there"


async def test_twenty_parallel_identical_appends_make_one_entry_and_one_event(
    http: httpx.AsyncClient, live: Settings
) -> None:
    before = await end_offsets(live)
    body = exchange(TENANT, "idem-ann", "once only?", "once.", idempotency_key="k-20")
    answers = await asyncio.gather(*(post_exchange(http, body) for _ in range(20)))
    assert len({(a["exchange_id"], a["position"]) for a in answers}) == 1
    assert sorted(a["idempotent"] for a in answers) == [False] + [True] * 19
    after = await end_offsets(live)
    assert sum(after.values()) - sum(before.values()) == 2  # one question, one answer
    page = await export(http, "idem-ann", after=answers[0]["position"])
    assert [e["entry_id"] for e in page["entries"]] == [
        f"{answers[0]['exchange_id']}.q",
        f"{answers[0]['exchange_id']}.a",
    ]
    assert all(isinstance(e["seq"], str) and e["seq"].isdigit() for e in page["entries"])


async def test_compact_reset_and_search_scopes(http: httpx.AsyncClient) -> None:
    s = "ops-ann"
    for q, a in [("where is the red chest", "by the gate"), ("what about diamonds", "twelve"), ("and torches", "3")]:
        last = await post_exchange(http, exchange(TENANT, s, q, a))  # now: the session is alive to be folded
    await _wait_session(http, s, last["position"])
    compacted = await http.post(f"{thread(s)}/conversations/main/compact")
    assert compacted.status_code == 202, compacted.text
    page = await export(http, s, after=compacted.json()["position"])
    kinds = {e["entry_id"].rsplit(".", 1)[-1] + ":" + e["provenance"] for e in page["entries"]}
    assert {"q:compacted", "a:compacted", "q:active", "a:active"} <= kinds
    assert any(e["role"] == "summary" and e["enters_prompt"] is False for e in page["entries"])
    assert all(e["archives"] for e in page["entries"] if e["role"] != "summary")  # the whole generation, first
    reset = await http.post(f"{thread(s)}/conversations/main/reset", json={"reason": "new quest"})
    after_reset = await post_exchange(http, exchange(TENANT, s, "the red chest again", "empty now"))
    await _wait_archive(http, s, after_reset["position"])
    current = await export(http, s)
    assert [e["text"] for e in current["entries"] if e["role"] == "question"] == ["the red chest again"]
    archived = await export(http, s, archives="reset")
    assert {e["provenance"] for e in archived["entries"]} == {"reset"}
    assert reset.status_code == 202
    normal = (await search(http, s, "red chest")).json()
    assert [(r["excerpt"], r["provenance"]) for r in normal["results"]] == [("the red chest again", "active")]
    history = (await search(http, s, "red chest", scope="history")).json()
    # phrase matches by BM25: the fold's summary (a debug entry) quotes the folded question among more words
    assert [(r["role"], r["provenance"]) for r in history["results"]] == [
        ("question", "active"),
        ("question", "reset"),
        ("summary", "reset"),
    ]
    assert history["results"][1]["excerpt"] == "where is the red chest"


async def test_search_ranking_bounds_and_cursor_binding(http: httpx.AsyncClient) -> None:
    s = "search-ann"
    texts = [
        "the diamond pickaxe is in the chest",  # phrase "diamond pickaxe"
        "a pickaxe made of iron, not diamond",  # both tokens
        "diamond only",  # one of the two terms: ranked after both
        "x " * 300 + "diamond pickaxe far into a long text",  # phrase, long: excerpt bounded
    ]
    for n, text in enumerate(texts):
        last = await post_exchange(http, exchange(TENANT, s, text, "ok", occurred_at=1_795_000_000_000 + n * DAY))
    await _wait_archive(http, s, last["position"])
    page = (await search(http, s, "diamond pickaxe", neighbours=0)).json()
    excerpts = [r["excerpt"] for r in page["results"]]
    assert [r["match"] for r in page["results"]] == ["phrase", "phrase", "tokens", "tokens"]
    assert excerpts[2:] == [texts[1], texts[2]]
    assert all(len(e) <= 240 for e in excerpts) and "diamond pickaxe" in excerpts[0]
    # since/until, neighbours (default 1, at most 3), limits
    windowed = (
        await search(http, s, "diamond pickaxe", since=1_795_000_000_000 + DAY, until=1_795_000_000_000 + 2 * DAY)
    ).json()
    assert [r["excerpt"] for r in windowed["results"]] == [texts[1]]
    assert [n["role"] for n in windowed["results"][0]["neighbours"]] == ["answer", "answer"]
    assert (await search(http, s, "diamond", neighbours=4)).status_code == 422
    assert (await search(http, s, "diamond", limit=201)).status_code == 422
    many = await search(http, s, " ".join(f"t{n}" for n in range(1_000)))
    assert many.status_code == 422 and many.json()["detail"][0]["loc"][-1] == "q"
    nothing = (await search(http, s, "?! ...")).json()  # no word: answered from nothing, not the archive whole
    assert nothing["results"] == [] and nothing["partial"] is False and page["partial"] is False
    # paging: one result a page, every match exactly once, in rank order
    seen, cursor = [], None
    for _ in range(5):
        params = {"limit": 1, **({"cursor": cursor} if cursor else {})}
        got = (await search(http, s, "diamond pickaxe", **params)).json()
        seen += [r["excerpt"] for r in got["results"]]
        cursor = got["next_cursor"]
        if cursor is None:
            break
    assert seen == excerpts
    first = (await search(http, s, "diamond pickaxe", limit=1)).json()
    replayed = await search(http, s, "iron", cursor=first["next_cursor"])
    assert replayed.status_code == 422 and replayed.json()["detail"][0]["loc"][-1] == "cursor"
    other_scope = await search(http, s, "diamond pickaxe", scope="history", cursor=first["next_cursor"])
    assert other_scope.status_code == 422


async def test_a_late_sorting_word_of_a_5000_token_tool_result_is_found(http: httpx.AsyncClient) -> None:
    s = "long-ann"
    rows = " ".join(f"w{n:05d}" for n in range(4_999)) + " zymurgy"  # 5,000 distinct tokens; the last sorts last
    call = {"name": "inventory", "arguments": {"all": True}, "result": {"rows": rows}}
    last = await post_exchange(http, exchange(TENANT, s, "list everything in the vault", "done", tool_calls=[call]))
    await _wait_archive(http, s, last["position"])
    for word in ("zymurgy", "w04998"):
        page = (await search(http, s, word, neighbours=0)).json()
        assert [r["role"] for r in page["results"]] == ["tool"], (word, page)
        assert word in page["results"][0]["excerpt"]


async def test_rename_fork_archive_and_purge(http: httpx.AsyncClient) -> None:
    s = "fork-ann"
    for n in range(3):
        last = await post_exchange(http, exchange(TENANT, s, f"question {n}", f"answer {n}"))
    await _wait_archive(http, s, last["position"])
    forked = await http.post(f"{thread(s)}/conversations/main/fork", json={"target": "side"})
    assert forked.status_code == 202, forked.text
    side = await export(http, s, "side", after=forked.json()["position"])
    assert [e["text"] for e in side["entries"]] == ["answer 1", "question 2", "answer 2"]  # the newest 3
    assert len((await export(http, s))["entries"]) == 6  # the source is unchanged
    exists = await http.post(f"{thread(s)}/conversations/main/fork", json={"target": "side"})
    assert exists.status_code == 409 and "exists" in exists.json()["detail"][0]["msg"]
    itself = await http.post(f"{thread(s)}/conversations/side/fork", json={"target": "side"})
    assert itself.status_code == 422 and itself.json()["detail"][0]["loc"][-1] == "target"
    renamed = await http.post(f"{thread(s)}/conversations/side/rename", json={"target": "quest"})
    assert renamed.status_code == 202
    quest = await export(http, s, "quest", after=renamed.json()["position"])
    assert [e["text"] for e in quest["entries"]] == ["answer 1", "question 2", "answer 2"]
    gone = await http.get(f"{thread(s)}/conversations/side/export")  # renamed away: no such conversation now
    assert gone.status_code == 404 and "'side'" in gone.text, gone.text
    marked = await http.post(f"{thread(s)}/conversations/quest/archive", json={"archived": True, "kind": "subagent"})
    listed = (await http.get(f"{thread(s)}/conversations", params={"after": marked.json()["position"]})).json()
    meta = {c["conversation"]: c for c in listed["conversations"]}
    assert (meta["quest"]["archived"], meta["quest"]["kind"]) == (True, "subagent")
    assert (await export(http, s, "quest"))["entries"] == quest["entries"]  # metadata only
    purged = await http.post(f"{thread(s)}/conversations/quest/purge", json={"reason": "asked"})
    assert purged.status_code == 202
    after_purge = await http.get(f"{thread(s)}/conversations/quest/export", params={"after": purged.json()["position"]})
    assert after_purge.status_code == 404 and "'quest'" in after_purge.text, after_purge.text
    assert len((await export(http, s))["entries"]) == 6


async def test_export_is_one_snapshot_while_appends_continue(http: httpx.AsyncClient) -> None:
    s = "export-ann"
    for n in range(5):
        last = await post_exchange(http, exchange(TENANT, s, f"line {n}", f"reply {n}"))
    await _wait_archive(http, s, last["position"])
    first = await export(http, s, limit=4)
    writer = asyncio.gather(*(post_exchange(http, exchange(TENANT, s, f"late {n}", "x")) for n in range(5)))
    texts = [e["text"] for e in first["entries"]]
    cursor = first["next_cursor"]
    while cursor:
        page = await export(http, s, limit=4, cursor=cursor)
        texts += [e["text"] for e in page["entries"]]
        cursor = page["next_cursor"]
    late = await writer
    assert texts == [t for n in range(5) for t in (f"line {n}", f"reply {n}")]
    # the five were posted at once: wait for every one of them, not for whichever the list ends with
    await _wait_archive(http, s, ",".join(accepted["position"] for accepted in late))
    assert len((await export(http, s))["entries"]) == 20
    assert (await http.get(f"{thread(s)}/conversations/main/export", params={"limit": 501})).status_code == 422


async def test_retention_previews_then_deletes_only_with_confirmation(http: httpx.AsyncClient) -> None:
    s = "old-ann"
    old = 1_700_000_000_000
    await post_exchange(http, exchange(TENANT, s, "old main", "a", occurred_at=old))
    await post_exchange(http, exchange(TENANT, s, "old task", "a", occurred_at=old, conversation="task-1"))
    await post_exchange(http, exchange(TENANT, s, "kept", "a", occurred_at=old, conversation="task-2"))
    running = await post_exchange(
        http, {"tenant": TENANT, "subject": s, "question": "waiting", "occurred_at": old, "conversation": "task-3"}
    )
    finished = await http.post(  # seed 004: a task conversation goes only once finished (its terminal marker)
        f"{thread(s)}/conversations/task-1/archive", params={"after": running["position"]}, json={"archived": True}
    )
    await _wait_archive(http, s, finished.json()["position"])
    protect = await http.post(  # once task-2 is archived: before that it is an unknown conversation (404)
        f"{thread(s)}/conversations/task-2/archive", params={"after": running["position"]}, json={"protected": True}
    )
    await _wait_archive(http, s, protect.json()["position"])
    await _wait_archive(http, s, running["position"])
    now = old + 31 * DAY
    preview = (await http.post(f"/v1/tenants/{TENANT}/retention", json={"now": now})).json()
    assert preview["dry_run"] is True and preview["purged"] == []
    assert [t["conversation"] for t in preview["targets"]] == ["task-1"]  # not main, protected or running
    assert len((await export(http, s, "task-1"))["entries"]) == 2  # a preview deletes nothing
    done = (await http.post(f"/v1/tenants/{TENANT}/retention", json={"now": now, "confirm": True})).json()
    assert [p["conversation"] for p in done["purged"]] == ["task-1"]
    gone = await http.get(f"{thread(s)}/conversations/task-1/export", params={"after": done["purged"][0]["position"]})
    assert gone.status_code == 404, gone.text  # purged: no such conversation any more
    assert len((await export(http, s))["entries"]) == 2


async def _wait_archive(http: httpx.AsyncClient, subject: str, position: str) -> None:
    response = await http.get(f"{thread(subject)}/conversations", params={"after": position})
    assert response.status_code == 200, response.text


async def _wait_session(http: httpx.AsyncClient, subject: str, position: str) -> None:
    response = await http.get(f"/v1/tenants/{TENANT}/subjects/{subject}/context", params={"after": position})
    assert response.status_code == 200, response.text


async def test_renaming_or_purging_the_current_conversation_empties_the_session(http: httpx.AsyncClient) -> None:
    s = "session-ann"
    first = await post_exchange(http, exchange(TENANT, s, "remember the red gate", "noted"))
    context = (await http.get(f"/v1/tenants/{TENANT}/subjects/{s}/context", params={"after": first["position"]})).json()
    assert [e["question"] for e in context["exchanges"]] == ["remember the red gate"]
    renamed = await http.post(f"{thread(s)}/conversations/main/rename", json={"target": "before"})
    context = (
        await http.get(f"/v1/tenants/{TENANT}/subjects/{s}/context", params={"after": renamed.json()["position"]})
    ).json()
    assert context["exchanges"] == [] and context["summary"] == ""
    moved = await export(http, s, "before", after=renamed.json()["position"])  # the archive applies it apart
    assert [e["text"] for e in moved["entries"]] == ["remember the red gate", "noted"]
    # a conversation other than main never shows in the session
    side = await post_exchange(http, exchange(TENANT, s, "side question", "side answer", conversation="before"))
    later = await post_exchange(http, exchange(TENANT, s, "a new main question", "yes"))
    context = (
        await http.get(
            f"/v1/tenants/{TENANT}/subjects/{s}/context", params={"after": f"{side['position']},{later['position']}"}
        )
    ).json()
    assert [e["question"] for e in context["exchanges"]] == ["a new main question"]
    purged = await http.post(f"{thread(s)}/conversations/main/purge", json={})
    context = (
        await http.get(f"/v1/tenants/{TENANT}/subjects/{s}/context", params={"after": purged.json()["position"]})
    ).json()
    assert context["exchanges"] == []
    assert (await export(http, s, after=purged.json()["position"]))["entries"] == []
    assert len((await export(http, s, "before"))["entries"]) == 4


def test_the_cli_previews_retention_and_lists_conversations(live: Settings) -> None:
    env = settings_env(live)
    preview = subprocess.run(
        [MEMLOG, "retention", TENANT, "--now", str(1_700_000_000_000 + 400 * DAY)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert preview.returncode == 0, preview.stderr
    report = json.loads(preview.stdout)
    assert report["dry_run"] is True and report["purged"] == []
    listed = subprocess.run(
        [MEMLOG, "threads", "list", TENANT, "session:nobody-here"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []
    refused = subprocess.run(
        [MEMLOG, "threads", "fork", TENANT, "session:nobody-here"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert refused.returncode == 1 and "target" in refused.stderr
