"""memlog-client against the real API on the local stack: the docs' backend example in a virtual
environment without the server's packages, a retry after a dropped connection that records nothing
twice, idempotency keys on facts, tenant knowledge and tool runs, and refusals as typed exceptions."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from memlog_client import AsyncMemlogClient, Calls, Conflict, Forbidden, Invalid, MemlogClient, Position

from memlog.config.settings import Settings
from tests.e2e.conftest import memlog, own_settings

ROOT = Path(__file__).resolve().parents[2]
TENANT = "acme"
BACKEND, OPERATOR = "tok-acme", "tok-op"


@pytest.fixture(scope="module")
def api(stack: Settings) -> Iterator[str]:
    with memlog(
        own_settings(stack, backend_tokens={BACKEND: TENANT, "tok-other": "other"}, operator_tokens=[OPERATOR])
    ) as settings:
        yield f"http://{settings.api_host}:{settings.api_port}"


def docs_example() -> str:
    text = (ROOT / "docs" / "client.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/client.md has one runnable example"
    return blocks[0]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_docs_backend_example_runs_with_only_the_client_installed(api: str, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    source = shutil.copytree(ROOT / "client", tmp_path / "client", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("MEMLOG_")
    }
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(source)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    server = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.util as u; print([m for m in ('memlog', 'faust', 'pymongo', "
            "'aiokafka', 'redis', 'fastapi') if u.find_spec(m)])",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=True,
    )
    assert server.stdout.strip() == "[]"  # none of the server's packages, nor memlog itself
    script = tmp_path / "backend.py"
    script.write_text(docs_example())
    run_env = {**env, "MEMLOG_URL": api, "MEMLOG_TOKEN": BACKEND, "MEMLOG_OPERATOR_TOKEN": OPERATOR}
    ran = subprocess.run(
        [str(python), str(script)], check=False, env=run_env, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "backend example done" in ran.stdout


class DroppingProxy:
    """A TCP proxy in front of the API that, once for each path named, sends the request on and closes
    the client's connection as the API's answer arrives: the API has applied it, the client never hears."""

    def __init__(self, upstream_port: int, drop_once: set[str]) -> None:
        self.upstream_port = upstream_port
        self.pending = set(drop_once)
        self.dropped: list[str] = []
        self.open: set[asyncio.StreamWriter] = set()

    async def _pipe_back(self, upstream: asyncio.StreamReader, client: asyncio.StreamWriter, doomed: list[str]) -> None:
        while data := await upstream.read(65536):
            if doomed:
                self.dropped.append(doomed.pop())
                client.transport.abort()  # a reset mid-request, as a dying load balancer gives
                return
            client.write(data)
            await client.drain()
        client.close()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self.open |= {writer, up_writer}
        doomed: list[str] = []
        back = asyncio.create_task(self._pipe_back(up_reader, writer, doomed))
        try:
            while data := await reader.read(65536):
                line = data.split(b"\r\n", 1)[0].decode("latin-1")
                for path in list(self.pending):
                    if line.startswith(f"POST {path} "):
                        self.pending.discard(path)
                        doomed.append(path)
                up_writer.write(data)
                await up_writer.drain()
        except ConnectionError:
            pass
        finally:
            up_writer.close()
            await back

    async def close(self) -> None:
        for writer in self.open:
            writer.close()
        await asyncio.gather(*(writer.wait_closed() for writer in self.open), return_exceptions=True)


@asynccontextmanager
async def dropping(api: str, paths: set[str]) -> AsyncIterator[tuple[str, DroppingProxy]]:
    proxy = DroppingProxy(int(api.rsplit(":", 1)[1]), paths)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", proxy
    finally:
        server.close()
        await proxy.close()
        await server.wait_closed()


async def test_a_dropped_connection_retried_records_the_exchange_and_the_fact_once(api: str) -> None:
    subject = f"s-{uuid.uuid4().hex[:8]}"
    facts_path = f"/v1/tenants/{TENANT}/subjects/{subject}/facts"
    async with (
        dropping(api, {"/v1/exchanges", facts_path}) as (url, proxy),
        AsyncMemlogClient(url, BACKEND, backoff=0.05) as memlog,
    ):
        accepted = await memlog.record(TENANT, subject, "Is the blue kettle back in stock?", "Yes, since Monday.")
        saved = await memlog.remember(TENANT, subject, "Likes the blue kettle")
    assert sorted(proxy.dropped) == sorted(["/v1/exchanges", facts_path])  # each first attempt was cut off
    assert accepted.idempotent  # the retry was answered with the first attempt's answer
    async with AsyncMemlogClient(api, BACKEND) as memlog:
        context = await memlog.context(TENANT, subject, after=accepted.position)
        facts = await memlog.facts(TENANT, subject, after=saved.position)
    assert [e.question for e in context.exchanges] == ["Is the blue kettle back in stock?"]
    assert [e.exchange_id for e in context.exchanges] == [accepted.exchange_id]
    assert [(f.fact_id, f.text) for f in facts.facts] == [(saved.fact_id, "Likes the blue kettle")]


def test_a_key_used_again_with_another_body_is_refused_and_with_the_same_body_answered_as_first(api: str) -> None:
    subject = f"s-{uuid.uuid4().hex[:8]}"
    with MemlogClient(api, BACKEND) as memlog:
        first = memlog.remember(TENANT, subject, "Vegetarian", idempotency_key="k1")
        again = memlog.remember(TENANT, subject, "Vegetarian", idempotency_key="k1")
        assert again.fact_id == first.fact_id
        with pytest.raises(Conflict) as other:
            memlog.remember(TENANT, subject, "Vegan", idempotency_key="k1")
        assert (other.value.loc, other.value.type) == (("body", "idempotency_key"), "conflict")
        knowledge = memlog.remember(TENANT, None, "Shop opens at 9", idempotency_key="k1")
        assert memlog.remember(TENANT, None, "Shop opens at 9", idempotency_key="k1").fact_id == knowledge.fact_id
        arguments = {"text": "Owns a cat"}
        ran = memlog.run_tool(TENANT, subject, "helper", "remember", arguments, idempotency_key="t1")
        assert memlog.run_tool(TENANT, subject, "helper", "remember", arguments, idempotency_key="t1") == ran
        with pytest.raises(Conflict):
            memlog.run_tool(TENANT, subject, "helper", "remember", {"text": "Owns a dog"}, idempotency_key="t1")
        listed = memlog.facts(TENANT, subject, after=Position(ran.get("position", first.position)), wait=10)
        assert sorted(f.text for f in listed.facts) == ["Owns a cat", "Vegetarian"]
        tenant_facts = memlog.facts(TENANT, None, after=knowledge.position)
        assert [f.text for f in tenant_facts.facts].count("Shop opens at 9") == 1


def test_refusals_are_typed_and_carry_loc_msg_and_type(api: str) -> None:
    with MemlogClient(api, BACKEND) as memlog:
        with pytest.raises(Invalid) as blank:
            memlog.remember(TENANT, "s", "  ")
        assert blank.value.status == 422 and blank.value.loc == ("body", "text") and blank.value.msg
        with pytest.raises(Forbidden) as other:
            memlog.facts("other", "s")
        assert other.value.loc == ("header", "authorization") and other.value.type == "forbidden"
        keyed = Calls.remember(TENANT, "s", "x", idempotency_key="a")
        two_keys = replace(keyed, json={**keyed.json, "idempotency_key": "b"})  # the header says "a"
        with pytest.raises(Invalid) as both:
            memlog.run(two_keys)
        assert both.value.loc == ("body", "idempotency_key")


def test_an_unchanged_context_is_not_sent_again(api: str) -> None:
    subject = f"s-{uuid.uuid4().hex[:8]}"
    seen: list[int] = []

    def count(response: httpx.Response) -> None:
        seen.append(response.status_code)

    with MemlogClient(api, BACKEND) as memlog:
        memlog._http.event_hooks["response"] = [count]
        accepted = memlog.record(TENANT, subject, "hello", "hi")
        first = memlog.context(TENANT, subject, after=accepted.position)
        second = memlog.context(TENANT, subject, after=accepted.position)
    assert second == first and seen[-1] == 304


def memlog_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`memlog` as an operator runs it against a deployment: no MEMLOG_* setting, no master key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOG_")}
    command = [sys.executable, "-m", "memlog", *args]
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_an_operator_erases_through_the_api_and_reads_the_json(api: str) -> None:
    subject = f"s-{uuid.uuid4().hex[:8]}"
    with MemlogClient(api, BACKEND) as memlog:
        saved = memlog.remember(TENANT, subject, "Allergic to peanuts")
        memlog.facts(TENANT, subject, after=saved.position)
    erased = memlog_cli("--api", api, "--token", OPERATOR, "--json", "erase", TENANT, subject, "--reason", "asked")
    assert erased.returncode == 0, erased.stderr
    shown = json.loads(erased.stdout)
    assert shown["done"] is True and shown["request_id"] and shown["ledger"]["deleted"], shown
    listed = memlog_cli("--api", api, "--token", OPERATOR, "--json", "facts", "list", TENANT, subject)
    assert listed.returncode == 0 and json.loads(listed.stdout)["facts"] == [], listed.stdout + listed.stderr
    ledger = memlog_cli("--api", api, "--token", OPERATOR, "--json", "ledger", TENANT, subject)
    entries = json.loads(ledger.stdout)
    assert "erased" in [entry["kind"] for entry in entries] and shown["request_id"] in ledger.stdout, entries
    refused = memlog_cli("--api", api, "--token", BACKEND, "erase", TENANT, subject)
    assert refused.returncode == 1 and "403" in refused.stderr, refused.stderr
    away = memlog_cli("--api", "http://127.0.0.1:9", "--token", OPERATOR, "erase", TENANT, subject)
    assert away.returncode == 3 and "unreachable" in away.stderr, away.stderr
    version = memlog_cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("memlog "), version.stdout
