"""Crypto-shredding, the pure part: which fields of an event are personal, and sealing them.

An event's personal fields (questions, answers, tool arguments and results, summaries, fact texts,
trace prompts and outputs) travel encrypted (AES-256-GCM) with the data key of its subject, or of
its tenant when it is about no subject (a run without a subject): nothing personal is ever in clear
on a topic. The envelope's routing fields stay clear. Sealing moves the personal values out of the record into
one ciphertext in `envelope.sealed`, leaving empty placeholders; opening puts them back. Once the
data key is deleted, the values cannot be read back by anyone: replay included.

No I/O here: keys are handed in by the caller (the key vault lives in memlog's stores).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_BYTES = 32
NONCE_BYTES = 12

# Personal string fields per event type. "steps[].prompt" is the prompt of every step.
PERSONAL: dict[str, tuple[str, ...]] = {
    "memlog.QuestionAsked": ("question", "asker", "original"),
    "memlog.ToolCalled": ("arguments", "result", "original"),
    "memlog.AnswerGiven": ("answer", "original"),
    "memlog.ThreadFolded": ("summary",),
    "memlog.FactRemembered": ("text",),
    "memlog.FactRevised": ("text",),
    "memlog.RunTraced": ("steps[].prompt", "steps[].output", "tool_calls[].arguments", "tool_calls[].result"),
    "memlog.ReceiptRecorded": ("detail",),
}


class SealError(Exception):
    """A sealed record that cannot be opened with the key it names (tampered, or the wrong key)."""


@dataclass(frozen=True)
class SealedBox:
    key_id: str
    nonce: bytes
    ciphertext: bytes

    def record(self) -> dict[str, Any]:
        return {"key_id": self.key_id, "nonce": self.nonce, "ciphertext": self.ciphertext}


def needs_seal(full_name: str) -> bool:
    """Every event with personal fields is sealed: under its subject's key, or its tenant's without a subject."""
    return full_name in PERSONAL


@functools.cache
def _paths(full_name: str) -> tuple[tuple[str, str | None], ...]:
    out: list[tuple[str, str | None]] = []
    for path in PERSONAL[full_name]:
        if "[]." in path:
            array, name = path.split("[].", 1)
            out.append((array, name))
        else:
            out.append((path, None))
    return tuple(out)


def take_personal(full_name: str, record: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """The record with its personal values blanked, and those values in a fixed order."""
    clear = dict(record)
    values: list[Any] = []
    for outer, inner in _paths(full_name):
        if inner is None:
            values.append(clear.get(outer))
            clear[outer] = None if clear.get(outer) is None else ""
            continue
        items = [dict(item) for item in clear.get(outer) or ()]
        for item in items:
            values.append(item.get(inner))
            item[inner] = ""
        clear[outer] = items
    return clear, values


def put_personal(full_name: str, clear: dict[str, Any], values: list[Any]) -> dict[str, Any]:
    """Inverse of `take_personal`."""
    record = dict(clear)
    rest = iter(values)
    try:
        for outer, inner in _paths(full_name):
            if inner is None:
                record[outer] = next(rest)
                continue
            items = [dict(item) for item in record.get(outer) or ()]
            for item in items:
                item[inner] = next(rest)
            record[outer] = items
    except StopIteration:
        raise SealError(f"the sealed values do not fit the {full_name} record") from None
    if next(rest, None) is not None:
        raise SealError(f"more sealed values than the {full_name} record has fields")
    return record


def _aad(record: dict[str, Any], key_id: str) -> bytes:
    env = record["envelope"]
    parts = (str(env["event_id"]), env["event_type"], env["tenant"], env["subject"] or "", key_id)
    return "\x1f".join(parts).encode()


def seal(full_name: str, record: dict[str, Any], key_id: str, key: bytes, nonce: bytes | None = None) -> dict[str, Any]:
    """The record with its personal fields encrypted into `envelope.sealed`.

    The ciphertext is bound to the event id, type, tenant and subject, so it cannot be moved to another event.
    """
    clear, values = take_personal(full_name, record)
    plain = json.dumps(values, ensure_ascii=True, separators=(",", ":")).encode()  # lone surrogates survive as escapes
    nonce = nonce or os.urandom(NONCE_BYTES)
    box = SealedBox(key_id, nonce, AESGCM(key).encrypt(nonce, plain, _aad(record, key_id)))
    clear["envelope"] = {**record["envelope"], "sealed": box.record()}
    return clear


def sealed_key_id(record: dict[str, Any]) -> str | None:
    box = record["envelope"].get("sealed")
    return None if box is None else str(box["key_id"])


def open_sealed(full_name: str, record: dict[str, Any], key: bytes) -> dict[str, Any]:
    """The record with its personal fields decrypted back in place (raises SealError when it does not open)."""
    box = record["envelope"]["sealed"]
    try:
        plain = AESGCM(key).decrypt(box["nonce"], box["ciphertext"], _aad(record, box["key_id"]))
    except InvalidTag:
        raise SealError(
            f"{full_name} {record['envelope']['event_id']} does not open with key {box['key_id']}"
        ) from None
    opened = put_personal(full_name, record, json.loads(plain))
    opened["envelope"] = {**record["envelope"], "sealed": None}
    return opened


def wrap_key(master: bytes, key_ref: str, data_key: bytes) -> tuple[bytes, bytes]:
    """A data key encrypted under the master key, bound to its vault entry; returns (nonce, wrapped)."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce, AESGCM(master).encrypt(nonce, data_key, key_ref.encode())


def unwrap_key(master: bytes, key_ref: str, nonce: bytes, wrapped: bytes) -> bytes:
    try:
        return AESGCM(master).decrypt(nonce, wrapped, key_ref.encode())
    except InvalidTag:
        raise SealError(f"data key {key_ref} does not unwrap with this master key") from None


def subject_ref(tenant: str, subject: str) -> str:
    """One subject's name in the key vault and the ledger."""
    # The tenant's length keeps "a:b" + "c" apart from "a" + "b:c".
    return f"{len(tenant)}:{tenant}:{subject}"


def tenant_ref(tenant: str) -> str:
    """The tenant's own key in the key vault (events about no subject). The length prefix makes it
    shorter than, so never equal to, any subject's `subject_ref` of the same tenant."""
    return f"{len(tenant)}:{tenant}"


def subject_digest(master: bytes, tenant: str, subject: str) -> str:
    """A keyed digest naming a subject in the ledger: it answers "was this one erased?" without
    holding anything that identifies the person."""
    return hmac.new(master, subject_ref(tenant, subject).encode(), hashlib.sha256).hexdigest()[:32]


def new_data_key() -> bytes:
    return AESGCM.generate_key(bit_length=KEY_BYTES * 8)
