"""The local stack and the tools a developer runs it with (`memlog dev`, `memlog up`, the demo)."""
