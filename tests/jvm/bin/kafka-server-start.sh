#!/bin/sh
# Kafka's kafka-server-start.sh: runs kafka.Kafka on the kit's classpath (one Kafka broker/controller; set KAFKA_HEAP_OPTS).
self=$0
[ -L "$self" ] && self=$(readlink -f "$self")
exec "$(dirname "$self")/kafka-run-class.sh" kafka.Kafka "$@"
