"""``python -m profiling.nsight --op scale``: profile an op's sweep under Nsight Compute, or replay it.

The command line is :func:`profiling.nsight.sweep.main`; ``--help`` lists the ops and every flag.
"""

import sys

from .sweep import main

sys.exit(main())
