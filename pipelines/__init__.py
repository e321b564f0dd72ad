"""End-to-end jobs and the ``ident3d`` command line (the only package that wires the others)."""
