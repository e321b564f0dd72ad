"""Errors raised for bad user input; the CLI prints their one-line message and exits with code 2."""


class UserError(ValueError):
    """Bad input from the user (a file, a name, a value); the message says what to do."""


class MissingData(UserError):
    """Files a config or command names are not on this machine (a dataset to fetch): the settings may be fine."""


class SpecError(UserError):
    """A structural causal model spec (or a request against it) is invalid."""


class ParameterError(UserError):
    """A bad value of a named API parameter: Python callers read the parameter's name (``chunk_size must be ...``),
    the command line its flag (``--chunk-size must be ...``, via ``ident3d.pipelines.flags.flag_names``)."""

    def __init__(self, param: str, detail: str):
        super().__init__(f"{param} {detail}")
        self.param, self.detail = param, detail

    def __reduce__(self) -> tuple[type, tuple[str, str]]:  # pickles (e.g. from a Dask worker) with both parts
        return type(self), (self.param, self.detail)

    def flag_text(self) -> str:
        """The message with the parameter as its command-line flag."""
        return f"--{self.param.replace('_', '-')} {self.detail}"


def check_keys(raw: object, allowed: set[str] | frozenset[str], where: str) -> None:
    """A spec mapping has only ``allowed`` keys: else one ``SpecError`` line naming ``where``, the unknown keys and
    the allowed ones."""
    extra = set(raw) - set(allowed)  # type: ignore[call-overload]
    if extra:
        raise SpecError(f"{where}: unknown key(s) {sorted(extra)}; allowed: {sorted(allowed)}")


class Note(UserWarning):
    """Something a user should know about a valid request (a rule it cannot apply, what a model means on this data),
    said once before the work: the commands print it as one 'note:' line, Python callers see a warning."""
