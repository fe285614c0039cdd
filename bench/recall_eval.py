"""Recall quality through the HTTP API: the held-out set (tests/fixtures/recall_heldout.json) against a
running memlog (API and worker) on the local stack.

Writes every subject fact (POST /v1/tenants/{t}/subjects/{s}/facts) and every tenant fact (POST
/v1/tenants/{t}/facts) under tenant names suffixed with a run id, waits until all are projected, then
asks every question through the context read (GET .../context?question=&agent=) and, for a question
asked by an agent, through the agent's recall tool as well, and reports per kind and overall:

- recall@5: a question with expected facts has one of them among the facts returned;
- nothing claimed: a question nothing answers gets no fact labelled `bears`;
- compound: questions of two parts made from the set (compound_questions), both parts among the five;
- leaks: a forbidden fact returned, or any fact the asker may not see (another subject's, another
  tenant's, another agent's own, an agent's own to a read that names no agent, or one unknown);
- p50/p99 of the context read, and whether the recall tool returned the same list.

    python -m bench.recall_eval --out results.json                 # starts API and worker (open, loopback)
    python -m bench.recall_eval --embeddings none --out r.json     # keyword ranking only
    python -m bench.recall_eval --url http://127.0.0.1:8080 [--token T]   # an API already running
    python -m bench.recall_eval --subject-only --out r.json        # no tenant facts (routes of today)

`score` and its helpers are pure (no I/O) and live in tests/evaluation/recall_scoring.py, which the
evaluation tests import too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

import httpx

from tests.evaluation.recall_scoring import (
    REPORT_TENANTS,
    compound_questions,
    fact_table,
    restricted_to_subjects,
    score,
)

DEFAULT_SET = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "recall_heldout.json"
LOGS = Path(__file__).resolve().parent.parent / ".memlog-test" / "logs"
PROJECTION_DEADLINE = 180.0


def table(summary: Mapping[str, Any]) -> str:
    def cell(value: float | None, percent: bool = False) -> str:
        if value is None:
            return "-"
        return f"{value:.1%}" if percent else f"{value:.1f}"

    head = f"{'kind':15} {'n':>4} {'recall@5':>9} {'nothing':>8} {'forbid':>7} {'leaks':>6} {'mean#':>6}"
    head += f" {'p50 ms':>8} {'p99 ms':>8} {'tool≠':>6}"
    lines = [head, "-" * len(head)]
    for kind, row in [*summary["by_kind"].items(), ("overall", summary["overall"])]:
        lines.append(
            f"{kind:15} {row['questions']:>4} {cell(row['recall_at_5'], True):>9} "
            f"{cell(row['nothing_claimed'], True):>8} {row['forbidden_returned']:>7} {row['leaks']:>6} "
            f"{cell(row['mean_returned']):>6} {cell(row['p50_ms']):>8} {cell(row['p99_ms']):>8} "
            f"{row['tool_differs']:>3}/{row['tool_compared']:<3}"
        )
    return "\n".join(lines)


# --- the run over HTTP ----------------------------------------------------------------------------------


class Run:
    def __init__(
        self, http: httpx.AsyncClient, data: Mapping[str, Any], facts: Mapping[str, Mapping[str, Any]], run_id: str
    ) -> None:
        self.http = http
        self.data = data
        self.facts = facts
        self.run_id = run_id
        self.ours: dict[str, str] = {}  # memlog's fact_id -> the set's id
        self.positions: list[str] = []

    def tenant(self, name: str) -> str:
        return f"{name}-{self.run_id}"

    async def _post(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        for attempt in range(5):
            response = await self.http.post(url, json=body)
            if response.status_code in (429, 503) and attempt < 4:
                await asyncio.sleep(0.5 * (attempt + 1))
                continue
            if response.status_code != 202:
                raise SystemExit(f"POST {url} -> {response.status_code}: {response.text[:500]}")
            answer: dict[str, Any] = response.json()
            return answer
        raise AssertionError("unreachable")

    async def write(self) -> None:
        jobs: list[tuple[str, str, dict[str, Any]]] = []
        for t in self.data["tenants"]:
            tenant = self.tenant(t["tenant"])
            for fact in t["tenant_facts"]:
                jobs.append((fact["id"], f"/v1/tenants/{tenant}/facts", fact))
            for fact in t["subject_facts"]:
                jobs.append((fact["id"], f"/v1/tenants/{tenant}/subjects/{fact['subject']}/facts", fact))
        gate = asyncio.Semaphore(8)

        async def one(set_id: str, url: str, fact: Mapping[str, Any]) -> None:
            async with gate:
                body = {"text": fact["text"], "scope": fact["scope"], "agent": fact["agent"]}
                answer = await self._post(url, body)
            self.ours[answer["fact_id"]] = set_id
            self.positions.append(answer["position"])

        await asyncio.gather(*(one(*job) for job in jobs))

    def _latest(self) -> str:
        """The newest position per topic and partition, comma-separated (what `after` takes)."""
        newest: dict[tuple[str, str], int] = {}
        for token in self.positions:
            topic, partition, offset = token.rsplit(".", 2)
            newest[(topic, partition)] = max(newest.get((topic, partition), -1), int(offset))
        return ",".join(f"{topic}.{partition}.{offset}" for (topic, partition), offset in sorted(newest.items()))

    async def _listed(self, url: str, params: dict[str, Any]) -> set[str] | None:
        response = await self.http.get(url, params=params)
        if response.status_code != 200:
            return None
        return {fact["fact_id"] for fact in response.json()["facts"]}

    async def wait_projected(self) -> float:
        """Seconds until every fact written is listed where it belongs."""
        started = time.perf_counter()
        after = self._latest()
        missing: list[str] = []
        while time.perf_counter() - started < PROJECTION_DEADLINE:
            missing = []
            for t in self.data["tenants"]:
                tenant = self.tenant(t["tenant"])
                wanted: dict[str | None, set[str]] = {}
                for fid, set_id in self.ours.items():
                    fact = self.facts[set_id]
                    if fact["tenant"] == t["tenant"]:
                        wanted.setdefault(fact["subject"], set()).add(fid)
                for subject, ids in wanted.items():
                    url = (
                        f"/v1/tenants/{tenant}/facts"
                        if subject is None
                        else f"/v1/tenants/{tenant}/subjects/{subject}/facts"
                    )
                    listed = await self._listed(url, {"after": after, "wait": 30})
                    if listed is None or not ids <= listed:
                        missing.append(f"{tenant}/{subject or '(tenant)'}")
            if not missing:
                return time.perf_counter() - started
            await asyncio.sleep(0.5)
        raise SystemExit(f"not projected after {PROJECTION_DEADLINE:.0f}s: {', '.join(missing)}")

    def _ids(self, facts: Sequence[Mapping[str, Any]]) -> list[str]:
        return [self.ours.get(fact["fact_id"], f"unknown:{fact['fact_id']}") for fact in facts]

    async def ask(self, question: Mapping[str, Any]) -> dict[str, Any]:
        tenant = self.tenant(question["tenant"])
        base = f"/v1/tenants/{tenant}/subjects/{question['subject']}"
        params = {"question": question["text"]}
        if question["agent"] is not None:
            params["agent"] = question["agent"]
        started = time.perf_counter()
        response = await self.http.get(f"{base}/context", params=params)
        latency = (time.perf_counter() - started) * 1e3
        if response.status_code != 200:
            raise SystemExit(f"context read -> {response.status_code}: {response.text[:500]}")
        context = response.json()
        facts = context["facts"]
        rendered = context.get("rendered_facts", "")
        result: dict[str, Any] = {
            "returned": self._ids(facts),
            "bearing": self._ids([f for f in facts if f.get("bears", True)]),
            "latency_ms": latency,
            "facts": [
                {k: f.get(k) for k in ("fact_id", "text", "score", "how", "bears", "belongs_to", "scope", "agent")}
                for f in facts
            ],
            # every fact is a line of the rendered text; with none, the text says nothing bears on it
            "rendered_matches": all(f"{f['text']}" in rendered for f in facts)
            and rendered.count("\n- ") + rendered.startswith("- ") == len(facts),
            "tool_returned": None,
        }
        if question["agent"] is not None:
            tool = await self.http.post(
                f"{base}/agents/{question['agent']}/tools/recall", json={"arguments": {"query": question["text"]}}
            )
            if tool.status_code != 200:
                raise SystemExit(f"recall tool -> {tool.status_code}: {tool.text[:500]}")
            result["tool_returned"] = self._ids(tool.json()["facts"])
            result["tool_bearing"] = self._ids([f for f in tool.json()["facts"] if f.get("bears", True)])
        return result


async def evaluate(url: str, token: str | None, args: argparse.Namespace, embeddings: str) -> dict[str, Any]:
    data = json.loads(await asyncio.to_thread(Path(args.set).read_text))
    facts = fact_table(data)
    questions = data["questions"] + compound_questions(data)
    if args.subject_only:
        data, questions = restricted_to_subjects(data)
    if args.tenants:
        questions = [q for q in questions if q["tenant"] in args.tenants.split(",")]
    run_id = args.run_id or uuid.uuid4().hex[:8]
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
        run = Run(http, data, facts, run_id)
        started = time.perf_counter()
        await run.write()
        written = time.perf_counter() - started
        projected = await run.wait_projected()
        print(f"run {run_id}: wrote {len(run.ours)} facts in {written:.1f}s, projected after {projected:.1f}s more")
        results = []
        for number, question in enumerate(questions, 1):
            results.append(await run.ask(question))
            if number % 50 == 0:
                print(f"  {number}/{len(questions)} questions asked", flush=True)
    scored = score(questions, results, facts)
    for question, result, outcome in zip(questions, results, scored["per_question"], strict=True):
        outcome.update(
            question=question["text"],
            tenant=question["tenant"],
            subject=question["subject"],
            agent=question["agent"],
            expected=question["expected"],
            forbidden=question["forbidden"],
            returned_ids=result["returned"],
            tool_returned_ids=result["tool_returned"],
            facts=result["facts"],
            rendered_matches=result["rendered_matches"],
        )
    scored["run"] = {
        "run_id": run_id,
        "url": url,
        "embeddings": embeddings,
        "subject_only": args.subject_only,
        "set": str(args.set),
        "facts_written": len(run.ours),
        "questions": len(questions),
        "rendered_mismatches": sum(not r["rendered_matches"] for r in results),
        "tool_leaks": sum(bool(o["tool_leaked"]) for o in scored["per_question"]),
    }
    return scored


def embeddings_setting(choice: str) -> str:
    """MEMLOG_EMBEDDINGS for the processes started: `auto` where the settings know it, else `local`."""
    from memlog.config.settings import Settings

    if choice == "none":
        return "none"
    known = get_args(Settings.model_fields["embeddings"].annotation)
    return "auto" if "auto" in known else "local"


def report(scored: Mapping[str, Any], out: Path | None) -> None:
    run = scored["run"]
    print(
        f"\nrecall through the HTTP API: {run['questions']} questions, {run['facts_written']} facts, "
        f"embeddings={run['embeddings']}{', subject facts only' if run['subject_only'] else ''}\n"
    )
    print(table(scored))
    print(
        f"\nrendered_facts not matching facts: {run['rendered_mismatches']};  "
        f"questions where the recall tool leaked: {run['tool_leaks']}"
    )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(scored, indent=1, ensure_ascii=False) + "\n")
        print(f"results written to {out}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", type=Path, default=DEFAULT_SET, help="the evaluation set (JSON)")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON results here")
    parser.add_argument("--embeddings", choices=["auto", "none"], default="auto", help="for the started processes")
    parser.add_argument("--url", default=None, help="an API already running (nothing is started)")
    parser.add_argument("--token", default=os.environ.get("MEMLOG_TOKEN"), help="bearer token for --url")
    parser.add_argument("--subject-only", action="store_true", help="no tenant facts nor questions needing them")
    parser.add_argument("--run-id", default=None, help="suffix of the tenant names (default: random)")
    parser.add_argument(
        "--tenants",
        default=",".join(sorted(REPORT_TENANTS)),
        help="ask the questions of these tenants only (default: those recall's calibration is not fitted on); "
        "'' for all",
    )
    args = parser.parse_args(argv)

    if args.url is not None:
        scored = asyncio.run(evaluate(args.url.rstrip("/"), args.token, args, "as the server is configured"))
        report(scored, args.out)
        return

    from bench.projection import on_local_stack
    from memlog.config.settings import Settings
    from memlog.dev.processes import start_api, start_worker
    from streams.topics import ensure_topics

    embeddings = embeddings_setting(args.embeddings)
    holder: dict[str, Any] = {}

    async def run(settings: Settings) -> None:
        # the default local configuration: no credential, so the API is open, on loopback only
        settings = settings.model_copy(
            update={
                "embeddings": embeddings,
                "backend_tokens": {},
                "operator_tokens": [],
                "credentials_file": None,
                "api_host": "127.0.0.1",
            }
        )
        await ensure_topics(settings)
        worker = await asyncio.to_thread(start_worker, settings, LOGS)
        api = await asyncio.to_thread(start_api, settings, LOGS)
        try:
            holder["scored"] = await evaluate(f"http://127.0.0.1:{settings.api_port}", None, args, embeddings)
        finally:
            api.stop()
            worker.stop()

    on_local_stack(run)
    report(holder["scored"], args.out)


if __name__ == "__main__":
    sys.exit(main())
