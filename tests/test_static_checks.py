"""Mistakes a reader finds without running the code: a name used but never defined or imported, a variable
assigned and never read, an import no line uses, a loop variable that hides an import.

Ruff (pyflakes' rules) checks the package, the Spark jobs, the DAGs, the benchmarks and the tests themselves: a
test that would fail with a ``NameError`` only on the path it takes after a long run is caught here in a second.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support import ROOT

RULES = ("F401", "F402", "F821", "F822", "F823", "F841")
"""Unused import, import shadowed by a loop variable, undefined name, undefined name in ``__all__``, local
used before assignment, local assigned and never used."""

CHECKED = ("plugins", "spark_jobs", "dags", "benchmarks", "tests")


def test_no_module_uses_an_undefined_name_or_keeps_an_unused_import_or_variable():
    ruff = Path(sys.executable).with_name("ruff")
    checked = [folder for folder in CHECKED if (ROOT / folder).is_dir()]
    finding = subprocess.run(
        [str(ruff), "check", "--no-cache", "--isolated", "--output-format", "concise", "--select", ",".join(RULES),
         *checked],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert finding.returncode == 0, finding.stdout + finding.stderr
