"""The collector pause of ``twistd broker``'s start (brokerd.start_gc)."""

from __future__ import annotations

import gc
import subprocess
import sys

from twisted.trial.unittest import SynchronousTestCase

from brokerd import start_gc

from tests.brokerproc import REPO, env


class PauseResumeTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.addCleanup(gc.enable)
        self.addCleanup(gc.unfreeze)
        self.addCleanup(start_gc.resume)

    def test_pause_then_resume_freezes_and_enables(self) -> None:
        start_gc.pause()
        self.assertFalse(gc.isenabled())
        self.assertTrue(start_gc.paused())
        before = gc.get_freeze_count()
        kept = [object() for _ in range(10)]
        start_gc.resume()
        self.assertTrue(gc.isenabled())
        self.assertFalse(start_gc.paused())
        self.assertGreater(gc.get_freeze_count(), before)
        self.assertEqual(len(kept), 10)

    def test_resume_without_pause_changes_nothing(self) -> None:
        before = gc.get_freeze_count()
        start_gc.resume()
        self.assertTrue(gc.isenabled())
        self.assertEqual(gc.get_freeze_count(), before)

    def test_pause_leaves_a_collector_someone_else_disabled(self) -> None:
        gc.disable()
        start_gc.pause()
        self.assertFalse(start_gc.paused())
        start_gc.resume()
        self.assertFalse(gc.isenabled(), "resume must not enable what it did not disable")

    def test_options_of_the_plugin_pause(self) -> None:
        maker = start_gc.StartingServiceMaker("brokerd", "brokerd.tap", "broker", "broker")
        options = maker.options()
        self.assertTrue(start_gc.paused())
        from brokerd.tap import Options

        self.assertIsInstance(options, Options)


class TwistdPluginTests(SynchronousTestCase):
    def test_twistd_finds_the_plugin_and_its_options(self) -> None:
        """The plugin file imports only the small maker module and still gives twistd
        the broker's options."""
        code = (
            "import sys\n"
            "from twisted.plugin import getPlugins\n"
            "from twisted.application.service import IServiceMaker\n"
            "makers = {m.tapname: m for m in getPlugins(IServiceMaker)}\n"
            "maker = makers['broker']\n"
            "heavy = [m for m in ('brokerd.tap', 'brokerd.core', 'twisted.internet.reactor')"
            " if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "import gc\n"
            "maker.options()\n"
            "assert not gc.isenabled()\n"
            "print('ok')\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], env=env(), cwd=REPO, capture_output=True, text=True,
            timeout=120,
        )
        self.assertEqual(out.stdout.strip(), "ok", out.stderr)
