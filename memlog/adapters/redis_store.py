"""Sessions in Redis. One Lua script applies a change and its position atomically."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisError,
    ResponseError,
    TryAgainError,
)

from memlog.adapters.redis_scripts import ADVANCE, ERASE_LINES, STORE_READY, WRITE_THREAD
from projections.exports import subject_threads
from projections.folded import Folded
from projections.position import Position
from projections.ready import (
    READY_FORMAT,
    ReadyThread,
    exchange_fragments,
    join_fragments,
    lead_body,
    thread_version,
)
from projections.session import (
    Exchange,
    Loaded,
    Segment,
    Session,
    SessionHead,
    SessionWrite,
    ThreadKey,
)
from projections.traces import Served
from schemas.errors import StoreRefused, StoreUnavailable
from schemas.events import SESSION_THREAD, compact_json

# Replies that say the server cannot take writes for now, not that this write is wrong.
_REDIS_OUTAGES = (ReadOnlyError, ClusterDownError, TryAgainError, OutOfMemoryError, BusyLoadingError)
_REDIS_OUTAGE_REPLIES = ("LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY", "OOM")


class redis_errors:
    """Translate redis-py's exceptions into memlog's at this edge: an outage is retried, while an
    error reply about the data itself (WRONGTYPE, a failing script) is a refusal, so its record is
    dead-lettered instead of stalling the partition. A class, not a generator: the context read
    enters it on every read."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc is None:
            return
        if isinstance(exc, _REDIS_OUTAGES):
            raise StoreUnavailable(f"redis: {exc}") from exc
        if isinstance(exc, ResponseError):
            if str(exc).startswith(_REDIS_OUTAGE_REPLIES):
                raise StoreUnavailable(f"redis: {exc}") from exc
            raise StoreRefused(f"redis refused the write: {exc}") from exc
        if isinstance(exc, RedisError | OSError):
            raise StoreUnavailable(f"redis: {exc}") from exc


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _part(name: str) -> str:
    """A name with its length in front: no choice of names can make two key sequences one string."""
    return f"{len(name)}:{name}"


def thread_base(prefix: str, key: ThreadKey) -> str:
    """`<prefix>:{<thread>:<len>:<tenant>:<len>:<owner>}`.

    Length-prefixed names, so that an owner named `x:h` is never owner `x`'s head key, and a hash
    tag in braces, so that all keys of one thread share one Redis Cluster slot (a name holding a
    brace only ends the tag early, identically for every key of that thread).
    """
    return f"{prefix}:{{{key.thread}:{_part(key.tenant)}:{_part(key.owner)}}}"


def served_key(prefix: str, key: ThreadKey) -> str:
    """The thread's served mark (`ServedMarks`): its runs' links, a line each, beside its other keys, in
    the same slot, with the expiry of the latest run that serves it. (`:e` held a mark without the
    links before: a read could not trust it to name every run, so marks moved to a new key.)"""
    return f"{thread_base(prefix, key)}:n"


def unlinked_served_key(prefix: str, key: ThreadKey) -> str:
    """The served mark of memlogs that kept no links (`served_key`): removed with the subject."""
    return f"{thread_base(prefix, key)}:e"


def lines_index(prefix: str, tenant: str, subject: str) -> str:
    """The shared threads (public, automation) a subject has lines (or a part of the summary) in: a
    sorted set scored by the threads' expiry, itself kept as long as the longest-lived of them."""
    return f"{prefix}:{{lines:{_part(tenant)}:{_part(subject)}}}"


SEGMENT_FIELD = "seg:"  # + the asker: a shared thread's summary part, in its head (no asker: "seg:" alone)
ASKER_FIELD = "ask:"  # + the subject: someone who has had lines in a shared thread, in its head


# The format a thread's ready context is stored in: the fragments' (`READY_FORMAT`) and this store's
# layout of them, with the read's meta key `m` (`ready_meta` in memlog/adapters/redis_scripts.py). A writer of
# an older memlog finds another format, takes the ready context for stale and drops `t` and `v`, so a
# read never trusts a meta it did not keep current.
STORED_FORMAT = f"{READY_FORMAT}+m"
DECODED_THREADS = 256  # the threads whose read meta a store keeps decoded (the latest of each)
DECODED_BYTES = 16_384  # a larger meta (a long summary, many parts) is decoded on each read


@dataclass(frozen=True, slots=True)
class ReadMeta:
    """A thread's read meta (`ready_meta` in memlog/adapters/redis_scripts.py), decoded: a pure function of its
    bytes and the thread's key, so a store keeps the latest of each thread it serves."""

    text_bytes: int
    view_bytes: int
    head: SessionHead
    version: str
    ids: tuple[str, ...]
    lead: bytes  # the summary's lead as inside the rendered context's JSON string (`lead_body`)

    @classmethod
    def decode(cls, key: ThreadKey, meta: bytes) -> ReadMeta | None:
        """None for a meta in another format, or not one this store wrote."""
        try:
            fmt, text_bytes, view_bytes, fields, ids = json.loads(meta)
            if fmt != STORED_FORMAT:
                return None
            head = _head_of(fields)
            return cls(int(text_bytes), int(view_bytes), head, _version(fields), tuple(ids), lead_body(head, key))
        except (ValueError, TypeError, AttributeError, KeyError):
            return None


class RedisSessionStore:
    """Threads under `<prefix>:{<thread identity>}:h|x|o|r|t|v|m` (head, exchanges, order, ready context:
    lengths, texts, views, the read's meta) and `:n` (its served mark), the subject's
    shared-thread index under `<prefix>:{lines:...}`, checkpoints under `<prefix>:applied:<topic>`.

    Args:
        client: a redis.asyncio client (bytes responses).
        prefix: the namespace's key prefix; a replay writes under another one.
    """

    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self._redis = client
        self._prefix = prefix
        self._write_thread = client.register_script(WRITE_THREAD)
        self._advance = client.register_script(ADVANCE)
        self._erase_lines = client.register_script(ERASE_LINES)
        self._store_ready = client.register_script(STORE_READY)
        self._cluster = isinstance(client, RedisCluster)  # runs no script inside a pipeline
        # ServedMarks: every stored run has its link in its thread's mark (`served-marks` was the mark of
        # marks without links: a namespace that has it alone is marked again, with the links)
        self._marks_complete = f"{prefix}:served-links"
        self._decoded: dict[ThreadKey, tuple[bytes, ReadMeta]] = {}  # each thread's latest meta, decoded
        self._read_keys: dict[ThreadKey, tuple[str, str, str, str]] = {}  # what `read_ready` reads, per thread

    def _keys(self, key: ThreadKey) -> tuple[str, str, str, str, str, str, str]:
        """Head, exchanges, order, and the ready context: its lengths, texts, views and the read's meta."""
        base = thread_base(self._prefix, key)
        return f"{base}:h", f"{base}:x", f"{base}:o", f"{base}:r", f"{base}:t", f"{base}:v", f"{base}:m"

    def _checkpoints(self, topic: str) -> str:
        return f"{self._prefix}:applied:{topic}"

    async def applied(self, topic: str, partition: int) -> int:
        with redis_errors():
            value = await self._redis.hget(self._checkpoints(topic), str(partition))  # type: ignore[misc]
        return -1 if value is None else int(value)

    async def applied_many(self, topic: str, partitions: Sequence[int]) -> list[int]:
        """Several partitions' checkpoints (the watchdog's round) in one round trip, -1 where none."""
        with redis_errors():
            values = await self._redis.hmget(self._checkpoints(topic), [str(p) for p in partitions])  # type: ignore[misc]
        return [-1 if value is None else int(value) for value in values]

    async def advance(self, position: Position) -> None:
        with redis_errors():
            await self._advance(keys=[self._checkpoints(position.topic)], args=[position.partition, position.offset])

    async def load(self, wanted: list[tuple[ThreadKey, str]]) -> Loaded:
        keys = sorted({key for key, _ in wanted})
        with redis_errors():
            async with self._redis.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.hgetall(self._keys(key)[0])
                for key, exchange_id in wanted:
                    pipe.hget(self._keys(key)[1], exchange_id)
                replies = await pipe.execute()
        heads = {key: (_head(raw) if raw else None) for key, raw in zip(keys, replies[: len(keys)], strict=True)}
        return {
            (key, exchange_id): (heads[key], Exchange.from_json(raw) if raw else None)
            for (key, exchange_id), raw in zip(wanted, replies[len(keys) :], strict=True)
        }

    async def versions(self, keys: list[ThreadKey]) -> dict[ThreadKey, str | None]:
        with redis_errors():
            async with self._redis.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.hmget(self._keys(key)[0], ["pos", "ver"])
                replies = await pipe.execute()
        return {
            key: None if pos is None else thread_version(int(pos), int(ver or 0))
            for key, (pos, ver) in zip(keys, replies, strict=True)
        }

    async def write(self, writes: list[SessionWrite], now_ms: int) -> list[bool]:
        """One script call per thread with all its changes, then the partitions' checkpoints.

        The pipeline runs in order on one connection, so a checkpoint moves only after every
        write before it has landed; a pipeline cut short leaves the checkpoints behind, never ahead.
        """
        if not writes:
            return []
        by_thread: dict[ThreadKey, list[int]] = {}
        newest: dict[tuple[str, int], int] = {}
        for index, write in enumerate(writes):
            position = write.position
            mark = (position.topic, position.partition)
            newest[mark] = max(newest.get(mark, -1), position.offset)
            if write.key is not None and write.change is not None:
                by_thread.setdefault(write.key, []).append(index)
        shared = any(key.thread != SESSION_THREAD for key in by_thread)
        calls = [
            (list(self._keys(key)), self._thread_args(key, indexes, writes, now_ms))
            for key, indexes in by_thread.items()
        ]
        with redis_errors():
            if self._cluster:
                replies = await self._write_on_cluster(by_thread, calls, newest, shared)
            else:

                def thread_writes(pipe: Any) -> None:
                    for keys, args in calls:
                        self._evalsha(pipe, self._write_thread, keys, args)
                    if not shared:
                        self._advance_all(pipe, newest)

                replies = await self._scripted(thread_writes)
                if shared:
                    # a second round trip: the lines indexes of everyone in a shared thread follow its
                    # expiry, which the writes may have moved; the checkpoints move only after them

                    def indexes_then_checkpoints(pipe: Any) -> None:
                        self._keep_all_indexes(pipe, by_thread, replies)
                        self._advance_all(pipe, newest)

                    await self._scripted(indexes_then_checkpoints)
        applied = [True] * len(writes)
        for indexes, reply in zip(by_thread.values(), replies[: len(by_thread)], strict=True):
            for index, flag in zip(indexes, reply[0], strict=True):
                applied[index] = bool(flag)
        return applied

    @staticmethod
    def _thread_args(key: ThreadKey, indexes: list[int], writes: list[SessionWrite], now_ms: int) -> list[Any]:
        thread_writes = [writes[index] for index in indexes]
        forms = exchange_forms(thread_writes, now_ms)
        changes = compact_json([_change_args(write, form[0]) for write, form in zip(thread_writes, forms, strict=True)])
        args: list[Any] = [now_ms, changes, "0" if key.thread == SESSION_THREAD else "1", STORED_FORMAT]
        for _, text, view in forms:
            args += (text, view)
        return args

    def _keep_all_indexes(self, pipe: Any, by_thread: dict[ThreadKey, list[int]], replies: list[Any]) -> None:
        for key, reply in zip(by_thread, replies[: len(by_thread)], strict=True):
            if key.thread != SESSION_THREAD:
                self._keep_indexes(pipe, key, int(reply[1]), [_text(name) for name in reply[2]])

    async def _write_on_cluster(
        self,
        by_thread: dict[ThreadKey, list[int]],
        calls: list[tuple[list[str], list[Any]]],
        newest: dict[tuple[str, int], int],
        shared: bool,
    ) -> list[Any]:
        """Redis Cluster runs no script in a pipeline: one call per thread, then the lines indexes, then
        the checkpoints, each step after the one before."""
        # one after another: redis-py 7.4's async cluster client, given concurrent commands on a connection
        # it is still opening, can send one twice (measured: 3 writes in 40 reported as applied before)
        replies = [await self._write_thread(keys=keys, args=args) for keys, args in calls]
        if shared:
            async with self._redis.pipeline(transaction=False) as pipe:
                self._keep_all_indexes(pipe, by_thread, replies)
                await pipe.execute()
        for (topic, partition), offset in newest.items():
            await self._advance(keys=[self._checkpoints(topic)], args=[partition, offset])
        return replies

    def _advance_all(self, pipe: Any, newest: dict[tuple[str, int], int]) -> None:
        for (topic, partition), offset in newest.items():
            self._evalsha(pipe, self._advance, [self._checkpoints(topic)], [partition, offset])

    @staticmethod
    def _evalsha(pipe: Any, script: Any, keys: list[str], args: list[Any]) -> None:
        """The script's call added to `pipe` by its digest alone: redis-py's own way (`script(client=pipe)`)
        makes the pipeline ask SCRIPT EXISTS first, a round trip more on every write (issue 38)."""
        pipe.evalsha(script.sha, len(keys), *keys, *args)

    async def _scripted(self, fill: Callable[[Any], None]) -> list[Any]:
        """One round trip: the pipeline `fill` makes. A Redis that has lost the scripts (restarted, SCRIPT
        FLUSH) answers NOSCRIPT to every call in it: they are loaded and the pipeline sent again, which
        applies nothing twice (each write and checkpoint move is idempotent by its position)."""
        for attempt in range(2):
            async with self._redis.pipeline(transaction=False) as pipe:
                fill(pipe)
                try:
                    return list(await pipe.execute())
                except NoScriptError:
                    if attempt:
                        raise
            for script in (self._write_thread, self._advance):
                script.sha = await self._redis.script_load(script.script)
        raise AssertionError("unreachable")

    def _keep_indexes(self, pipe: Any, key: ThreadKey, expires_at: int, askers: list[str]) -> None:
        """Each asker's lines index names the thread and lives at least until the thread expires."""
        if expires_at < 0:
            return  # the thread is gone (or, never here, kept for good)
        member = json.dumps([key.thread, key.owner], ensure_ascii=False)
        for subject in askers:
            index = lines_index(self._prefix, key.tenant, subject)
            pipe.zadd(index, {member: expires_at}, gt=True)
            pipe.pexpireat(index, expires_at, nx=True)  # GT alone never sets an expiry on a key without one
            pipe.pexpireat(index, expires_at, gt=True)

    async def read(self, key: ThreadKey) -> Session | None:
        found = await self._read(key)
        return None if found is None else found[1]

    async def _read(self, key: ThreadKey) -> tuple[dict[str, str], Session] | None:
        """The head's fields as stored, and the session."""
        head_key, ex_key, order_key = self._keys(key)[:3]
        with redis_errors():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hgetall(head_key)
                pipe.lrange(order_key, 0, -1)
                pipe.hgetall(ex_key)
                raw_head, order, raw_exchanges = await pipe.execute()
        if not raw_head:
            return None
        exchanges = {_text(k): v for k, v in raw_exchanges.items()}
        fields = {_text(k): _text(v) for k, v in raw_head.items()}
        return fields, Session(
            head=_head_of(fields),
            exchanges=tuple(Exchange.from_json(exchanges[_text(i)]) for i in order if _text(i) in exchanges),
        )

    async def read_ready(self, key: ThreadKey) -> ReadyThread | None:
        """One MGET of the ready context's texts, views and meta (`ready_meta` in memlog/adapters/redis_scripts.py)
        and the served mark: served as stored when the meta is in this format and names the lengths of
        the texts and views read with it (every writer rewrites it with them, or drops it); otherwise the
        thread is read from its exchanges and its ready context stored for the next read."""
        names = self._read_keys.get(key) or self._names(key)
        with redis_errors():
            texts, views, meta, served = await self._redis.mget(names)
        if meta is not None and texts is not None and views is not None:
            known = self._decoded.get(key)
            decoded = known[1] if known is not None and known[0] == meta else self._decode(key, meta)
            if decoded is not None and decoded.text_bytes == len(texts) and decoded.view_bytes == len(views):
                return ReadyThread.joined(
                    decoded.head, decoded.version, decoded.ids, decoded.lead, texts, views, served=served
                )
        return await self._ready_from_exchanges(key, stale_meta=meta is not None)

    def _decode(self, key: ThreadKey, meta: bytes) -> ReadMeta | None:
        decoded = ReadMeta.decode(key, meta)
        if decoded is not None and len(meta) <= DECODED_BYTES:
            _keep(self._decoded, key, (meta, decoded))
        return decoded

    def _names(self, key: ThreadKey) -> tuple[str, str, str, str]:
        """The keys `read_ready` reads: texts, views, meta, served mark."""
        _, _, _, _, texts, views, meta = self._keys(key)
        names = texts, views, meta, served_key(self._prefix, key)
        _keep(self._read_keys, key, names)
        return names

    async def _ready_from_exchanges(self, key: ThreadKey, stale_meta: bool = False) -> ReadyThread | None:
        found = await self._read(key)
        keys = self._keys(key)
        if found is None:
            if stale_meta:  # left by a writer of an older memlog that dropped the thread: its data goes too
                with redis_errors():
                    await self._redis.delete(keys[6])
            return None
        fields, session = found
        fragments = [exchange_fragments(exchange) for exchange in session.exchanges]
        texts, views = join_fragments(fragments)
        lengths: list[Any] = []
        for exchange, (text, view) in zip(session.exchanges, fragments, strict=True):
            lengths += [exchange.exchange_id, f"{len(text)}:{len(view)}"]
        with redis_errors():
            await self._store_ready(
                keys=list(keys),
                args=[STORED_FORMAT, fields.get("pos", ""), fields.get("ver", "0"), texts, views, *lengths],
            )
            served = await self._redis.get(served_key(self._prefix, key))
        ids = tuple(exchange.exchange_id for exchange in session.exchanges)
        return ReadyThread.of(key, session.head, _version(fields), ids, texts, views, served=served)

    async def drop(self, key: ThreadKey) -> None:
        with redis_errors():
            await self._redis.delete(*self._keys(key))

    async def _shared_threads(self, tenant: str, subject: str) -> list[ThreadKey]:
        """The shared threads the subject has written lines in, from the index the writes keep."""
        with redis_errors():
            members = await self._redis.zrange(lines_index(self._prefix, tenant, subject), 0, -1)
        return [ThreadKey(tenant, *json.loads(_text(member))) for member in members]

    async def erase_subject(self, tenant: str, subject: str) -> dict[str, int]:
        """The subject's session, and their lines in the tenant's public and automation threads."""
        own = ThreadKey.session(tenant, subject)
        session = self._keys(own)
        with redis_errors():
            exchanges = int(await self._redis.hlen(session[1]))  # type: ignore[misc]
            await self._redis.delete(*session, served_key(self._prefix, own), unlinked_served_key(self._prefix, own))
            lines = parts = 0
            for key in await self._shared_threads(tenant, subject):
                removed, part = await self._erase_lines(keys=list(self._keys(key)), args=[subject])
                lines, parts = lines + int(removed), parts + int(part)
            await self._redis.delete(lines_index(self._prefix, tenant, subject))
        return {"session_exchanges": exchanges, "shared_thread_lines": lines, "shared_thread_summaries": parts}

    async def mark_served(self, served: dict[ThreadKey, Served]) -> None:
        if not served:
            return
        with redis_errors():
            async with self._redis.pipeline(transaction=False) as pipe:
                for key, mark in served.items():
                    name = served_key(self._prefix, key)
                    pipe.append(name, mark.links)  # a link twice reads as one (`served_links`)
                    pipe.pexpireat(name, mark.until_ms, nx=True)  # a new mark ends with its run (one past: gone)
                    pipe.pexpireat(name, mark.until_ms, gt=True)  # a later run's end extends it, never shortens
                await pipe.execute()

    async def served_marks_complete(self) -> bool:
        with redis_errors():
            return bool(await self._redis.exists(self._marks_complete))

    async def complete_served_marks(self) -> None:
        with redis_errors():
            await self._redis.set(self._marks_complete, b"1")

    async def export_subject(self, tenant: str, subject: str) -> dict[str, Any]:
        session = await self.read(ThreadKey.session(tenant, subject))
        shared: list[tuple[ThreadKey, Session]] = []
        for key in await self._shared_threads(tenant, subject):
            thread = await self.read(key)
            if thread is not None:
                shared.append((key, thread))
        return subject_threads(subject, session, shared)


def _keep(kept: dict[ThreadKey, Any], key: ThreadKey, value: Any) -> None:
    """Keep `value` for the thread, forgetting the longest-kept thread's beyond DECODED_THREADS."""
    if key not in kept and len(kept) >= DECODED_THREADS:
        del kept[next(iter(kept))]
    kept[key] = value


def _change_args(write: SessionWrite, exchange_json: str) -> list[Any]:
    change = write.change
    assert change is not None
    exchange = change.exchange
    segment = change.segment
    segment_field = segment_value = ""
    if segment is not None:
        segment_field = SEGMENT_FIELD + (segment.asker or "")
        if segment.text:
            part: dict[str, Any] = {"text": segment.text, "tokens": segment.tokens, "at": segment.at}
            if segment.folded is not None:
                part["folded"] = segment.folded.to_json()
            segment_value = json.dumps(part)
    return [
        str(write.position.offset),
        exchange.exchange_id if exchange else "",
        exchange_json,
        str(change.token_delta),
        str(change.last_question_at),
        str(change.expires_at),
        "1" if change.reset else "0",
        "0" if change.summary is None else "1",
        change.summary or "",
        str(change.summary_tokens),
        str(change.count_delta),
        list(change.remove),
        (exchange.subject or "") if exchange is not None and write.key and write.key.thread != SESSION_THREAD else "",
        segment_field,
        segment_value,
        "" if change.folded is None else json.dumps(change.folded.to_json()),
    ]


_NO_FORM = ("", b"", b"")


def exchange_forms(writes: list[SessionWrite], now_ms: int) -> list[tuple[str, bytes, bytes]]:
    """For each of one thread's writes (in log order, all in one script call), its exchange as the script
    stores it: the JSON, and the ready context's two fragments (none: empty).

    The script applies a thread's changes in order and at once, skipping only those applied already (a
    leading run: positions grow) and those expired by `now_ms`. So a change may carry the form of a later
    change of the same exchange when every change from it to that one is written: the stored exchange
    and fragments come out as the last write makes them, and an exchange is encoded once per call, not
    once per event (its question, tool calls and answer mostly land in one batch). An expired change, a
    reset or a removal of the exchange ends the borrowing.
    """
    forms = [_NO_FORM] * len(writes)
    later: dict[str, tuple[str, bytes, bytes]] = {}
    for index in range(len(writes) - 1, -1, -1):
        change = writes[index].change
        if change is None:
            continue
        exchange = change.exchange
        if change.expires_at <= now_ms:
            later.clear()  # not written: nothing before it may take the form of anything after it
            if exchange is not None:
                forms[index] = (exchange.to_json(), *exchange_fragments(exchange))
            continue
        if exchange is not None:
            form = later.get(exchange.exchange_id)
            if form is None:
                form = later[exchange.exchange_id] = (exchange.to_json(), *exchange_fragments(exchange))
            forms[index] = form
        if change.reset:
            later.clear()  # what came before belongs to the thread's earlier life
        for gone in change.remove:
            later.pop(gone, None)
    return forms


def _texts(raw: dict[Any, Any]) -> dict[str, str]:
    return {_text(k): _text(v) for k, v in raw.items()}


def _version(fields: dict[str, str]) -> str:
    return thread_version(int(fields.get("pos", -1)), int(fields.get("ver", 0)))


def _head(raw: dict[Any, Any]) -> SessionHead:
    return _head_of(_texts(raw))


def _head_of(fields: dict[str, str]) -> SessionHead:
    """The head from its fields, decoded."""
    segments = []
    for name, value in fields.items():
        if name.startswith(SEGMENT_FIELD):
            part = json.loads(value)
            asker = name[len(SEGMENT_FIELD) :] or None
            folded = Folded.from_json(part.get("folded"))
            segments.append(Segment(asker, str(part["text"]), int(part["tokens"]), int(part["at"]), folded))
    return SessionHead(
        last_question_at=int(fields.get("last_q", 0)),
        tokens=int(fields.get("tokens", 0)),
        summary=fields.get("summary", ""),
        summary_tokens=int(fields.get("stokens", 0)),
        count=int(fields.get("count", 0)),
        segments=tuple(sorted(segments, key=Segment.order)),
        folded=Folded.from_json(json.loads(fields["folded"])) if "folded" in fields else None,
        applied=int(fields.get("pos", -1)),
    )


class RedisCounters:
    """Counters operators look at: dead letters per source topic."""

    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self._redis = client
        self._key = f"{prefix}:deadletters"

    async def count_dead_letter(self, topic: str) -> None:
        with redis_errors():
            await self._redis.hincrby(self._key, topic, 1)  # type: ignore[misc]

    async def dead_letters(self) -> dict[str, int]:
        with redis_errors():
            raw = await self._redis.hgetall(self._key)  # type: ignore[misc]
        return {_text(k): int(v) for k, v in raw.items()}
