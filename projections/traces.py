"""Run traces (seed 000, "Traces"): sampling, the projected document, and the shape operators see. Pure."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from projections.archives import parse_thread, thread_ref
from projections.receipts import is_receipt, receipt_line
from projections.redaction import Redactor
from projections.session import ThreadKey
from schemas.errors import InvalidEvent
from schemas.events import RunTraced
from schemas.limits import INT64_MAX

DAY_MS = 86_400_000


def sampled(run_id: str, rate: float) -> bool:
    """TRACE_SAMPLE, decided by the run id alone, so every replay keeps the same runs."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    digest = hashlib.sha256(run_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


def redact_run(run: RunTraced, redactor: Redactor) -> RunTraced:
    """The run with every prompt, output, argument and result redacted."""
    return replace(
        run,
        steps=tuple(
            replace(step, prompt=redactor.text(step.prompt), output=redactor.text(step.output)) for step in run.steps
        ),
        tool_calls=tuple(
            replace(call, arguments=redactor.json_text(call.arguments), result=redactor.json_text(call.result))
            for call in run.tool_calls
        ),
    )


def trace_document(run: RunTraced, redactor: Redactor, keep_days: float) -> dict[str, Any]:
    """The stored trace: redacted again here, kept `keep_days` after the run ended (TRACE_DAYS)."""
    clean = redact_run(run, redactor)
    env = clean.envelope
    return {
        "_id": f"{len(env.tenant)}:{env.tenant}:{clean.run_id}",
        "tenant": env.tenant,
        "subject": env.subject,
        "agent": env.agent,
        "run_id": clean.run_id,
        "status": clean.status,
        "started_at": clean.started_at,
        "ended_at": clean.ended_at,
        # a run ending near the end of time is kept until then: past int64, MongoDB could store nothing
        "expires_at": min(clean.ended_at + round(keep_days * DAY_MS), INT64_MAX),
        "steps": [step.__dict__ for step in clean.steps],
        "tool_calls": [call.__dict__ for call in clean.tool_calls],
        # seed 004, "Evidence and completion": the exchange (and its tool call) this run served, in its thread
        "exchange_id": clean.exchange_id,
        "call_index": clean.call_index,
        "exchange_thread": None if clean.exchange_id is None else thread_ref(env.thread, env.owner),
    }


@dataclass(frozen=True)
class Served:
    """What a thread's served mark holds (seed 004's evidence): a line of JSON per link of a stored run
    to the exchange (and call) it served in the thread, each with its run's `expires_at`, and the
    latest of those ends, until which the mark is kept. A context read joins the tool calls from the
    links alone, so it asks the trace store nothing."""

    links: bytes
    until_ms: int


def link_line(doc: dict[str, Any]) -> bytes:
    """A stored run's link, as its thread's mark keeps it: what `projections.evidence.latest_runs` reads;
    a stored receipt's (`projections.receipts.receipt_line`), what `latest_receipts` reads."""
    if is_receipt(doc):
        return receipt_line(doc)
    link = {
        "exchange_id": doc["exchange_id"],
        "call_index": doc.get("call_index"),
        "run_id": doc["run_id"],
        "started_at": int(doc.get("started_at") or 0),
        "expires_at": int(doc.get("expires_at") or 0),
    }
    return json.dumps(link, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def served_threads(docs: Iterable[dict[str, Any]], now_ms: int) -> dict[ThreadKey, Served]:
    """The threads these stored runs (or receipts) serve (seed 004: the exchange a run served, in its
    thread), each with its runs' links and the latest `expires_at` of them. A run that served no
    exchange, or that has expired by `now_ms`, marks nothing."""
    served: dict[ThreadKey, Served] = {}
    for doc in docs:
        ref, expires_at = doc.get("exchange_thread"), int(doc.get("expires_at") or 0)
        if not isinstance(ref, str) or expires_at <= now_ms or doc.get("exchange_id") is None:
            continue
        try:
            key = ThreadKey(str(doc["tenant"]), *parse_thread(ref))
        except InvalidEvent:
            continue  # not a thread memlog writes: no context read names it
        served = merge_served(served, {key: Served(link_line(doc), expires_at)})
    return served


def merge_served(left: dict[ThreadKey, Served], right: dict[ThreadKey, Served]) -> dict[ThreadKey, Served]:
    """Two sets of served marks as one: each thread with the links of both, until the later of its two ends."""
    merged = dict(left)
    for key, mark in right.items():
        known = merged.get(key)
        merged[key] = mark if known is None else Served(known.links + mark.links, max(known.until_ms, mark.until_ms))
    return merged


def served_links(links: bytes, now_ms: int) -> list[dict[str, Any]]:
    """The unexpired links a mark holds (a line twice, as a redelivered batch may write it, is one link)."""
    found = []
    for line in dict.fromkeys(links.splitlines()):
        if not line:
            continue
        link = json.loads(line)
        if int(link.get("expires_at", 0)) > now_ms:
            found.append(link)
    return found


def shape(doc: dict[str, Any]) -> dict[str, Any]:
    """What the admin panel shows: steps, models, tools, success, tokens, timings. Never prompts, outputs,
    arguments or results: they are not copied, so they cannot leak."""
    timeline: list[dict[str, Any]] = []
    for step in doc.get("steps", []):
        timeline.append(
            {
                "seq": step["seq"],
                "kind": "model",
                "name": step["model"],
                "ok": True,
                "input_tokens": step["input_tokens"],
                "output_tokens": step["output_tokens"],
                "started_at": step["started_at"],
                "duration_ms": step["duration_ms"],
            }
        )
    for call in doc.get("tool_calls", []):
        timeline.append(
            {
                "seq": call["seq"],
                "kind": "tool",
                "name": call["name"],
                "ok": call["ok"],
                "input_tokens": 0,
                "output_tokens": 0,
                "started_at": call["started_at"],
                "duration_ms": call["duration_ms"],
            }
        )
    timeline.sort(key=lambda item: (item["seq"], item["started_at"]))
    return {
        "run_id": doc["run_id"],
        "tenant": doc["tenant"],
        "subject": doc.get("subject"),
        "agent": doc.get("agent"),
        "status": doc["status"],
        "started_at": doc["started_at"],
        "duration_ms": doc["ended_at"] - doc["started_at"],
        "models": sorted({item["name"] for item in timeline if item["kind"] == "model"}),
        "tools": sorted({item["name"] for item in timeline if item["kind"] == "tool"}),
        "input_tokens": sum(item["input_tokens"] for item in timeline),
        "output_tokens": sum(item["output_tokens"] for item in timeline),
        "steps": len(doc.get("steps", [])),
        "tool_calls": len(doc.get("tool_calls", [])),
        "failed_tools": sum(1 for item in timeline if item["kind"] == "tool" and not item["ok"]),
        "exchange": served(doc),
        "timeline": timeline,
    }


def whole_trace(doc: dict[str, Any], redactor: Redactor) -> dict[str, Any]:
    """A stored run in full, as a developer reads it: every text redacted again (a trace stored before a
    redaction rule existed gets it on the way out), arguments and results as JSON values."""
    steps = [
        {
            "seq": step["seq"],
            "model": step["model"],
            "prompt": redactor.text(step["prompt"]),
            "output": redactor.text(step["output"]),
            "input_tokens": step["input_tokens"],
            "output_tokens": step["output_tokens"],
            "started_at": step["started_at"],
            "duration_ms": step["duration_ms"],
        }
        for step in doc.get("steps", [])
    ]
    calls = [
        {
            "seq": call["seq"],
            "name": call["name"],
            "arguments": json.loads(redactor.json_text(call["arguments"])),
            "result": json.loads(redactor.json_text(call["result"])),
            "ok": call["ok"],
            "started_at": call["started_at"],
            "duration_ms": call["duration_ms"],
        }
        for call in doc.get("tool_calls", [])
    ]
    return {
        "run_id": doc["run_id"],
        "tenant": doc["tenant"],
        "subject": doc.get("subject"),
        "agent": doc.get("agent"),
        "status": doc["status"],
        "started_at": doc["started_at"],
        "ended_at": doc["ended_at"],
        "exchange": served(doc),
        "steps": steps,
        "tool_calls": calls,
    }


def served(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The exchange a run served, as its trace names it: None for a run that named none (or traced before
    runs could: v1 and v2 RunTraced)."""
    if doc.get("exchange_id") is None:
        return None
    return {"exchange_id": doc["exchange_id"], "call_index": doc.get("call_index"), "thread": doc["exchange_thread"]}
