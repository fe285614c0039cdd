"""Avro schemas of memlog's events (one .avsc per named type) and the codec that reads and writes them."""
