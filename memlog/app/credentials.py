"""Who may call the API: backend credentials bound to one tenant, operator credentials for everything.

With no credential configured at all, the API is open, and then only on a loopback address unless
MEMLOG_API_ALLOW_OPEN says otherwise (memlog.api.app); once any is set, every route but health,
readiness, OpenAPI and the tool definitions needs one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field
from pathlib import Path

from memlog.config.settings import Settings
from schemas.errors import Forbidden, ServiceSetupError, Unauthorized


def _sent(token: str) -> bytes:
    """A token as the bytes it was sent as: ASGI servers decode header values as Latin-1, so this
    gives back the client's bytes (compare_digest refuses non-ASCII text, so tokens compare as bytes)."""
    try:
        return token.encode("latin-1")
    except UnicodeEncodeError:  # not from a header: text no client could have sent as it is
        return token.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class Holder:
    """Who holds a known credential."""

    tenant: str | None  # the one tenant a backend credential may touch; None: an operator's


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
        return "token:" + hashlib.sha256(_sent(token)).hexdigest()[:12]

    def holder(self, authorization: str | None) -> Holder:
        """Whose the bearer token is (`authorization`: the header as the ASGI server gives it); raises
        Unauthorized when there is none or memlog does not know it."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("send a credential: Authorization: Bearer <token>")
        sent = _sent(token)  # configured tokens are text, sent as UTF-8
        if any(hmac.compare_digest(sent, known.encode()) for known in self.operators):
            return Holder(None)
        owner = next((t for known, t in self.backends.items() if hmac.compare_digest(sent, known.encode())), None)
        if owner is None:
            raise Unauthorized("unknown credential")
        return Holder(owner)

    def check(self, authorization: str | None, tenant: str | None, *, operator: bool = False) -> None:
        """Raise unless the bearer token may act on `tenant` (or, for an operator action, is an operator's)."""
        if not self.enabled:
            return
        owner = self.holder(authorization).tenant
        if owner is None:
            return
        if operator:
            raise Forbidden("this is an operator action; a backend credential may not do it")
        if tenant is not None and tenant != owner:
            raise Forbidden("this credential is bound to another tenant")
