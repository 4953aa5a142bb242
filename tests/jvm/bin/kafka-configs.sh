#!/bin/sh
# Kafka's kafka-configs.sh: runs org.apache.kafka.tools.ConfigCommand on the kit's classpath.
self=$0
[ -L "$self" ] && self=$(readlink -f "$self")
exec "$(dirname "$self")/kafka-run-class.sh" org.apache.kafka.tools.ConfigCommand "$@"
