"""The workbench engine, in parts that import one way (docs/architecture.md).

``harness`` (ops, timing, correctness, the result schema) <- ``nsight`` (Nsight Compute:
naming, presets, worker, runner, reader, recordings, sweep) <- ``analysis`` (roofline,
plots) <- ``workbench`` (tables, notebook, panel, publish); ``provenance``, ``files``
and ``units`` sit below them all.
"""
