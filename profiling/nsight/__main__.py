"""``python -m profiling.nsight --op scale``: profile an op's sweep under Nsight Compute, or replay it.

The command line is :func:`profiling.nsight.sweep.main`; ``--help`` lists every flag, ``--list`` the ops.
"""

import sys

from .. import commands

commands.starting(commands.nsight_parser())  # --help and usage errors answer before sweep loads torch and pandas

from .sweep import main  # noqa: E402  (after the arguments are parsed: see profiling/commands.py)

commands.started()
sys.exit(main())
