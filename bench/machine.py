"""Facts about the machine and the software of a run, for the report's first table."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path

from bench import kafka_tools
from bench.common import REPO
from bench.peers import versions

PACKAGES = ("twisted", "confluent-kafka", "nats-py", "matplotlib")


def _first(path: str, prefix: str) -> str:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip() if ":" in line else line.strip()
    except OSError:
        pass
    return "?"


def _memory() -> str:
    text = _first("/proc/meminfo", "MemTotal")
    try:
        return f"{int(text.split()[0]) / 1024 / 1024:.1f} GiB"
    except (ValueError, IndexError):
        return text


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.system()


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return out.stdout.strip() or "?"


def _filesystem(path: Path) -> str:
    try:
        out = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return out.stdout.strip() or "?"


def facts(scratch_root: Path) -> dict[str, str]:
    found = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "brokerd commit": _commit(),
        "cores": str(os.cpu_count()),
        "CPU": _first("/proc/cpuinfo", "model name"),
        "memory": _memory(),
        "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "kernel": platform.release(),
        "OS": _os_name(),
        "file system of the data directories": f"{_filesystem(scratch_root)} ({scratch_root})",
        "Python": platform.python_version(),
    }
    for package in PACKAGES:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    try:
        import confluent_kafka

        found["librdkafka (confluent-kafka's)"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    found.update(versions())
    kafka = kafka_tools.version()
    if kafka is not None:
        found["Apache Kafka (jars of tests/jvm/pom.xml)"] = kafka
    java = _java_version()
    if java is not None:
        found["java"] = java
    return found


def _java_version() -> str | None:
    binary = kafka_tools.java()
    if binary is None:
        return None
    try:
        out = subprocess.run([binary, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = (out.stderr or out.stdout).splitlines()
    return first[0].strip() if first else None
