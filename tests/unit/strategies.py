"""Hypothesis strategies for memlog's events."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from schemas.events import (
    AnswerGiven,
    Envelope,
    QuestionAsked,
    ThreadArchived,
    ThreadEvent,
    ThreadFolded,
    ThreadForked,
    ThreadPurged,
    ThreadRenamed,
    ThreadReset,
    ToolCalled,
)

names = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=40)
texts = st.text(max_size=300).filter(lambda s: "\x00" not in s or True)
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def envelopes(
    draw: st.DrawFn, tenant: str | None = None, subject: str | None = None, at: int | None = None
) -> Envelope:
    thread = draw(st.sampled_from(["session", "public", "automation"]))
    return Envelope(
        tenant=tenant if tenant is not None else draw(names),
        subject=subject if subject is not None else (draw(names) if thread == "session" else draw(st.none() | names)),
        agent=draw(names) if thread == "automation" else draw(st.none() | names),
        thread=thread,
        producer=draw(names),
        occurred_at=at if at is not None else draw(st.integers(0, 2**41)),
        idempotency_key=draw(st.none() | names),
        trace_id=draw(st.none() | names),
    )


@st.composite
def thread_events(draw: st.DrawFn) -> ThreadEvent:
    env = draw(envelopes())
    exchange_id = draw(names)
    kind = draw(st.sampled_from(["question", "tool", "answer", "fold", "reset", "operation"]))
    if kind == "question":
        question = draw(texts.filter(bool))
        return QuestionAsked(
            env,
            exchange_id,
            question,
            draw(st.sampled_from(["v1", "v2", "askx"])),
            draw(st.none() | names),
            conversation=draw(st.none() | names),
            original=draw(st.none() | st.just('{"q":"\\u0000\\ud800"}') | texts),
            tokens=draw(st.none() | st.integers(0, len(question))),  # v4: a carried count
        )
    if kind == "operation":
        source, target = draw(st.lists(names, min_size=2, max_size=2, unique=True))
        return draw(
            st.sampled_from(
                [
                    ThreadRenamed(env, source, target),
                    ThreadForked(env, source, target, draw(st.integers(1, 500))),
                    ThreadArchived(
                        env,
                        source,
                        draw(st.none() | st.booleans()),
                        draw(st.none() | st.booleans()),
                        draw(st.none() | st.sampled_from(["main", "task", "subagent"])),
                        draw(st.none() | texts),
                    ),
                    ThreadPurged(env, source, draw(st.none() | texts), draw(st.none() | st.integers(0, 2**40))),
                ]
            )
        )
    if kind == "fold":
        segment = env.thread != "session" and draw(st.booleans())  # a shared thread's asker's part
        return ThreadFolded(
            env,
            draw(names),
            draw(texts),
            tuple(draw(st.lists(names, min_size=0 if segment else 1, max_size=5))),
            draw(names),
            draw(st.booleans()),
            segment,
        )
    if kind == "reset":
        return ThreadReset(env, draw(st.none() | texts), draw(st.none() | names))
    if kind == "tool":
        return ToolCalled(
            env,
            exchange_id,
            draw(st.integers(0, 50)),
            draw(names),
            json.dumps(draw(json_values)),
            json.dumps(draw(json_values)),
            draw(st.booleans()),
            draw(st.none() | st.integers(0, 2**40)),
            tokens=draw(st.none() | st.integers(0, 9)),  # v3: a carried count
        )
    answer = draw(texts)
    return AnswerGiven(
        env,
        exchange_id,
        answer,
        draw(st.none() | names),
        draw(st.none() | st.integers(0, 2**31)),
        draw(st.none() | st.integers(0, 2**31)),
        tokens=draw(st.none() | st.integers(0, len(answer))),  # v3: a carried count
    )


@st.composite
def session_histories(draw: st.DrawFn, ttl_ms: int) -> list[ThreadEvent]:
    """Events of one subject's session and the tenant's public thread, in log order: exchanges with gaps
    that sometimes outlive the TTL, folds over earlier exchanges (some already folded), and resets."""
    clock = draw(st.integers(10**12, 2 * 10**12))
    events: list[ThreadEvent] = []
    ids: list[str] = []
    for number in range(draw(st.integers(1, 12))):
        clock += draw(st.sampled_from([1000, 60_000, ttl_ms // 2, ttl_ms + 1]))
        thread = draw(st.sampled_from(["session", "session", "public"]))
        env = Envelope(tenant="t", subject="s", thread=thread, producer="p", occurred_at=clock)
        exchange_id = f"x{number}"
        ids.append(exchange_id)
        events.append(QuestionAsked(env, exchange_id, draw(texts.filter(bool)), asker=draw(st.none() | names)))
        for index in range(draw(st.integers(0, 2))):
            events.append(ToolCalled(env, exchange_id, index, "tool", "{}", json.dumps(draw(json_values))))
        if draw(st.booleans()):
            events.append(AnswerGiven(env, exchange_id, draw(texts)))
        action = draw(st.sampled_from(["none", "none", "fold", "reset", "rename", "purge", "side"]))
        if action == "rename":  # the current conversation moves away: the session starts afresh
            events.append(ThreadRenamed(env, "main", f"moved-{number}"))
        elif action == "purge":
            events.append(ThreadPurged(env, "main", "asked"))
        elif action == "side":  # another conversation of the thread never shows in the session
            events.append(QuestionAsked(env, f"side-{number}", "aside", conversation="side"))
        elif action == "fold":
            segment = thread == "public" and draw(st.booleans())  # the asker's part of the public summary
            covers = draw(st.lists(st.sampled_from(ids), min_size=0 if segment else 1, max_size=4, unique=True))
            events.append(ThreadFolded(env, f"f{number}", draw(texts), tuple(covers), "extractive", segment=segment))
        elif action == "reset":
            events.append(ThreadReset(env))
    return events
