"""One log segment and what lies beside it: the offset and time indexes, the aborted-transaction
index, the descriptor cache, batch lookups and reads, and recovery's resync."""
