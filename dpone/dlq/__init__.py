"""Dead-letter store: record model and checksum, create-only store, index, replay, retention."""
