#!/bin/sh
# Kafka's kafka-share-groups.sh: runs org.apache.kafka.tools.consumer.group.ShareGroupCommand on the kit's classpath.
self=$0
[ -L "$self" ] && self=$(readlink -f "$self")
exec "$(dirname "$self")/kafka-run-class.sh" org.apache.kafka.tools.consumer.group.ShareGroupCommand "$@"
