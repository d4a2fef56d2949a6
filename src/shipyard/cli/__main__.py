"""`python -m shipyard.cli`: the same as the `shipyard` command."""

import sys

from shipyard.cli import main

sys.exit(main())
