#!/bin/sh
# Kafka's kafka-storage.sh: runs kafka.tools.StorageTool on the kit's classpath (formats a KRaft node's log directories).
self=$0
[ -L "$self" ] && self=$(readlink -f "$self")
exec "$(dirname "$self")/kafka-run-class.sh" kafka.tools.StorageTool "$@"
