"""Run ``twistd`` with a failing ``os.fdatasync`` for the fault tests: a test double of
the disk's sync (a real disk cannot be made to fail an fsync on demand).

Usage: ``python fsync_fault_broker.py TRIGGER twistd-args...``. While the file TRIGGER
exists, a sync of any file whose name is one of TRIGGER's lines fails with EIO; every
other sync is the real one.
"""

from __future__ import annotations

import errno
import os
import sys


def main() -> None:
    trigger = sys.argv[1]
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        try:
            with open(trigger, encoding="utf-8") as f:
                names = set(f.read().split())
        except FileNotFoundError:
            names = set()
        if names and os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) in names:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(fd)

    os.fdatasync = fdatasync
    from twisted.scripts.twistd import run

    sys.argv = ["twistd", *sys.argv[2:]]
    run()


if __name__ == "__main__":
    main()
