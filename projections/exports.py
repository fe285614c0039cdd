"""A subject's part of an export (DESIGN "Erasure, export, replay"): their session, and their lines and parts
of the summaries on the shared threads, as plain data. Pure: no I/O; the stores load the threads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from projections.session import Session, ThreadKey


def subject_threads(
    subject: str, session: Session | None, shared: Sequence[tuple[ThreadKey, Session]]
) -> dict[str, Any]:
    """A subject's part of an export: their session, and their lines and their parts of the summaries on
    the shared threads, as plain data."""
    lines = [
        {"thread": key.thread, "agent": key.owner or None, **json.loads(exchange.to_json())}
        for key, thread in shared
        for exchange in thread.exchanges
        if exchange.subject == subject
    ]
    summaries = [
        {"thread": key.thread, "agent": key.owner or None, "summary": segment.text, "at": segment.at}
        for key, thread in shared
        for segment in thread.head.segments
        if segment.asker == subject
    ]
    return {
        "session": None
        if session is None
        else {
            "summary": session.head.summary,
            "exchanges": [json.loads(exchange.to_json()) for exchange in session.exchanges],
        },
        "shared_thread_lines": lines,
        "shared_thread_summaries": summaries,
    }
