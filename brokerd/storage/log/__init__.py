"""One partition's log: the PartitionLog facade and its collaborators (the loader, retention,
the log start offset, the producer state, ongoing transactions, append checks)."""
