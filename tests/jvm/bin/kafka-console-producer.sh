#!/bin/sh
# Kafka's kafka-console-producer.sh: runs org.apache.kafka.tools.ConsoleProducer on the kit's classpath.
self=$0
[ -L "$self" ] && self=$(readlink -f "$self")
exec "$(dirname "$self")/kafka-run-class.sh" org.apache.kafka.tools.ConsoleProducer "$@"
