#!/bin/sh
# Kafka's kafka-metadata-quorum.sh: runs org.apache.kafka.tools.MetadataQuorumCommand on the kit's classpath (a KRaft cluster's controller quorum).
self=$0
[ -L "$self" ] && self=$(readlink -f "$self")
exec "$(dirname "$self")/kafka-run-class.sh" org.apache.kafka.tools.MetadataQuorumCommand "$@"
