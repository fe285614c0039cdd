"""A thread's context kept ready to serve: what a context read returns, as JSON fragments (issue 16).

A context read is the hot path of every answer. Instead of loading every exchange, decoding its JSON,
rendering the text again and validating it through models on each read, the projection keeps, beside
the exchanges, each exchange's two JSON fragments as the read returns them, concatenated in the
thread's order: its rendered text (inside a JSON string) and its view (in a JSON array). Between folds
the thread only grows at its end (seed 000), so a write appends; a fold, an erasure of lines, or an
update to an exchange that is not the newest splices. A read is then one round trip and a few byte
concatenations. Pure: the stores keep the fragments, these rules make them.

What depends on more than the thread is made at read time, never stored: the summary's lead with its
loss notice (from the head and the thread's key: a fold changes it, and it comes first), and the
evidence of tool calls (seed 004: the runs that served them, from the traces, and an unanswered call's
status, from the clock), which `memlog/app/evidence.py` splices into the views when there is any.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_json

from projections.evidence import with_evidence
from projections.session import Exchange, Session, SessionHead, ThreadKey

# The fragments' format: a store holding another (or none: a thread written before there were
# fragments) serves the thread from its exchanges and writes the fragments afresh.
READY_FORMAT = "3"  # 2: views with the evidence fields (seed 004); 3: with receipts and answer_state


def json_string_body(text: str) -> bytes:
    """`text` as inside a JSON string, without the quotes: escapes are per character, so the body of a
    concatenation is the concatenation of the bodies."""
    return to_json(text)[1:-1]


# In a view as stored, the bytes of a tool call with no result yet (`"result":null` then `"ok":true`:
# JSON keeps a string's quotes escaped, so these bytes only ever begin keys). Its status (pending,
# then incomplete) depends on the clock: a read that finds them derives the statuses afresh. They may
# also match a tool's own arguments: the read then only does work it did not need.
UNANSWERED = b'"result":null,"ok":true'


def ready_view(exchange: Exchange) -> dict[str, Any]:
    """The exchange's view as a context read returns it when no run names it (evidence, seed 004):
    each tool call with its status (`ok`/`error` once answered; an unanswered call's, `pending` here,
    is derived at read time, see UNANSWERED) and `run_id` null, and the exchange's `run_id` null."""
    return with_evidence(exchange.view(), {}, now_ms=0, timeout_ms=1)


def exchange_fragments(exchange: Exchange) -> tuple[bytes, bytes]:
    """The exchange's rendered text (a JSON string's body) and its view as JSON, after a comma: every
    view carries its comma in front, so the array is `[` + the views without their first byte + `]`.

    Serialised by pydantic-core, as the API's models serialise a context, so the bytes are the same."""
    return json_string_body(exchange.render()), b"," + to_json(ready_view(exchange))


def summary_lead(head: SessionHead, key: ThreadKey) -> str:
    """The rendered context's beginning, before the exchanges: the summary with its loss notice, when
    there is one (`Session.render`). Made at read time from the head: only a fold changes it."""
    return Session(head).render(key)


def lead_body(head: SessionHead, key: ThreadKey) -> bytes:
    """`summary_lead` as inside the rendered context's JSON string (empty without a summary)."""
    lead = summary_lead(head, key)
    return json_string_body(lead) if lead else b""


@dataclass(frozen=True)
class ReadyThread:
    """A thread as a context read serves it.

    `version` changes whenever anything here changes (the thread's applied position, and a count of
    the changes made outside the log's order, such as an erasure of lines): with the namespace it
    names one state of the thread, for an ETag.
    """

    head: SessionHead
    version: str
    exchange_ids: tuple[str, ...]  # in order: evidence joins the runs that served them at read time
    exchanges_json: bytes  # the JSON array of the exchanges' views (`ready_view`)
    rendered_json: bytes  # the rendered context (summary and exchanges) as a JSON string, quotes included
    # the thread's served mark as stored (`projections.traces.Served.links`): the links of the runs that
    # serve its exchanges, which seed 004's evidence joins without a trace query; None: no mark
    served: bytes | None = field(default=None, compare=False)

    @classmethod
    def of(
        cls,
        key: ThreadKey,
        head: SessionHead,
        version: str,
        ids: tuple[str, ...],
        texts: bytes,
        views: bytes,
        served: bytes | None = None,
    ) -> ReadyThread:
        """From the concatenated fragments as stored (`texts`: the rendered exchanges' string bodies;
        `views`: the views, each after its comma) of the exchanges `ids`, in order."""
        return cls.joined(head, version, ids, lead_body(head, key), texts, views, served)

    @classmethod
    def joined(
        cls,
        head: SessionHead,
        version: str,
        ids: tuple[str, ...],
        lead: bytes,
        texts: bytes,
        views: bytes,
        served: bytes | None = None,
    ) -> ReadyThread:
        """`of`, given the thread's `lead_body` (a store may keep it with the head it was made from)."""
        return cls(
            head=head,
            version=version,
            exchange_ids=ids,
            exchanges_json=b"".join((b"[", memoryview(views)[1:], b"]")),
            rendered_json=b"".join((b'"', lead, texts, b'"')),
            served=served,
        )

    @classmethod
    def of_session(cls, key: ThreadKey, session: Session, version: str) -> ReadyThread:
        """The same read from the exchanges themselves: a thread stored without fragments."""
        texts, views = join_fragments(exchange_fragments(exchange) for exchange in session.exchanges)
        ids = tuple(exchange.exchange_id for exchange in session.exchanges)
        return cls.of(key, session.head, version, ids, texts, views)


def join_fragments(fragments: Iterable[tuple[bytes, bytes]]) -> tuple[bytes, bytes]:
    pieces = list(fragments)
    return b"".join(text for text, _ in pieces), b"".join(view for _, view in pieces)


def thread_version(offset: int, edits: int) -> str:
    """The version of a thread applied up to `offset`, changed `edits` times outside the log's order."""
    return f"{offset}.{edits}"


def etag(*parts: bytes | str) -> str:
    """A strong ETag over the parts that make a response."""
    digest = hashlib.blake2b(digest_size=12)
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return f'"{digest.hexdigest()}"'
