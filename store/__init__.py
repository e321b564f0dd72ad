"""The Zarr store, format v1: its typed attributes (``ident3d.store.attrs``, the one owner of the format's
self-description), array I/O with per-chunk completion flags (``ident3d.store.zarr_io``) and what readers need to know
about a store (``ident3d.store.info``). Below ``render``, ``ingest`` and ``training``: all of them write or read stores
through it."""
