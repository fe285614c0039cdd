"""memlog's client for backends: record exchanges, read context, remember and recall, over the HTTP API.

It holds no master key and opens no Kafka, MongoDB or Redis connection: only the API's URL and a token.
"""

from memlog_client.aio import AsyncMemlogClient
from memlog_client.calls import Call, Calls
from memlog_client.client import MemlogClient
from memlog_client.errors import (
    Conflict,
    Forbidden,
    Invalid,
    MemlogError,
    NotFound,
    Problem,
    Refused,
    ServerError,
    TooLarge,
    TransportError,
    Unauthorized,
    Unavailable,
)
from memlog_client.models import (
    Accepted,
    Context,
    Exchange,
    Fact,
    FactAccepted,
    Facts,
    LedgerPage,
    Position,
    PrivacyRequest,
    ReceiptAccepted,
    ToolCall,
)

__version__ = "0.1.0"
__all__ = [
    "Accepted",
    "AsyncMemlogClient",
    "Call",
    "Calls",
    "Conflict",
    "Context",
    "Exchange",
    "Fact",
    "FactAccepted",
    "Facts",
    "Forbidden",
    "Invalid",
    "LedgerPage",
    "MemlogClient",
    "MemlogError",
    "NotFound",
    "Position",
    "PrivacyRequest",
    "Problem",
    "ReceiptAccepted",
    "Refused",
    "ServerError",
    "TooLarge",
    "ToolCall",
    "TransportError",
    "Unauthorized",
    "Unavailable",
]
