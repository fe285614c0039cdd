"""Store adapters: the Redis, MongoDB and in-memory implementations of projections.ports, and their clients."""
