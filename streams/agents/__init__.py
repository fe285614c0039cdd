"""Thin Faust agents: decode, call a pure rule, call a store. One module per area."""
