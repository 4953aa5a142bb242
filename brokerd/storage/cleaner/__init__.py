"""Log compaction: one pass over one partition and its key map (blocking, no Twisted)."""
