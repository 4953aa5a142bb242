"""``python -m brokerd.cli``: the same as ``brokerctl``."""

import sys

from brokerd.cli.brokerctl import main

sys.exit(main())
