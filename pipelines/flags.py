"""API parameter errors in the command line's words: ``chunk_size must be ...`` from ``ident3d.ingest.published`` (or
any API raising ``ident3d.causal.errors.ParameterError``) reads ``--chunk-size must be ...`` from the command that
called it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ident3d.causal.errors import ParameterError, UserError


@contextmanager
def flag_names() -> Iterator[None]:
    """Re-raise a ``ParameterError`` from the block as a ``UserError`` naming the flag instead of the parameter."""
    try:
        yield
    except ParameterError as exc:
        raise UserError(exc.flag_text()) from None
