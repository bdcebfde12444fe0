"""``python -m profiling.nsight --op scale``: profile an op's sweep under Nsight Compute (see sweep.main)."""

import sys

from .sweep import main

sys.exit(main())
