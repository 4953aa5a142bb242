"""The durable stores on the journal engine: committed group offsets and membership, the
transaction log, the producer-id block."""
