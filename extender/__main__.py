"""`python -m extender` is `archfit`."""

import sys

from extender.cli import main

sys.exit(main())
