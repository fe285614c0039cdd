"""Kafka side of memlog: topics, producers, the Faust app and its agents."""
