#!/bin/sh
# Kafka's kafka-streams-groups.sh: runs org.apache.kafka.tools.streams.StreamsGroupCommand on the kit's classpath.
self=$0
[ -L "$self" ] && self=$(readlink -f "$self")
exec "$(dirname "$self")/kafka-run-class.sh" org.apache.kafka.tools.streams.StreamsGroupCommand "$@"
