"""The HTTP floor of the context read: an ASGI app that answers every request with the bytes in
MEMLOG_BENCH_BODY_FILE, served as `memlog api` serves memlog (uvicorn, httptools, uvloop, no access log).
What any Python API on this server pays per request before it does any work of its own.

`python -m bench.http_floor PORT` (bench/context_read.py starts it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from starlette.types import Receive, Scope, Send


def bare_app(body: bytes) -> object:
    headers = [(b"content-length", b"%d" % len(body)), (b"content-type", b"application/json")]

    async def app(scope: Scope, _receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def main(port: int) -> None:
    import uvicorn

    body = Path(os.environ["MEMLOG_BENCH_BODY_FILE"]).read_bytes()
    uvicorn.run(
        bare_app(body),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        http="httptools",
        loop="uvloop",
    )


if __name__ == "__main__":
    main(int(sys.argv[1]))
