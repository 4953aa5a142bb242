"""Where the checkout's files are, for tests in any folder of ``tests/``."""

from __future__ import annotations

from pathlib import Path

#: The checkout's root (``docs/``, ``bench/``, ``brokerd/`` beside ``tests/``).
REPO = Path(__file__).resolve().parent.parent
#: This folder, where the helper scripts tests start as processes live.
TESTS = REPO / "tests"
