"""``python -m reasoning_env.server --host 0.0.0.0 --port 8000`` (see :func:`reasoning_env.server.app.main`)."""

import sys

from reasoning_env.server.app import main

sys.exit(main())
