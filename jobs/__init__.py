"""Parallel jobs on Dask, shared by renders, imports and experiment cells (``ident3d.jobs.cluster``)."""
