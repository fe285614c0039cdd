"""Liveness, readiness and metrics."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from memlog.api.auth import OPERATOR_ONLY
from memlog.api.deps import ServicesDep
from memlog.api.handlers import RETRY
from schemas.errors import LogUnavailable, StoreUnavailable

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "alive"}


@router.get("/metrics", include_in_schema=False, dependencies=OPERATOR_ONLY)
async def metrics_page(services: ServicesDep) -> Response:
    """Prometheus metrics (operators only: they count every tenant); consumer lag and stalled projections
    are measured at each scrape."""
    await services.readiness.check()
    assert services.metrics is not None, "the API opens its services with metrics"
    return Response(services.metrics.render(), media_type="text/plain; version=0.0.4")


@router.get("/readyz", responses={503: {"description": "Not ready: a service is down or a projection lags."}})
async def readyz(services: ServicesDep) -> JSONResponse:
    """Ready when Kafka, Redis and MongoDB answer and every projection has applied the log (memlog/app/readiness.py).

    Not ready (503 with Retry-After) while a service is down, or a projection lags too far or has
    stalled: the report names it.
    """
    try:
        readiness = await services.readiness.check()
    except (LogUnavailable, StoreUnavailable) as exc:
        return JSONResponse({"ready": False, "unavailable": str(exc)}, status_code=503, headers=RETRY)
    ready = readiness.ready
    return JSONResponse(readiness.view(), status_code=200 if ready else 503, headers=None if ready else RETRY)
