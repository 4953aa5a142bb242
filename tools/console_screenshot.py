"""Take the web console's screenshot for the README: ``docs/console.png``.

Starts a ``twistd broker`` in a temporary directory (free loopback ports), creates a few
topics, produces to them at varying rates with confluent-kafka for a while (so the
sampler, one sample every 5 s, has a history to draw), runs consumer groups (one keeping
up, one slower than its producers so its lag grows, one that stopped), then has headless
Chromium (Debian's ``chromium``) render a console page into a PNG.

Run: ``.venv/bin/python tools/console_screenshot.py`` (about a minute; ``--help`` for the
options). Needs confluent-kafka (installed by ``make install``) and ``chromium``.
"""

from __future__ import annotations

import argparse
import math
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import confluent_kafka  # noqa: E402

from tests.brokerproc import BrokerProcess, wait_for_port  # noqa: E402

OUT = REPO / "docs" / "console.png"
#: Topics and their partitions, and the records per second each gets on average.
TOPICS = {"orders": 3, "payments": 2, "clickstream": 4, "audit-log": 1}
RATES = {"orders": 120.0, "payments": 40.0, "clickstream": 300.0, "audit-log": 10.0}
#: Groups: (topic, seconds of sleep per record: what makes a group fall behind).
GROUPS = {"billing": ("orders", 1 / 70), "analytics": ("clickstream", 0.0)}
#: A group that consumed a while and then stopped (Empty, with a growing lag).
STOPPED_GROUP = ("audit-archiver", "payments")
CHROMIUM_TIMEOUT = 120.0


class Producer(threading.Thread):
    """Produces to every topic at a rate that rises and falls (a sine wave per topic),
    so the sparklines have a shape."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="producer", daemon=True)
        self._producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        self.stop = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        debt = dict.fromkeys(TOPICS, 0.0)
        n = 0
        while not self.stop.is_set():
            elapsed = time.monotonic() - start
            for index, topic in enumerate(TOPICS):
                wave = 1 + 0.6 * math.sin(elapsed / 8 + index)
                debt[topic] += RATES[topic] * wave * 0.1
                while debt[topic] >= 1:
                    debt[topic] -= 1
                    n += 1
                    self._producer.produce(topic, b"record-%d" % n, key=b"key-%d" % (n % 97))
            self._producer.poll(0)
            time.sleep(0.1)
        self._producer.flush(30)


class GroupMember(threading.Thread):
    """One consumer of a group, committing automatically, sleeping ``delay`` per record."""

    def __init__(self, bootstrap: str, group: str, topic: str, delay: float) -> None:
        super().__init__(name=f"consumer-{group}", daemon=True)
        self._consumer: Any = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": f"{group}-worker",
                "auto.offset.reset": "earliest",
                "auto.commit.interval.ms": 1000,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 1000,
            }
        )
        self._consumer.subscribe([topic])
        self._delay = delay
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            message = self._consumer.poll(0.2)
            if message is not None and not message.error() and self._delay:
                time.sleep(self._delay)
        self._consumer.close()


def screenshot(url: str, out: Path, *, width: int, height: int) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("chromium is not installed (Debian package chromium)")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                chromium,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                "--virtual-time-budget=6000",
                f"--screenshot={out}",
                url,
            ],
            check=True,
            capture_output=True,
            timeout=CHROMIUM_TIMEOUT,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="PNG to write (%(default)s)")
    parser.add_argument("--page", default="/", help="console path to render (%(default)s)")
    parser.add_argument("--seconds", type=float, default=50.0, help="traffic before the shot")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1100)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        broker = BrokerProcess(data).start()
        threads: list[Producer | GroupMember] = []
        try:
            if not wait_for_port(broker.http_port, time.monotonic() + 30):
                raise SystemExit("the broker's HTTP endpoint did not come up")
            with broker.client() as client:
                for topic, partitions in TOPICS.items():
                    client.create_topic(topic, partitions)
            threads.append(Producer(broker.kafka_bootstrap))
            threads += [
                GroupMember(broker.kafka_bootstrap, group, topic, delay)
                for group, (topic, delay) in GROUPS.items()
            ]
            stopped = GroupMember(broker.kafka_bootstrap, *STOPPED_GROUP, 0.0)
            threads.append(stopped)
            for thread in threads:
                thread.start()
            time.sleep(args.seconds / 3)
            stopped.stop.set()
            time.sleep(args.seconds * 2 / 3)
            url = f"http://127.0.0.1:{broker.http_port}{args.page}"
            screenshot(url, args.out, width=args.width, height=args.height)
            print(f"wrote {args.out} ({args.out.stat().st_size} bytes) from {url}")
        finally:
            for thread in threads:
                thread.stop.set()
            for thread in threads:
                thread.join(30)
            broker.stop()


if __name__ == "__main__":
    main()
