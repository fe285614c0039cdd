"""In-process stores: the reference implementation of every port in projections.ports.

The contract suites run each against the same tests as its Redis or MongoDB counterpart; the pure
and property tests use them in place of a server.
"""

from memlog.adapters.in_memory.archives import InMemoryConversationArchive, InMemoryIdempotency
from memlog.adapters.in_memory.privacy import (
    InMemoryExports,
    InMemoryKeyVault,
    InMemoryLedger,
    InMemoryNamespacePointer,
    InMemoryNamespaceRegistry,
    InMemoryReplayLease,
    InMemoryReplayRecords,
    WrappedKey,
)
from memlog.adapters.in_memory.receipts import InMemoryReceiptStore
from memlog.adapters.in_memory.stores import (
    InMemoryCheckpoints,
    InMemoryCounters,
    InMemoryFactSlots,
    InMemoryFactStore,
    InMemorySessionStore,
    InMemoryTraceStore,
)

__all__ = [
    "InMemoryCheckpoints",
    "InMemoryConversationArchive",
    "InMemoryCounters",
    "InMemoryExports",
    "InMemoryFactSlots",
    "InMemoryFactStore",
    "InMemoryIdempotency",
    "InMemoryKeyVault",
    "InMemoryLedger",
    "InMemoryNamespacePointer",
    "InMemoryNamespaceRegistry",
    "InMemoryReceiptStore",
    "InMemoryReplayLease",
    "InMemoryReplayRecords",
    "InMemorySessionStore",
    "InMemoryTraceStore",
    "WrappedKey",
]
