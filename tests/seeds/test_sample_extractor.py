"""The seed-sample extractor on small made-up documents (no seed files needed)."""

from __future__ import annotations

import pytest

from tests.seeds.samples import extract, run_python

DOCUMENT = '''Title

Validation

Define a tool:

from typing import Any


class Tool:
    def run(self) -> None:
        """Do it.

        Args:
            none
        """
        print("ran")

open_catalog() returns an immutable snapshot.

English | 简体中文

servers:
  - name: a
    call_timeout_sec: 3

Name\tPurpose
Tool\tA tool.

{"success": True, "observation": "x"}

{
  "name": "pick",
  "ok": false
}

from typing import Any


class Tool:
    def run(self) -> None:
        """Do it.

        Args:
            none
        """
        print("ran")
'''


def test_finds_each_kind_once_and_keeps_code_whole() -> None:
    samples = extract(DOCUMENT, "000_doc.txt")
    assert [s.kind for s in samples] == ["python", "yaml", "table", "literal", "json"]
    code = samples[0]
    assert code.line == 7 and code.text.startswith("from typing import Any") and code.text.endswith('print("ran")')
    assert code.repeats == (37,)  # the repeated copy is one sample
    assert samples[2].table() == [["Name", "Purpose"], ["Tool", "A tool."]]


def test_runs_python_with_mapped_imports() -> None:
    source = extract("from jharness.toolkit import ToolRegistry\n\nregistry = ToolRegistry()\n", "001.txt")[0]
    namespace = run_python(source)
    assert type(namespace["registry"]).__module__ == "sr_dist.tools.registry"
    missing = extract("from harness import NoSuchThing\n\nx = NoSuchThing()\n", "003.txt")[0]
    with pytest.raises(ImportError, match="mapped to sr_dist.tools"):
        run_python(missing)
    unmapped = extract("import jharness.other\n\nx = f()\n", "001.txt")[0]
    with pytest.raises(ImportError, match="not mapped"):
        run_python(unmapped)
