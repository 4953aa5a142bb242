#!/bin/sh
# Kafka's connect-mirror-maker.sh: runs org.apache.kafka.connect.mirror.MirrorMaker (MirrorMaker 2's
# dedicated mode) on the Connect kit's classpath, lib-connect (tests/jvm/connect/pom.xml).
self=$0
[ -L "$self" ] && self=$(readlink -f "$self")
KAFKA_KIT_LIB=lib-connect exec "$(dirname "$self")/kafka-run-class.sh" org.apache.kafka.connect.mirror.MirrorMaker "$@"
