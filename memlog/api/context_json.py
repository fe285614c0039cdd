"""A context read's response from the thread's ready context (issue 16): the JSON bytes put together
from the fragments the projection keeps, in the `Context` model's shape and exactly as its serialiser
writes them (pydantic-core), with an `ETag`; `If-None-Match` naming it answers 304 with no body."""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response
from pydantic import TypeAdapter
from pydantic_core import to_json

from memlog.api.models import FactOut, SummaryNotice
from memlog.app.context import ReadyContext

_FACTS: TypeAdapter[list[FactOut]] = TypeAdapter(list[FactOut])
NOT_MODIFIED: dict[int | str, dict[str, Any]] = {
    304: {"description": "Not Modified: `If-None-Match` names the context's current `ETag`; no body."}
}


def facts_json(facts: list[dict[str, Any]]) -> bytes:
    """The facts as the `Context` model writes them (validated through `FactOut`, as it does)."""
    return _FACTS.dump_json(_FACTS.validate_python(facts)) if facts else b"[]"


def context_body(read: ReadyContext, facts: bytes) -> bytes:
    """The `Context` model's JSON, field by field in its order."""
    head = read.ready.head
    return b"".join(
        (
            b'{"tenant":',
            to_json(read.tenant),
            b',"subject":',
            to_json(read.subject),
            b',"thread":',
            to_json(read.thread),
            b',"owner":',
            to_json(read.owner),
            b',"summary":',
            to_json(head.summary_text),
            b',"exchanges":',
            read.exchanges_json,
            b',"facts":',
            facts,
            b',"tokens":',
            b"%d" % head.tokens,
            b',"fold_at_tokens":',
            b"%d" % read.fold_at_tokens,
            b',"tokens_to_fold":',
            b"%d" % read.tokens_to_fold,
            b',"exchanges_to_fold":',
            b"%d" % read.exchanges_to_fold,
            b',"rendered":',
            read.ready.rendered_json,
            b',"rendered_facts":',
            to_json(read.rendered_facts),
            b',"summary_notice":',
            b"null"
            if read.summary_notice is None
            else SummaryNotice.model_validate(read.summary_notice).model_dump_json().encode(),
            b"}",
        )
    )


def matches(if_none_match: str | None, tag: str) -> bool:
    """Any listed entity tag equal to ours by the weak comparison (RFC 9110 13.1.2). Not `*` (issue 41):
    a context always exists, so `*` would answer 304 for ever and its client would never see a change."""
    if not if_none_match:
        return False
    return any(listed.strip().removeprefix("W/") == tag for listed in if_none_match.split(","))


def context_response(request: Request, read: ReadyContext) -> Response:
    return context_answer(request.headers.get("if-none-match"), read)


def context_answer(if_none_match: str | None, read: ReadyContext) -> Response:
    facts = facts_json(read.facts)
    tag = read.etag(facts)
    headers = {"ETag": tag, "Cache-Control": "private, no-cache"}
    if matches(if_none_match, tag):
        return Response(status_code=304, headers=headers)
    return Response(context_body(read, facts), media_type="application/json", headers=headers)
