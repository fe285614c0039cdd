"""Projections: pure rules (no I/O) and the stores they write to."""
