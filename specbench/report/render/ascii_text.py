"""ASCII spellings of the symbols specbench prints, for `specbench --plain` (CI logs, terminals
without UTF-8).

The plain console (report/run/console.py) passes every string it renders through `to_ascii` before
rich lays it out, so table columns are sized on the ASCII text. Only the symbols in `ASCII` are
rewritten: a character that is not one of ours (a workload name, a path, a prompt id) is the
user's data and prints as given.
"""

from __future__ import annotations

# Every non-ASCII character specbench's own code and documents print (greek letters, arrows,
# math, dashes, marks); tests/report/test_plain_ascii.py checks the whole package against it.
ASCII: dict[str, str] = {
    # greek letters (docs/theory.md's notation)
    "α": "alpha",
    "β": "beta",
    "γ": "gamma",
    "δ": "delta",
    "ε": "eps",
    "ζ": "zeta",
    "θ": "theta",
    "κ": "kappa",
    "λ": "lambda",
    "ν": "nu",
    "π": "pi",
    "ρ": "rho",
    "σ": "sigma",
    "τ": "tau",
    "χ": "chi",
    "Δ": "Delta",
    "Π": "Prod",
    "Σ": "Sum",
    "Φ": "Phi",
    "ā": "a_bar",
    "Ŝ": "S",
    "Š": "S",
    "á": "a",
    "\u0302": "^",  # combining circumflex: an estimate's hat
    # arrows and relations
    "→": "->",
    "←": "<-",
    "⇔": "<=>",
    "≥": ">=",
    "≤": "<=",
    "≈": "~",
    "∝": "~",
    "∈": " in ",
    "∃": "exists ",
    "∞": "inf",
    "√": "sqrt",
    "±": "+/-",
    "×": "x",
    "÷": "/",
    "−": "-",
    "⌈": "ceil(",
    "⌉": ")",
    # super- and subscripts
    "²": "^2",
    "¹": "^1",
    "⁶": "^6",
    "⁸": "^8",
    "⁻": "^-",
    "ⁿ": "^n",
    "₀": "0",
    "₁": "1",
    "½": "1/2",
    # punctuation and marks
    "§": "S",
    "·": "*",
    "—": "--",
    "–": "-",
    "…": "...",
    "′": "'",
    "°": " deg",
    "⚠": "!",
    "✅": "[ok]",
    "❌": "[x]",
    "\ufe0f": "",  # emoji variation selector
    "▶": ">",
    "▲": "^",
    "◀": "<",
    "─": "-",
    "━": "=",
    "│": "|",
    "▁": "_",
}

_TABLE = str.maketrans(ASCII)


def to_ascii(text: str) -> str:
    """`text` with specbench's symbols spelled in ASCII; other characters unchanged."""
    return text.translate(_TABLE) if not text.isascii() else text
