"""`python -m shared.client.cli`: the `taskyard` command without its console script."""

import sys

from shared.client.cli.app import main

sys.exit(main())
