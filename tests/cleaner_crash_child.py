"""Child process of the cleaner crash test: one cleaning pass over a partition directory,
killed with SIGKILL at a given step (or after a delay): ``python -m
tests.cleaner_crash_child DIR STEP DELAY``. STEP 0 runs to the end and prints the number
of steps the pass went through."""

from __future__ import annotations

import os
import signal
import sys
import threading

from brokerd.storage.cleaner.compactor import Throttle, clean_log
from brokerd.storage.cleaner.keymap import OffsetMap

from tests.compaction_helpers import T0, compact_config, open_log


def main() -> None:
    path, stop_at, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    steps = [0]

    def hook(name: str) -> None:
        steps[0] += 1
        if steps[0] == stop_at:
            os.kill(os.getpid(), signal.SIGKILL)

    if delay > 0:
        threading.Timer(delay, os.kill, (os.getpid(), signal.SIGKILL)).start()
    log = open_log(path, compact_config(), point=None)  # type: ignore[arg-type]
    # A slow pass (throttled) so that a delayed kill lands inside it.
    throttle = Throttle(20_000.0 if delay > 0 else None)
    result = clean_log(
        log, None, now_ms=T0 + 10**9, key_map=OffsetMap(1 << 20), throttle=throttle, hook=hook
    )
    log.close()
    print(steps[0], result.end if result else -1, flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
