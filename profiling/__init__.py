"""The workbench engine: op registry, timing, Nsight Compute runs, reports, roofline."""
