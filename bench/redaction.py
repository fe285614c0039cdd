"""Benchmark: redaction of a 768 KiB run (the largest a run may be), typical and adversarial, next to a floor.

Two floors, measured in the same run: json.dumps then json.loads of the same run's fields (the least any
redactor that reads JSON must spend), and one pass of the regex engine over every field (a search for a
character class no field holds: what a single scan in C costs). Each figure is the median (and the best) of
several passes of `redact_run`, as the API and the projection call it; the ratios are to the medians of the
floors. Needs no local stack. No assertions.
"""

from __future__ import annotations

import base64
import contextlib
import json
import random
import re
import statistics
import string
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from functools import partial

from projections.redaction import Redactor
from projections.traces import redact_run
from schemas.events import Envelope, ModelStep, RunTraced, TraceToolCall

RUN_BYTES = 786_432  # MEMLOG_TRACE_MAX_BYTES: 768 KiB
PASSES = 7
WORDS = (
    *("the", "allay", "brought", "three", "diamonds", "from", "chest", "near", "portal", "while", "steve"),
    *("asked", "about", "redstone", "farms", "and", "villager", "trades", "summary", "of", "last", "session"),
    *("tool", "call", "returned", "rows", "for", "query", "please", "answer", "briefly", "cite", "facts"),
    *("you", "used", "player", "prefers", "short", "answers", "in", "french"),
)


def _prose(rng: random.Random, size: int) -> str:
    out: list[str] = []
    length = 0
    while length < size:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20))).capitalize() + ". "
        out.append(sentence)
        length += len(sentence)
    return "".join(out)[:size]


def _code(rng: random.Random, lines: int) -> str:
    templates = (
        "def fetch_{a}_{b}(client, {a}_id: int) -> dict:",
        "    response = await client.get(f'https://api.example.com/v1/{a}s/{{{a}_id}}', timeout=30)",
        "    cache.set('{a}:{b}', json.dumps(result), ex=3600)  # {b} expires hourly",
        "const {a}{B} = items.filter((item) => item.{b} > 0).map((item) => item.id);",
        "SELECT id, {a}, {b}, created_at FROM {a}s WHERE {b} IS NOT NULL ORDER BY created_at DESC LIMIT 50;",
    )
    out = []
    for _ in range(lines):
        a, b = rng.choice(WORDS), rng.choice(WORDS)
        out.append(rng.choice(templates).format(a=a, b=b, B=b.title()))
    return "\n".join(out)


def _records(rng: random.Random, count: int) -> list[dict[str, object]]:
    return [
        {
            "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "name": f"{rng.choice(WORDS)} {rng.choice(WORDS)}",
            "created_at": 1_730_000_000_000 + rng.randint(0, 10**9),
            "score": round(rng.random(), 4),
            "tags": [rng.choice(WORDS) for _ in range(3)],
            "url": f"https://cdn.example.com/assets/{rng.choice(WORDS)}/{rng.getrandbits(32):08x}.png",
            "nested": {"owner": rng.choice(WORDS), "ok": rng.random() > 0.1, "count": rng.randint(0, 99)},
        }
        for _ in range(count)
    ]


def _run(prompts: list[str], calls: list[tuple[str, str]]) -> RunTraced:
    steps = tuple(ModelStep(2 * i, "large-2", prompt, "ok", 1000, 100, i, 900) for i, prompt in enumerate(prompts))
    tools = tuple(
        TraceToolCall(2 * i + 1, "search", arguments, result, True, i, 300)
        for i, (arguments, result) in enumerate(calls)
    )
    envelope = Envelope(
        tenant="bench", subject="steve", agent="allay", thread="session", producer="bench", occurred_at=1
    )
    return RunTraced(envelope, "run-bench", "ok", 0, 1, steps, tools)


def typical() -> RunTraced:
    """10 model steps of prose, code and pasted JSON; 10 tool calls with records; a few secrets among them."""
    rng = random.Random(768)
    share = RUN_BYTES // 17  # prompts fall a little short of their share: the run comes to about 768 KiB
    prompts = []
    for i in range(10):
        body = _prose(rng, share // 2) + "\n```python\n" + _code(rng, 60) + "\n```\n"
        body += json.dumps(_records(rng, 8)) + f"\nuse DATABASE_PASSWORD=hunter{i} and sk-{'a1B2c3D4' * 4}\n"
        prompts.append(body[:share])
    calls = []
    for i in range(10):
        rows = _records(rng, 1)
        while len(json.dumps(rows)) < share - 400:
            rows.append(_records(rng, 1)[0])
        arguments = json.dumps({"q": _prose(rng, 80), "limit": 50, "headers": [["Authorization", f"Bearer t{i}x9"]]})
        calls.append((arguments, json.dumps({"rows": rows, "api_key": "k"})))
    return _run(prompts, calls)


def adversarial() -> dict[str, RunTraced]:
    """The inputs that were super-linear before (long keys, PEM headers) and others built to be slow."""
    rng = random.Random(14)
    half = RUN_BYTES // 2
    camel = {f"ab{'Xy' * 1200}{i}": i for i in range(half // 2405)}
    deep: object = "leaf"
    for _ in range(500):
        deep = {"child": deep, "token": "x"}
    random_blob = base64.b64encode(rng.randbytes(half * 3 // 4)).decode()
    text_blob = base64.b64encode(_prose(rng, half * 3 // 4).encode()).decode()
    cases: dict[str, Callable[[], tuple[list[str], list[tuple[str, str]]]]] = {
        "2.4 KB camelCase keys (300 of them)": lambda: ([], [(json.dumps(camel), json.dumps(camel))]),
        "150 KB of PEM headers, no END": lambda: (["-----BEGIN RSA PRIVATE KEY-----\n" * (150_000 // 32)], []),
        "768 KiB of PEM headers, no END": lambda: (["-----BEGIN RSA PRIVATE KEY-----\n" * (RUN_BYTES // 32)], []),
        "nesting 500 deep, parsed": lambda: ([], [(json.dumps(deep), json.dumps(deep))] * 1),
        "brackets 384 Ki deep, unparsable": lambda: (["[" * half + "]" * half], []),
        "JWT prefixes (eyJ repeated)": lambda: (["eyJ" * (RUN_BYTES // 3)], []),
        "assignments (password= repeated)": lambda: (["password=" * (RUN_BYTES // 9)], []),
        "digits and spaces": lambda: (["4 " * (RUN_BYTES // 2)], []),
        "a long local part, then @": lambda: (["a" * RUN_BYTES + "@example.com"], []),
        "emails (a@b.co repeated)": lambda: (["a@b.co " * (RUN_BYTES // 7)], []),
        "one 768 KiB random base64 token": lambda: ([random_blob + random_blob], []),
        "one 768 KiB base64 token of text": lambda: ([text_blob + text_blob[: len(text_blob) // 3 * 3]], []),
        "query values, percent-encoded": lambda: (["?a=%41%42%43%44&b=" * (RUN_BYTES // 18)], []),
        "query values hiding a password": lambda: (["?q=my%20password%20is%20x%21&" * (RUN_BYTES // 29)], []),
        "passwords in prose (my password is x)": lambda: (["my password is x " * (RUN_BYTES // 17)], []),
        "names of secrets in prose, no value": lambda: (["password pin code " * (RUN_BYTES // 18)], []),
        "card groups (4111 repeated)": lambda: (["4111 " * (RUN_BYTES // 5)], []),
        "open tags (<a <b)": lambda: (["<a <b " * (RUN_BYTES // 6)], []),
        "secret elements (<password>x)": lambda: (["<password>x" * (RUN_BYTES // 11)], []),
        "closed tags (<a> repeated)": lambda: (["<a>" * (RUN_BYTES // 3)], []),
        "tags with an attribute (<a x=1>)": lambda: (["<a x=1>" * (RUN_BYTES // 7)], []),
        "distinct random tokens (32 characters)": lambda: ([_tokens(rng, "random")], []),
        "distinct hex digests (32 digits)": lambda: ([_tokens(rng, "hex")], []),
        "distinct identifiers (item_7_name_x)": lambda: ([_tokens(rng, "names")], []),
        "unique keys with digits": lambda: ([], [(json.dumps({f"k{i}x": i for i in range(RUN_BYTES // 24)}), "{}")]),
        "k=1 repeated, then password=x": lambda: (["k=1 " * (RUN_BYTES // 4 - 4) + "password=x"], []),
        "distinct tag names (<t1><t2>)": lambda: ([_distinct("<t{}>")], []),
        "distinct names before signs (k1=1)": lambda: ([_distinct("k{}=1 ")], []),
        "distinct passwords in prose (x1, x2)": lambda: ([_distinct("my password is x{} ")], []),
        "distinct query values hiding one": lambda: ([_distinct("?q=my%20password%20is%20x{}&")], []),
        "JSON in strings, 12 levels": lambda: ([_json_in_json(rng, 12)], []),
    }
    return {name: _run(*build()) for name, build in cases.items()}


def _tokens(rng: random.Random, kind: str) -> str:
    """768 KiB of distinct tokens of 16 characters or more, between spaces: each is judged on its own."""
    alphabet = string.ascii_letters + string.digits
    if kind == "random":
        tokens = ("".join(rng.choice(alphabet) for _ in range(32)) for _ in range(RUN_BYTES // 33))
    elif kind == "hex":
        tokens = (f"{rng.getrandbits(128):032x}" for _ in range(RUN_BYTES // 33))
    else:
        tokens = (f"item_{index}_name_value_x" for index in range(RUN_BYTES // 24))
    return " ".join(tokens)[:RUN_BYTES]


def _distinct(template: str) -> str:
    """768 KiB of a template numbered 0, 1, 2, ...: each name, tag or value is new (nothing judged is seen twice)."""
    parts: list[str] = []
    size = 0
    while size < RUN_BYTES:
        parts.append(template.format(len(parts)))
        size += len(parts[-1])
    return "".join(parts)[:RUN_BYTES]


def _json_in_json(rng: random.Random, levels: int) -> str:
    value: object = _records(rng, 100)
    for _ in range(levels):
        value = json.dumps({"inner": value})
    text = str(value)
    return text[:RUN_BYTES]


def run_size(run: RunTraced) -> int:
    return sum(len(step.prompt) + len(step.output) for step in run.steps) + sum(
        len(call.arguments) + len(call.result) for call in run.tool_calls
    )


def timed_ms(action: Callable[[], object]) -> tuple[float, float, float]:
    """The median and the best of PASSES passes, in milliseconds (the best is the cost without the noise of a
    shared machine; the median, what a caller sees), and the least CPU time of a pass (what the other
    processes of a loaded machine change least)."""
    samples = []
    cpu = []
    for _ in range(PASSES):
        started, started_cpu = time.perf_counter(), time.process_time()
        action()
        samples.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
    return statistics.median(samples), min(samples), min(cpu)


def floor(run: RunTraced) -> object:
    """json.dumps then json.loads of the run's fields, and of each tool call's JSON."""
    for call in run.tool_calls:
        for text in (call.arguments, call.result):
            with contextlib.suppress(ValueError, RecursionError):
                json.dumps(json.loads(text))
    return json.loads(json.dumps([asdict(step) for step in run.steps]))


# A character class no field of the bench holds: the engine reads every character of every field once.
_SCAN = re.compile(r"[\x00-\x08]")


def scan_floor(run: RunTraced) -> object:
    """One pass of the regex engine over every field of the run."""
    fields = [text for step in run.steps for text in (step.prompt, step.output)]
    fields += [text for call in run.tool_calls for text in (call.arguments, call.result)]
    return [_SCAN.search(text) for text in fields]


def main() -> None:
    redactor = Redactor.build()
    print(f"\nredaction of one run, median and best of {PASSES} passes, in ms")
    print("(json: json.dumps + json.loads of the same run; scan: one regex pass over its fields;")
    print(" x json, x scan: median redaction / median floor;")
    print(" cpu: the least CPU time of a pass, less sensitive than the others to a loaded machine)")
    header = f"{'run':40} {'size':>9} {'json':>6} {'scan':>6} {'redact':>7} {'best':>7} {'cpu':>7} {'x json':>7}"
    print(f"  {header} {'x scan':>7}")
    for name, run in {"typical": typical(), **adversarial()}.items():
        floor_ms, _, _ = timed_ms(partial(floor, run))
        scan_ms, _, _ = timed_ms(partial(scan_floor, run))
        redact_ms, best_ms, cpu_ms = timed_ms(partial(redact_run, run, redactor))
        size = f"{run_size(run) / 1024:,.0f} KiB"
        ratios = f"{redact_ms / max(floor_ms, 0.01):7.1f} {redact_ms / max(scan_ms, 0.01):7.1f}"
        figures = f"{floor_ms:6.1f} {scan_ms:6.1f} {redact_ms:7.1f} {best_ms:7.1f} {cpu_ms:7.1f}"
        print(f"  {name:40} {size:>9} {figures} {ratios}")


if __name__ == "__main__":
    main()
