#!/bin/sh
# Kafka's connect-mirror-maker.sh: runs org.apache.kafka.connect.mirror.MirrorMaker on the kit's classpath (MirrorMaker 2's dedicated mode).
self=$0
[ -L "$self" ] && self=$(readlink -f "$self")
exec "$(dirname "$self")/kafka-run-class.sh" org.apache.kafka.connect.mirror.MirrorMaker "$@"
