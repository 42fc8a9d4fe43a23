#!/usr/bin/env python
"""Write docs/config-reference.md from the config models (specbench/report/reference/config_reference.py).

.venv/bin/python scripts/config_reference.py          # rewrite the page
.venv/bin/python scripts/config_reference.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

from specbench.report.reference.config_reference import files, reference

PAGE = Path(__file__).resolve().parents[1] / "docs" / "config-reference.md"


def main() -> int:
    text = reference(files())
    if "--check" in sys.argv:
        if PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE} is out of date: run python scripts/config_reference.py")
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"written {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
