"""The front door stays true: every route is documented, README stays short, the changelog stays readable."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from memlog.api.app import create_api
from memlog.config.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README_MAX_LINES = 250
BULLET_MAX_LINES = 2


def _pages() -> str:
    return "\n".join(path.read_text() for path in sorted(DOCS.rglob("*.md")))


def _mentions(path: str, text: str) -> bool:
    """A route is mentioned when its path is written out, with its parameters named or filled in."""
    pattern = re.sub(r"\\\{[^}]*\\\}", r"(\\{[^}/]*\\}|[^/\\s`'\"?]+)", re.escape(path))
    return re.search(pattern + r"(?![\w/-])", text) is not None


def test_every_route_of_the_openapi_document_is_named_on_a_page() -> None:
    paths = list(create_api(Settings()).openapi()["paths"])
    assert len(paths) > 30
    text = _pages()
    assert [path for path in paths if not _mentions(path, text)] == []


def test_the_route_check_tells_a_route_from_a_longer_one() -> None:
    assert _mentions("/v1/runs", "POST `/v1/runs` traces")
    assert not _mentions("/v1/runs", "GET `/v1/runs/abc` only")
    assert _mentions("/v1/tenants/{tenant}/facts", "GET /v1/tenants/castle/facts?q=x")


def test_every_page_is_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def listed(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [page for value in node.values() for page in listed(value)]
        if isinstance(node, list):
            return [page for item in node for page in listed(item)]
        return []

    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    assert pages - set(listed(config["nav"])) == set()


def test_readme_is_a_front_door_not_a_manual() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES
    assert "make up" in "\n".join(lines) and "make test" in "\n".join(lines)


def test_changelog_has_dated_versions_and_short_bullets() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    versions = re.findall(r"(?m)^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", text)
    assert versions, "no dated version"
    long = []
    for bullet in re.split(r"(?m)^(?=- )", text):
        if bullet.startswith("- "):
            body = bullet.split("\n\n")[0].split("\n## ")[0].rstrip("\n").splitlines()
            if len(body) > BULLET_MAX_LINES:
                long.append(body[0])
    assert long == []
