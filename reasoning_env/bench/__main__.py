"""``python -m reasoning_env.bench <command>``: see :mod:`reasoning_env.bench`."""

import sys

from reasoning_env.bench import main

sys.exit(main())
