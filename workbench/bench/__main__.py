"""``python -m workbench.bench <command>``: see :mod:`workbench.bench`."""

import sys

from workbench.bench import main

sys.exit(main())
