"""The Zarr store, format v1: its typed attributes (``store.attrs``, the one owner of the format's
self-description), array I/O with per-chunk completion flags (``store.zarr_io``) and what readers need to know
about a store (``store.info``). Below ``render``, ``ingest`` and ``training``: all of them write or read stores
through it."""
