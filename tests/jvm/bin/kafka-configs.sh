#!/bin/sh
# Kafka's kafka-configs.sh: runs kafka.admin.ConfigCommand on the kit's classpath.
self=$0
[ -L "$self" ] && self=$(readlink -f "$self")
exec "$(dirname "$self")/kafka-run-class.sh" kafka.admin.ConfigCommand "$@"
