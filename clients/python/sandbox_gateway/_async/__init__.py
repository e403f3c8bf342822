"""The async client (the source the sync one is generated from)."""
