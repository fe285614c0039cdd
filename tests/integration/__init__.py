"""memlog in-process against the local stack (Kafka, Redis, SecantusDB)."""
