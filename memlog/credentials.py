"""Who may call the API: backend credentials bound to one tenant, operator credentials for everything.

With no credential configured at all, the API is open (the local stack's default); once any is set,
every route but health, readiness, OpenAPI and the tool definitions needs one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field
from pathlib import Path

from config.settings import Settings
from schemas.errors import Forbidden, ServiceSetupError, Unauthorized


@dataclass(frozen=True)
class Credentials:
    backends: dict[str, str] = field(default_factory=dict)  # token -> the one tenant it may touch
    operators: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, settings: Settings) -> Credentials:
        backends = dict(settings.backend_tokens)
        operators = set(settings.operator_tokens)
        if settings.credentials_file is not None:
            try:
                loaded = json.loads(Path(settings.credentials_file).read_text())
                backends.update({str(k): str(v) for k, v in loaded.get("backends", {}).items()})
                operators.update(str(token) for token in loaded.get("operators", []))
            except (OSError, ValueError, AttributeError) as exc:
                raise ServiceSetupError(f"MEMLOG_CREDENTIALS_FILE {settings.credentials_file}: {exc}") from exc
        return cls(backends, frozenset(operators))

    @property
    def enabled(self) -> bool:
        return bool(self.backends or self.operators)

    def who(self, authorization: str | None) -> str:
        """A name for the ledger: a digest of the credential, never the secret; "open" with none configured."""
        _, _, token = (authorization or "").partition(" ")
        if not self.enabled or not token:
            return "open"
        return "token:" + hashlib.sha256(token.encode()).hexdigest()[:12]

    def check(self, authorization: str | None, tenant: str | None, *, operator: bool = False) -> None:
        """Raise unless the bearer token may act on `tenant` (or, for an operator action, is an operator's)."""
        if not self.enabled:
            return
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("send a credential: Authorization: Bearer <token>")
        if any(hmac.compare_digest(token, known) for known in self.operators):
            return
        owner = next((t for known, t in self.backends.items() if hmac.compare_digest(token, known)), None)
        if owner is None:
            raise Unauthorized("unknown credential")
        if operator:
            raise Forbidden("this is an operator action; a backend credential may not do it")
        if tenant is not None and tenant != owner:
            raise Forbidden("this credential is bound to another tenant")
