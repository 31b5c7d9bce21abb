"""The checkout's name for the window-evaluation job; the job itself is ``csparql.jobs.evaluate_window``
(``csparql.jobs.job_path()`` is its file in an installed package)."""
import sys; from csparql.jobs.evaluate_window import *  # noqa: E401,E702,F403
from csparql.jobs.evaluate_window import main

if __name__ == "__main__":
    sys.exit(main())
