#!/bin/sh
# Kafka's kafka-client-metrics.sh: runs org.apache.kafka.tools.ClientMetricsCommand on the kit's classpath.
self=$0
[ -L "$self" ] && self=$(readlink -f "$self")
exec "$(dirname "$self")/kafka-run-class.sh" org.apache.kafka.tools.ClientMetricsCommand "$@"
