#!/bin/sh
# Runs one of Kafka's classes on the kit's classpath (tests/jvm/lib, filled by
# `make jvm-deps`; KAFKA_KIT_LIB=lib-connect names the Connect kit's instead). The scripts beside this one name the class of each Kafka tool, as
# Kafka's own bin/ does, so this directory's parent serves as librdkafka's KAFKA_PATH.
# KAFKA_HEAP_OPTS and KAFKA_OPTS work as in Kafka's script; the default heap is small
# because these tools move kilobytes on shared machines.
set -e
if [ $# -lt 1 ]; then
  echo "usage: $0 <class> [args...]" >&2
  exit 2
fi
self=$0
while [ -L "$self" ]; do
  link=$(readlink "$self")
  case $link in
    /*) self=$link ;;
    *) self=$(dirname "$self")/$link ;;
  esac
done
# -P: a symlinked bin/ (a KAFKA_PATH that links to this kit) still finds lib/.
kit=$(cd -P "$(dirname "$self")/.." && pwd)
lib=${KAFKA_KIT_LIB:-lib}
if ! ls "$kit/$lib"/*.jar >/dev/null 2>&1; then
  echo "$kit/$lib has no jars: run \`make jvm-deps\` first" >&2
  exit 1
fi
class=$1
shift
# slf4j-simple is the kit's logging binding: warnings and errors only, on stderr.
exec "${JAVA:-java}" ${KAFKA_HEAP_OPTS:--Xmx256m} \
  -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
  -Dorg.slf4j.simpleLogger.defaultLogLevel=${KAFKA_TOOLS_LOG_LEVEL:-warn} \
  ${KAFKA_OPTS:-} -cp "$kit/$lib/*" "$class" "$@"
