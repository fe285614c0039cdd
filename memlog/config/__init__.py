"""The one settings object (pydantic-settings, prefix MEMLOG_), built by the entry point and passed down."""
