"""`python -m taskyard.client.cli`: the `taskyard` command without its console script."""

import sys

from taskyard.client.cli.app import main

sys.exit(main())
