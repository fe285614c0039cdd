"""memlog as processes (API, worker) against the local stack: end to end, faults, crashes."""
