"""Errors raised for bad user input; the CLI prints their one-line message and exits with code 2."""


class UserError(ValueError):
    """Bad input from the user (a file, a name, a value); the message says what to do."""


class SpecError(UserError):
    """A structural causal model spec (or a request against it) is invalid."""
