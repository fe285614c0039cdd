"""Who may call a route: the credential checks, as FastAPI dependencies."""

from __future__ import annotations

from fastapi import Depends, Request

from memlog.app.credentials import Credentials


def credentials_of(request: Request) -> Credentials:
    credentials: Credentials = request.app.state.credentials
    return credentials


async def tenant_guard(request: Request) -> None:
    """Routes with the tenant in their path: a backend credential must be bound to it."""
    credentials_of(request).check(request.headers.get("authorization"), request.path_params.get("tenant"))


async def operator_guard(request: Request) -> None:
    credentials_of(request).check(request.headers.get("authorization"), None, operator=True)


def guard_body(request: Request, tenant: str) -> None:
    """Routes with the tenant in their body: checked once the body is read."""
    credentials_of(request).check(request.headers.get("authorization"), tenant)


def requested_by(request: Request) -> str:
    """Who asked, for the ledger: a digest of the credential, never the secret."""
    return credentials_of(request).who(request.headers.get("authorization"))


TENANT_ONLY = [Depends(tenant_guard)]
OPERATOR_ONLY = [Depends(operator_guard)]
