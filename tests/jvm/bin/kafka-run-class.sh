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
java=${JAVA:-java}
# Class data sharing: half of a tool's start is parsing and verifying the same few thousand
# classes from the jars. The first run on a class path writes the list of classes it
# loaded; the next one dumps them into an archive (once, a few seconds); every later run
# maps that archive and starts on about half the CPU. The JVM ignores an archive whose
# jars have changed (its warnings, which go to stdout, are off so tools' output stays
# clean; removing build/jvm/cds makes a new one). A run that finds a half-written list
# dumps what is there, and a dump that fails is not tried again: either way the tools
# only start slower. KAFKA_CDS=off runs without it. A mkdir is the lock: one run writes
# each file.
share=-Xshare:auto
if [ "${KAFKA_CDS:-on}" != off ]; then
  cds=${KAFKA_CDS_DIR:-$(dirname "$(dirname "$kit")")/build/jvm/cds}
  archive=$cds/$lib.jsa
  if [ ! -f "$archive" ] && [ -s "$cds/$lib.classes" ] && mkdir "$cds/$lib.dumping" 2>/dev/null; then
    if "$java" ${KAFKA_HEAP_OPTS:--Xmx256m} -Xshare:dump -XX:SharedClassListFile="$cds/$lib.classes" \
        -XX:SharedArchiveFile="$archive.$$" -Xlog:cds=off -Xlog:cds+dynamic=off \
        -cp "$kit/$lib/*" >/dev/null 2>&1; then
      mv -f "$archive.$$" "$archive"
    else
      rm -f "$archive.$$"
    fi
  fi
  if [ -f "$archive" ]; then
    share="-XX:SharedArchiveFile=$archive -Xlog:cds=off -Xlog:cds+dynamic=off"
  elif mkdir -p "$cds" 2>/dev/null && mkdir "$cds/$lib.listing" 2>/dev/null; then
    share="-Xshare:auto -XX:DumpLoadedClassList=$cds/$lib.classes"
  fi
fi
# slf4j-simple is the kit's logging binding: warnings and errors only, on stderr.
# shellcheck disable=SC2086 # $share is several options
exec "$java" ${KAFKA_HEAP_OPTS:--Xmx256m} \
  -XX:+UseSerialGC -XX:TieredStopAtLevel=1 $share \
  -Dorg.slf4j.simpleLogger.defaultLogLevel=${KAFKA_TOOLS_LOG_LEVEL:-warn} \
  ${KAFKA_OPTS:-} -cp "$kit/$lib/*" "$class" "$@"
