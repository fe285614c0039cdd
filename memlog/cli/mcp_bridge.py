"""`memlog --api URL mcp --tenant T --subject S --agent A`: MCP on stdio for a model runtime that speaks
only stdio, carried to the API's MCP endpoint with a token. It holds no store and no master key: what
the session may touch is bound by the token and the path, as for any MCP client over HTTP."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO
from urllib.parse import quote

import httpx

from memlog.api.mcp_http import MCP_PATH

PROTOCOL_HEADER = "mcp-protocol-version"
BRIDGE_ERROR = -32000  # JSON-RPC's "server error" range: the API refused or could not be reached


def endpoint(api: str, tenant: str, subject: str, agent: str) -> str:
    names = {"tenant": tenant, "subject": subject, "agent": agent}
    return api.rstrip("/") + MCP_PATH.format(**{k: quote(v, safe="") for k, v in names.items()})


def _failed(message: dict[str, Any], why: str) -> dict[str, Any] | None:
    """A JSON-RPC error answering `message` (None for a notification, which takes no answer)."""
    if "id" not in message:
        return None
    return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": BRIDGE_ERROR, "message": why}}


def _forward(http: httpx.Client, url: str, message: dict[str, Any], headers: dict[str, str]) -> dict[str, Any] | None:
    try:
        response = http.post(url, json=message, headers=headers)
    except httpx.HTTPError as exc:
        return _failed(message, f"the memlog API is unreachable: {type(exc).__name__} {exc}")
    if response.status_code == 202 or not response.content:
        return None
    if response.status_code >= 400 and "jsonrpc" not in response.text:
        return _failed(message, f"the memlog API refused ({response.status_code}): {response.text[:500]}")
    answer: dict[str, Any] = response.json()
    version = (answer.get("result") or {}).get("protocolVersion") if message.get("method") == "initialize" else None
    if isinstance(version, str):
        headers[PROTOCOL_HEADER] = version
    return answer


def bridge(url: str, token: str, source: TextIO = sys.stdin, sink: TextIO = sys.stdout) -> int:
    """Each JSON-RPC message read from `source` (one a line) posted to `url`; each answer written to `sink`."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    with httpx.Client(timeout=60.0) as http:
        for line in source:
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                answer: dict[str, Any] | None = {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32700, "message": "not JSON"},
                }
            else:
                answer = _forward(http, url, message, headers) if isinstance(message, dict) else None
            if answer is not None:
                sink.write(json.dumps(answer) + "\n")
                sink.flush()
    return 0
