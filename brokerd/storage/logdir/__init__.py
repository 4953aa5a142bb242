"""The data directory: the topic registry and its journal, every partition log in it, the
checkpoint files, offline partitions and their retry."""
