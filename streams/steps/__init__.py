"""Steps: what the worker does with a decoded batch of one topic: call a pure rule, then a store."""
