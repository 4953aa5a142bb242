"""The broker's journals: append-only files of framed records, synced before a write
returns, replayed on open and compacted to their live records.

:mod:`~brokerd.storage.journal.records` is the record framing and the bounds-checked body
reader; :mod:`~brokerd.storage.journal.engine` is the file engine (open, replay, torn-tail
cut, append and sync, compaction, going offline after a failed sync and reopening). The
stores built on it (consumer offsets, the transaction log, the producer-id block) only
say what their records mean.
"""
