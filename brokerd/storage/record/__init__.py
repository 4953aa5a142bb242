"""The RecordBatch format (magic 2): header, encode, decode, compression, control records, append
time.

Pure byte work, no files and no Twisted."""
