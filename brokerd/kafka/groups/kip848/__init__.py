"""What the groups built on KIP-848's member protocol share: consumer groups
(:mod:`brokerd.kafka.groups.consumer`) and streams groups
(:mod:`brokerd.kafka.groups.streams`). Its own package, below both, so that neither
imports the other nor the classic coordinator's package."""
