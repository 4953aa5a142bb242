#!/bin/sh
# Kafka's kafka-consumer-groups.sh: runs org.apache.kafka.tools.consumer.group.ConsumerGroupCommand on the kit's classpath.
self=$0
[ -L "$self" ] && self=$(readlink -f "$self")
exec "$(dirname "$self")/kafka-run-class.sh" org.apache.kafka.tools.consumer.group.ConsumerGroupCommand "$@"
