"""Reasoning Economics Workbench: the Hugging Face Space entry point, and ``python app.py`` locally.

Serves the Gradio workbench at ``/`` (Play, Reward lab, Runs) and the OpenEnv API of the
environment (``/reset``, ``/step``, ``/state``, ``/ws``, ``/health``, ``/schema``, ``/metadata``)
from one process. Offline by default: builtin stand-in questions and the embedded Qwen2.5
tokenizer. Configure it with the ``REE_*`` variables of ``reasoning_env.server``.

    python app.py                       # http://127.0.0.1:7860/
    python app.py --host 0.0.0.0 --port 8000 --runs-root runs
    PORT=8000 python app.py             # PORT, else GRADIO_SERVER_PORT, else 7860
"""

import sys

from workbench.app.server import create_app, main  # noqa: F401  (create_app: for `uvicorn app:app`-style use)

if __name__ == "__main__":
    sys.exit(main())
