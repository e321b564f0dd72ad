"""The one number reader: YAML that reads numbers the way a researcher writes them.

PyYAML follows YAML 1.1, where a float needs a dot, so ``5e-2`` and ``1E-3`` come back as strings (and fail
later as "'<=' not supported between 'str' and 'int'"). ``load_yaml`` (every config and spec file) and
``parse_value`` (``--hp`` / ``--encoder-arg`` values) read ``1e-3``, ``5E-2``, ``.5``, ``-2.``, ``1_000``, ``nan``,
``inf`` and ``1e400`` (inf) as numbers (the checks that use them refuse what is not finite); everything else is
YAML 1.1 as before.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

# a decimal number with an exponent and no dot (YAML 1.1's float already covers every form with a dot), and
# nan / inf written as Python prints them (YAML 1.1 knows only .nan and .inf)
_EXPONENT = re.compile(r"^(?:[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+|[-+]?(?:inf|Inf|INF|infinity|Infinity)|nan|NaN|NAN)$")


class NumberLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that also resolves exponent notation without a dot (``1e-3``) to floats."""


NumberLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT, list("-+0123456789iInN"))


def load_yaml(text: str) -> Any:
    """Parse a YAML document with ``NumberLoader`` (raises ``yaml.YAMLError`` on bad YAML, as ``safe_load``)."""
    return yaml.load(text, Loader=NumberLoader)  # noqa: S506 - NumberLoader is a SafeLoader


def parse_value(text: str) -> Any:
    """One command-line value as YAML (numbers as above, true/false, null, [lists]); text that is not valid
    YAML (``a: b: c``) is kept as the string it is."""
    try:
        return load_yaml(text)
    except yaml.YAMLError:
        return text
