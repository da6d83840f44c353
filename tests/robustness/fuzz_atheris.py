"""Coverage-guided fuzzing of parse_formula and the three parsers with atheris (libFuzzer).

Run by hand (any libFuzzer flags work)::

    .venv/bin/python tests/robustness/fuzz_atheris.py -runs=200000 -max_len=4096
    .venv/bin/python tests/robustness/fuzz_atheris.py -max_total_time=600 corpus_dir/

Each input is decoded to text and fed to ``parse_formula`` and to every parser; the only
acceptable outcomes are a ``Formula``, a ``FormulaError`` or a ``ParseResult`` with errors.
Anything else raises, and libFuzzer saves the crashing input. atheris is optional
(``pip install 'atheris>=2.3,<4'``); ``test_atheris.py`` runs a short bounded session when it is
installed.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from sr_dist.formula import FormulaError, parse_formula
    from sr_dist.parsers import ParseResult, get_parser

PARSERS = (get_parser("openai"), get_parser("openai", text_fallback=True), get_parser("json"),
           get_parser("text"))
VARIABLES = ("x", "y", "theta")


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    text = fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes())
    try:
        formula = parse_formula(text, VARIABLES)
    except FormulaError:
        pass
    else:
        _ = formula.canonical, str(formula)
    for parser in PARSERS:
        result = parser.parse(text)
        if not isinstance(result, ParseResult):
            raise AssertionError(f"{type(parser).__name__}.parse returned {type(result).__name__}")
        for error in result.errors:
            if "internal parser error" in error:
                raise AssertionError(f"{type(parser).__name__} raised inside parse: {error}")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
