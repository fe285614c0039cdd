"""The OpenAPI description states what memlog refuses in a request, and describes its answers as they are."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from memlog.api.app import create_api
from memlog.api.openapi import NAME, POSITION
from memlog.config.settings import Settings


def _spec() -> dict[str, Any]:
    return create_api(Settings()).openapi()


def _parameter(spec: dict[str, Any], path: str, method: str, name: str) -> dict[str, Any]:
    found = [p for p in spec["paths"][path][method]["parameters"] if p["name"] == name]
    assert len(found) == 1, (path, name)
    schema: dict[str, Any] = found[0]["schema"]
    return schema


def test_requests_carry_the_rules_memlog_checks() -> None:
    spec = _spec()
    after = _parameter(spec, "/v1/tenants/{tenant}/subjects/{subject}/facts", "get", "after")
    assert any(branch.get("pattern") == POSITION["pattern"] for branch in [after, *after.get("anyOf", [])])
    assert (
        _parameter(spec, "/v1/tenants/{tenant}/subjects/{subject}/reset", "post", "subject")["pattern"]
        == NAME["pattern"]
    )
    exchange = spec["components"]["schemas"]["ExchangeIn"]["properties"]
    assert exchange["question"]["minLength"] == 1 and exchange["tenant"]["pattern"] == NAME["pattern"]
    assert "minLength" not in str(exchange["answer"])  # an answer may be empty


def test_answers_are_described_as_they_are() -> None:
    spec = _spec()
    schemas = spec["components"]["schemas"]
    assert "pattern" not in schemas["Context"]["properties"]["thread"]  # the thread's kind: session, public...
    assert "pattern" not in schemas["Accepted"]["properties"]["exchange_id"]  # a reset answers with ""
    for path in ("/v1/exchanges", "/v1/exchanges/{exchange_id}/question"):
        assert "409" in spec["paths"][path]["post"]["responses"], path
    fork = "/v1/tenants/{tenant}/threads/{thread}/conversations/{conversation}/fork"
    assert "409" in spec["paths"][fork]["post"]["responses"]
    assert "503" in spec["paths"]["/readyz"]["get"]["responses"]


def test_a_method_a_path_does_not_take_is_answered_with_every_method_it_does() -> None:
    client = TestClient(create_api(Settings()), raise_server_exceptions=False)
    refused = client.request("PUT", "/v1/tenants/t/subjects/s/facts")
    assert refused.status_code == 405
    assert refused.headers["allow"] == "GET, POST, DELETE"  # three routes of one path, each of one method
    assert refused.json()["detail"][0]["type"] == "method_not_allowed"
    one = client.request("OPTIONS", "/v1/tenants/t/facts/f-1")
    assert one.status_code == 405 and one.headers["allow"] == "PATCH, DELETE"
    nowhere = client.get("/v1/nowhere")
    assert nowhere.status_code == 404 and nowhere.json()["detail"][0]["type"] == "not_found"


def test_a_route_that_waits_on_a_position_declares_its_503() -> None:
    spec = _spec()
    waiting = [
        (path, method)
        for path, item in spec["paths"].items()
        for method, operation in item.items()
        if any(parameter["name"] == "after" for parameter in operation.get("parameters", []))
    ]
    assert len(waiting) > 10
    for path, method in waiting:
        assert "503" in spec["paths"][path][method]["responses"], (path, method)
