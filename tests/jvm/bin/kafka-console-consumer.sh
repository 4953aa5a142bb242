#!/bin/sh
# Kafka's kafka-console-consumer.sh: runs org.apache.kafka.tools.consumer.ConsoleConsumer on the kit's classpath.
self=$0
[ -L "$self" ] && self=$(readlink -f "$self")
exec "$(dirname "$self")/kafka-run-class.sh" org.apache.kafka.tools.consumer.ConsoleConsumer "$@"
