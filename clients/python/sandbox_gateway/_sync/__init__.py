"""The sync client (generated from the async one, with primitives of its own)."""
