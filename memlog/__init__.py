"""memlog: an event-sourced memory service for AI agent backends, on Kafka."""

__version__ = "0.1.0"
