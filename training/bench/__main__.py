"""``python -m training.bench <command>``: see :mod:`training.bench`."""

import sys

from training.bench import main

sys.exit(main())
