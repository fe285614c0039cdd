"""The operator's commands against a deployment: `memlog --api URL [--token T] [--json] COMMAND ...` goes
through the HTTP API with an operator (or backend) token, never with stores or the master key.

Exit codes (README "Exit codes"): 0 done, 1 refused, 2 usage, 3 unavailable, 4 not applied in time,
5 verify found differences.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any
from urllib.parse import quote

import httpx

DONE, REFUSED, USAGE, UNAVAILABLE, NOT_APPLIED, DIFFERENCES = 0, 1, 2, 3, 4, 5
REMOTE_COMMANDS = frozenset({"erase", "export", "ledger", "facts", "threads", "retention", "replay", "mcp"})
TIMEOUT_SECONDS = 150.0  # erase and export wait for the worker on the API's side (MEMLOG_READ_WAIT_SECONDS)


class Failed(Exception):
    """A command that ends with this exit code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def seg(name: str) -> str:
    return quote(name, safe="")


def _refusal(response: httpx.Response) -> Failed:
    code = UNAVAILABLE if response.status_code in (502, 503, 504) else REFUSED
    try:
        detail = response.json().get("detail")
        text = "; ".join(f"{'.'.join(map(str, d.get('loc', [])))}: {d.get('msg')}" for d in detail)
    except (ValueError, AttributeError, TypeError):
        text = response.text[:300]
    return Failed(code, f"{response.status_code} {text}")


class Remote:
    def __init__(self, http: httpx.Client, args: argparse.Namespace) -> None:
        self.http = http
        self.args = args

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise Failed(UNAVAILABLE, f"the API at {self.args.api} is unreachable: {type(exc).__name__} {exc}") from exc
        if response.status_code >= 400:
            raise _refusal(response)
        return response

    def show(self, value: Any, human: str) -> None:
        print(json.dumps(value, indent=None if self.args.json else 1) if self.args.json or not human else human)

    def erase(self) -> int:
        a = self.args
        body = self.call(
            "POST", f"/v1/tenants/{seg(a.tenant)}/subjects/{seg(a.subject)}/erase", json={"reason": a.reason}
        ).json()
        deleted = (body.get("ledger") or {}).get("deleted", {})
        self.show(body, f"erased {a.subject} of {a.tenant} (request {body['request_id']}): {json.dumps(deleted)}")
        if not body.get("done"):
            raise Failed(NOT_APPLIED, f"not applied yet: the ledger will show request {body['request_id']}")
        return DONE

    def export(self) -> int:
        a = self.args
        response = self.call("POST", f"/v1/tenants/{seg(a.tenant)}/subjects/{seg(a.subject)}/export")
        if response.status_code == 202:
            body = response.json()
            self.show(body, "")
            raise Failed(NOT_APPLIED, f"not applied yet: fetch /v1/tenants/{a.tenant}/exports/{body['request_id']}")
        if a.output == "-":
            sys.stdout.write(response.text + "\n")
        else:
            with open(a.output, "w", encoding="utf-8") as out:
                out.write(response.text + "\n")
            print(f"wrote the bundle of {a.subject} to {a.output}", file=sys.stderr)
        return DONE

    def ledger(self) -> int:
        a = self.args
        response = self.call(
            "GET", f"/v1/tenants/{seg(a.tenant)}/ledger", params={"subject": a.subject} if a.subject else {}
        )
        entries = response.json()
        lines = [f"{e.get('at')}  {e.get('kind', ''):16} {json.dumps(e, sort_keys=True)}" for e in entries]
        self.show(entries, "\n".join(lines) or "(no requests)")
        return DONE

    def facts(self) -> int:
        a = self.args
        base = f"/v1/tenants/{seg(a.tenant)}/subjects/{seg(a.subject)}/facts"
        rest = list(a.rest)
        if a.action == "list":
            body = self.call("GET", base, params={"agent": a.agent} if a.agent else {}).json()
            lines = [
                f"{f['fact_id']}  [{f['scope']}{'/' + f['agent'] if f.get('agent') else ''}]  {f['text']}"
                for f in body["facts"]
            ]
            self.show(body, "\n".join(lines) or "(no facts)")
            return DONE
        if a.action == "add":
            body = self.call("POST", base, json={"text": " ".join(rest), "agent": a.agent, "scope": a.scope}).json()
        elif a.action == "edit":
            if len(rest) < 2:
                raise Failed(USAGE, "edit needs FACT_ID and the new text")
            body = self.call("PATCH", f"{base}/{seg(rest[0])}", json={"text": " ".join(rest[1:])}).json()
        elif a.action == "rm":
            if len(rest) != 1:
                raise Failed(USAGE, "rm needs one FACT_ID")
            body = self.call("DELETE", f"{base}/{seg(rest[0])}").json()
        else:
            body = self.call("DELETE", base).json()
        self.show(body, f"{a.action} {body['fact_id']} ({body['position']})")
        return DONE

    def threads(self) -> int:
        a = self.args
        thread = f"/v1/tenants/{seg(a.tenant)}/threads/{seg(a.thread)}"
        if a.action == "list":
            self.show(self.call("GET", f"{thread}/conversations").json(), "")
            return DONE
        bodies: dict[str, dict[str, Any]] = {
            "compact": {},
            "reset": {"reason": a.reason},
            "rename": {"target": a.target},
            "fork": {"target": a.target},
            "archive": {
                k: None if v is None else v == "true" for k, v in (("archived", a.archived), ("protected", a.protected))
            }
            | {"kind": a.kind},
            "purge": {"reason": a.reason},
        }
        path = f"{thread}/conversations/{seg(a.conversation)}/{a.action}"
        body = self.call("POST", path, json={k: v for k, v in bodies[a.action].items() if v is not None}).json()
        self.show(body, f"{a.action} {a.thread} {body.get('conversation')}: {body.get('position')}")
        return DONE

    def retention(self) -> int:
        a = self.args
        body = {"confirm": a.confirm, **({"now": a.now} if a.now is not None else {})}
        self.show(self.call("POST", f"/v1/tenants/{seg(a.tenant)}/retention", json=body).json(), "")
        return DONE

    def replay(self) -> int:
        a = self.args
        if a.status:
            report = self.call("GET", f"/v1/replays/{seg(a.status)}").json()
        else:
            body = {"projection": a.projection, "switch": not a.no_switch}
            report = self.call("POST", "/v1/replays", json=body).json()
        self.show(report, "")
        return DONE


def run_remote(args: argparse.Namespace) -> int:
    """One command through the API; its exit code (the message of a failure on stderr)."""
    if args.command not in REMOTE_COMMANDS:
        print(f"memlog: {args.command} runs on the local stack only, not with --api", file=sys.stderr)
        return USAGE
    if not args.token:
        print("memlog: --api needs a token: --token or MEMLOG_API_TOKEN", file=sys.stderr)
        return USAGE
    if args.command == "mcp":
        from memlog.cli.mcp_bridge import bridge, endpoint

        if not args.tenant or not args.subject:
            print("memlog: mcp with --api needs --tenant and --subject (the session's binding)", file=sys.stderr)
            return USAGE
        return bridge(endpoint(args.api, args.tenant, args.subject, args.agent), args.token)
    headers = {"Authorization": f"Bearer {args.token}"}
    with httpx.Client(base_url=args.api.rstrip("/"), headers=headers, timeout=TIMEOUT_SECONDS) as http:
        remote = Remote(http, args)
        try:
            code: int = getattr(remote, args.command)()
        except Failed as failed:
            print(f"memlog: {failed}", file=sys.stderr)
            return failed.code
    return code
