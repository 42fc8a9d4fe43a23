"""The shape of specbench, checked statically from its source (ast; nothing of specbench is
imported here) plus a few short startup checks in a fresh interpreter.

The rules (issue 13, shared/STYLE.md): imports flow one way, cli → harness → decoding / analysis →
records / config / data, and report only reads analysis results; no import cycle; no module
reaches into another module's `_private` names; no module over 400 lines; `specbench.analysis`
and `specbench.report` never import torch or transformers, so `roi`, `compare`, `report` and
`simulate` start without them.

The import graph counts every import statement: module level, inside functions (lazy imports)
and under `if TYPE_CHECKING:` alike — a dependency is a dependency even when it is deferred.
What a module imports *when it is imported* (`runtime_closure`) uses the module-level,
non-TYPE_CHECKING ones only.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "specbench"
UNIT = ROOT / "tests" / "unit"

MAX_LINES = 400
HEAVY = ("torch", "transformers")
PURE_LAYERS = ("specbench.analysis", "specbench.report")
# What analysis and report may never import (directly, at module level or inside a function).
# specbench.commands is today's half of the CLI (it becomes specbench.cli); specbench.models
# loads models with torch.
FORBIDDEN_FOR_PURE = (
    "specbench.decoding",
    "specbench.harness",
    "specbench.cli",
    "specbench.commands",
    "specbench.models",
    *HEAVY,
)
FORBIDDEN_FOR_REPORT = ("specbench.records", "specbench.harness")
# The harness turns decoding into records and results.json; rendering them (report/) and the
# commands (cli/) sit above it: `cli.report.write_reports` calls the harness, then report/.
FORBIDDEN_FOR_HARNESS = ("specbench.report", "specbench.cli")
# The one exception: the γ policies (and the round record they read) are the decoding loop's own
# code and pure; `specbench simulate` (analysis/simulate/replay.py) replays the very same policies on
# recorded acceptance traces, so its predictions use what `run` runs. Both must stay torch-free
# (test_allowed_spec_modules_are_torch_free).
ALLOWED_FOR_PURE = ("specbench.decoding.policies", "specbench.decoding.rounds")

# Unit-test modules allowed to import torch: they test specbench.decoding's tensor math on small
# hand-made tensors. Every other unit test (analysis, report, data, config, cli) must run
# without torch; no unit test loads a model (tests/unit/conftest.py enforces that at run time).
# The unit tests that may import torch live in tests/unit/tensors/ (decoding/ and models/ pieces on
# small hand-made tensors: sampling, acceptance rules, the n-gram drafter, teacher-forced planning,
# verify's statistics, devices and dtypes). `make test-fast` leaves that folder out: importing
# torch costs each test process seconds, half the fast lane's collection.
TORCH_UNIT_DIR = UNIT / "tensors"


@dataclass(frozen=True)
class Import:
    """One imported name: `target` is the module it resolves to (a specbench module, or the
    top-level name of a third-party package), `name` the object taken from it (None for
    `import x`), `local` whether the statement sits inside a function, `type_only` whether
    it sits under `if TYPE_CHECKING:`."""

    source: str
    target: str
    name: str | None
    line: int
    local: bool
    type_only: bool


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@cache
def modules() -> dict[str, Path]:
    """Every specbench module, by dotted name (a package is its __init__)."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(
    node: ast.AST, local: bool = False, type_only: bool = False
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    """Every import statement under `node`, with whether it is local and TYPE_CHECKING-only."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, local, type_only
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(child, True, type_only)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), local, True)
            for stmt in child.orelse:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), local, type_only)
        else:
            yield from _walk(child, local, type_only)


def _resolve_relative(source: str, is_package: bool, level: int, module: str | None) -> str:
    base = source.split(".") if is_package else source.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


def _top(name: str) -> str:
    """A specbench module as is; any other import as its top-level package."""
    return name if name == "specbench" or name.startswith("specbench.") else name.split(".")[0]


def imports_of(name: str, path: Path, known: Iterable[str]) -> list[Import]:
    known = set(known)
    module = tree(path)
    is_package = path.name == "__init__.py"
    out: list[Import] = []
    for stmt, local, type_only in _walk(module):
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                out.append(Import(name, _top(alias.name), None, stmt.lineno, local, type_only))
            continue
        base = (
            _resolve_relative(name, is_package, stmt.level, stmt.module)
            if stmt.level
            else (stmt.module or "")
        )
        for alias in stmt.names:
            sub = f"{base}.{alias.name}"
            if sub in known:
                # `from specbench.data import sources`: the submodule, read through the
                # package's namespace, so the package's __init__ is a dependency too
                out.append(Import(name, sub, None, stmt.lineno, local, type_only))
                if base != name:
                    out.append(Import(name, base, None, stmt.lineno, local, type_only))
            else:
                out.append(Import(name, _top(base), alias.name, stmt.lineno, local, type_only))
    # importlib.import_module("specbench.x") / (f"specbench.commands.{name}"): a literal name,
    # or every module under an f-string's literal prefix
    for node in ast.walk(module):
        if not (isinstance(node, ast.Call) and node.args and _is_dynamic_import(node.func)):
            continue
        arg, local = node.args[0], _inside_function(module, node)
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            targets = [arg.value if arg.value in known else _top(arg.value)]
        elif (
            isinstance(arg, ast.JoinedStr)
            and arg.values
            and isinstance(arg.values[0], ast.Constant)
            and isinstance(arg.values[0].value, str)
        ):
            prefix = arg.values[0].value
            targets = [m for m in sorted(known) if m.startswith(prefix) and m != prefix]
        else:
            continue
        out += [Import(name, t, None, node.lineno, local, False) for t in targets]
    return out


def _is_dynamic_import(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id in ("import_module", "__import__")
    )


def _inside_function(module: ast.Module, target: ast.AST) -> bool:
    for fn in ast.walk(module):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and any(
            n is target for n in ast.walk(fn)
        ):
            return True
    return False


@cache
def graph() -> dict[str, list[Import]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def _in(target: str, prefixes: Iterable[str]) -> bool:
    return any(target == p or target.startswith(p + ".") for p in prefixes)


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one member (or a self-loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges.get(v, ()):
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _cycle_through(component: list[str], edges: dict[str, set[str]]) -> list[str]:
    """One concrete cycle inside a component, for the message: a → b → … → a."""
    members = set(component)
    start = component[0]
    path, seen = [start], {start}
    while True:
        nxt = sorted(w for w in edges[path[-1]] if w in members)
        back = [w for w in nxt if w == start]
        if back and len(path) > 1:
            return [*path, start]
        fresh = [w for w in nxt if w not in seen]
        if not fresh:  # closes on an earlier member: cut the path there
            w = nxt[0]
            return [*path[path.index(w) :], w]
        path.append(fresh[0])
        seen.add(fresh[0])


def runtime_closure(name: str) -> dict[str, list[str]]:
    """What importing `name` imports, module-level statements only: each reached module or
    third-party package with one import chain that reaches it."""
    g = graph()
    known = modules()
    chains: dict[str, list[str]] = {name: [name]}
    todo = [name]
    while todo:
        cur = todo.pop()
        # importing a.b.c runs a/__init__ and a/b/__init__ first
        parents = [".".join(cur.split(".")[:i]) for i in range(1, cur.count(".") + 1)]
        targets = [p for p in parents if p in known]
        targets += [i.target for i in g.get(cur, []) if not i.local and not i.type_only]
        for t in targets:
            if t not in chains:
                chains[t] = [*chains[cur], t]
                if t in known:
                    todo.append(t)
    return chains


# --- (a) no import cycle --------------------------------------------------------------------------


def test_the_import_graph_has_no_cycle() -> None:
    edges = {
        m: {i.target for i in imps if i.target in modules() and i.target != m}
        for m, imps in graph().items()
    }
    cycles = [
        " → ".join(_cycle_through(c, edges))
        + (f"   (all of: {', '.join(c)})" if len(c) > 2 else "")
        for c in strongly_connected(edges)
    ]
    assert not cycles, "import cycles (counting local and TYPE_CHECKING imports):\n" + "\n".join(
        cycles
    )


# --- (b) no reaching into another module's private names ------------------------------------------


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_module_imports_a_private_name_of_another() -> None:
    found = []
    known = modules()
    for mod, imps in graph().items():
        for i in imps:
            if i.target in known and i.target != mod and i.name and _private(i.name):
                found.append(f"{mod}:{i.line} imports {i.name} from {i.target}")
        # `import specbench.x as m` / `from specbench import x` then `m._name`
        parsed = tree(known[mod])
        bound: dict[str, str] = {}
        for node in ast.walk(parsed):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname and a.name in known:
                        bound[a.asname] = a.name
            elif isinstance(node, ast.ImportFrom):
                base = (
                    _resolve_relative(mod, mod in _packages(), node.level, node.module)
                    if node.level
                    else (node.module or "")
                )
                for a in node.names:
                    if f"{base}.{a.name}" in known:
                        bound[a.asname or a.name] = f"{base}.{a.name}"
        for node in ast.walk(parsed):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and bound[node.value.id] != mod
                and _private(node.attr)
            ):
                found.append(f"{mod}:{node.lineno} uses {bound[node.value.id]}.{node.attr}")
    assert not found, "private names used across modules:\n" + "\n".join(sorted(set(found)))


@cache
def _packages() -> frozenset[str]:
    return frozenset(m for m, p in modules().items() if p.name == "__init__.py")


# --- (c) module size ------------------------------------------------------------------------------


def test_no_module_is_over_400_lines() -> None:
    sizes = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in modules().items()}
    big = sorted((n, m) for m, n in sizes.items() if n > MAX_LINES)
    assert not big, f"modules over {MAX_LINES} lines (split by concept):\n" + "\n".join(
        f"{n:5d}  {m}" for n, m in reversed(big)
    )


# --- (d) layering ---------------------------------------------------------------------------------


def _violations(layers: Iterable[str], forbidden: Iterable[str]) -> list[str]:
    forbidden = tuple(forbidden)
    out = []
    for mod, imps in graph().items():
        if not _in(mod, layers):
            continue
        for i in imps:
            if _in(i.target, forbidden) and i.target not in ALLOWED_FOR_PURE:
                where = "local" if i.local else "type-only" if i.type_only else "module level"
                out.append(f"{mod}:{i.line} imports {i.target} ({where})")
    return sorted(set(out))


def test_analysis_and_report_import_no_model_code_torch_or_transformers() -> None:
    bad = _violations(PURE_LAYERS, FORBIDDEN_FOR_PURE)
    assert not bad, (
        "analysis/ and report/ are numpy/scipy/pandas only; move the code or pass data in:\n"
        + "\n".join(bad)
    )


def test_allowed_decoding_modules_are_torch_free() -> None:
    for mod in ALLOWED_FOR_PURE:
        chains = runtime_closure(mod)
        assert not [h for h in HEAVY if h in chains], (
            mod,
            [chains[h] for h in HEAVY if h in chains],
        )
        assert not [
            i.target
            for i in graph()[mod]
            if _in(i.target, FORBIDDEN_FOR_PURE) and i.target not in ALLOWED_FOR_PURE
        ]


def test_report_reads_analysis_results_not_records_or_the_harness() -> None:
    bad = _violations(("specbench.report",), FORBIDDEN_FOR_REPORT)
    assert not bad, "report/ renders typed analysis results only:\n" + "\n".join(bad)


def test_the_harness_imports_neither_report_nor_cli() -> None:
    bad = _violations(("specbench.harness",), FORBIDDEN_FOR_HARNESS)
    assert not bad, (
        "harness/ writes records and results.json; cli/ calls report/ to render them:\n"
        + "\n".join(bad)
    )


def test_analysis_and_report_reach_no_torch_when_imported() -> None:
    """The static form of the startup check below, naming the import chain to cut."""
    found = []
    for mod in modules():
        if not _in(mod, PURE_LAYERS):
            continue
        chains = runtime_closure(mod)
        for heavy in HEAVY:
            if heavy in chains:
                found.append(" → ".join(chains[heavy]))
    assert not found, "module-level import chains from analysis/report to torch:\n" + "\n".join(
        sorted(found)
    )


# --- typed data between layers (issue 30) ---------------------------------------------------------

# report/ renders typed models; a public function taking or returning `dict[str, Any]` passes
# untyped data across the boundary. A ratchet: lower it when a signature gets its model, never
# raise it (a JSON document written out as is is `dict[str, JsonValue]`, the run loop's record
# events a typed `record_line.UnitFinished`).
REPORT_UNTYPED_SIGNATURES = 0
# The same ratchet on analysis/ (issue 30 took it from 163 to 96, then to 0: the pipeline builds
# `RunResults` directly, its entries, verdicts, sections and rows as models): a records.jsonl line
# crosses as `record_line.RecordLine` (a TypedDict) and a stored config as
# `config.stored.StoredConfig`; JSON Schemas and accept.json's to_json are `dict[str, JsonValue]`,
# the JSON documents they are (docs/architecture.md "Typed data"). An estimate crosses as
# `stats.serialize.EstimateDoc`, a policy's options as `PolicyOptions`.
ANALYSIS_UNTYPED_SIGNATURES = 0


def _public_functions(body: list[ast.stmt]) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not _private(node.name):
            yield node
        elif isinstance(node, ast.ClassDef) and not _private(node.name):
            yield from _public_functions(node.body)


def untyped_signatures(package: str) -> list[str]:
    """Each annotation of a public function's (or public method's) argument or return in
    `package` that holds `dict[str, Any]`, as `module:line name: annotation`."""
    found = []
    for mod, path in modules().items():
        if not _in(mod, (package,)):
            continue
        for fn in _public_functions(tree(path).body):
            a = fn.args
            args = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            notes = [x.annotation for x in args if x is not None and x.annotation is not None]
            for note in [*notes, *([fn.returns] if fn.returns is not None else [])]:
                text = ast.unparse(note)
                if "dict[str, Any]" in text:
                    found.append(f"{mod}:{fn.lineno} {fn.name}: {text}")
    return found


def test_report_signatures_pass_typed_models_not_dicts() -> None:
    found = untyped_signatures("specbench.report")
    assert len(found) <= REPORT_UNTYPED_SIGNATURES, (
        f"{len(found)} `dict[str, Any]` in report/'s public signatures, more than the "
        f"{REPORT_UNTYPED_SIGNATURES} allowed; pass the typed model instead:\n" + "\n".join(found)
    )
    assert len(found) == REPORT_UNTYPED_SIGNATURES, (
        f"only {len(found)} left: lower REPORT_UNTYPED_SIGNATURES to {len(found)} (a ratchet)"
    )


def test_analysis_signatures_pass_typed_models_not_dicts() -> None:
    found = untyped_signatures("specbench.analysis")
    assert len(found) <= ANALYSIS_UNTYPED_SIGNATURES, (
        f"{len(found)} `dict[str, Any]` in analysis/'s public signatures, more than the "
        f"{ANALYSIS_UNTYPED_SIGNATURES} allowed; pass a typed model (a record: RecordLine; the "
        "stored config: StoredConfig):\n" + "\n".join(found)
    )
    assert len(found) == ANALYSIS_UNTYPED_SIGNATURES, (
        f"only {len(found)} left: lower ANALYSIS_UNTYPED_SIGNATURES to {len(found)} (a ratchet)"
    )


def test_analysis_hides_no_untyped_record_behind_an_alias() -> None:
    """`Record = dict[str, Any]` would take records out of the count above: a module-level alias
    in analysis/ is never a bare `dict[str, Any]` or a list / sequence of them."""
    bare = {"dict[str, Any]", "list[dict[str, Any]]", "Sequence[dict[str, Any]]"}
    found = [
        f"{mod}:{node.lineno} {ast.unparse(node)}"
        for mod, path in modules().items()
        if _in(mod, ("specbench.analysis",))
        for node in tree(path).body
        if isinstance(node, ast.Assign) and ast.unparse(node.value) in bare
    ]
    assert not found, "untyped aliases in analysis/ (use RecordLine or a model):\n" + "\n".join(
        found
    )


# --- analysis/, report/, harness/ and harness/serving/ by concept, importing one way ---------------

ANALYSIS = "specbench.analysis"
# Bottom to top (docs/architecture.md): a sub-package may import the ones before it, never one
# after it. The statistics and the arithmetic know nothing of runs; the documents are the typed
# files; estimators read records; serving reads engine runs; decide turns estimates into verdicts;
# pipeline builds results.json; each command's own analysis and the calibrations sit on top.
ANALYSIS_ORDER = (
    "stats",
    "arithmetic",
    "documents",
    "estimators",
    "serving",
    "decide",
    "pipeline",
    "compare",
    "conformance",
    "canary",
    "rollout",
    "verify",
    "simulate",
    "calibration",
)
# report/: the media (console, blocks, figure files) know nothing of runs; roi's title and the γ
# schedule's exports are drawn by the run's sections (plots, the engine sections); the sections
# make up a run's documents and console (run/); each command's own output sits on top (canary's
# report borrows the run console's table style, simulate the sections' number format).
REPORT_ORDER = (
    "render",
    "roi",
    "schedule",
    "sections",
    "run",
    "accept",
    "compare",
    "canary",
    "simulate",
    "verify",
    "reference",
)
# harness/: what made a run (env), memory from files, and the run plan sit below both backends;
# the serving engines and the transformers runner use them; `specbench run`'s request drives
# either backend; each command's orchestration sits on top (compare --ab runs lockstep turns
# and reads run directories; canary scrapes engine counters).
HARNESS_ORDER = (
    "env",
    "memory",
    "plan",
    "serving",
    "transformers",
    "run",
    "accept",
    "verify",
    "compare",
    "canary",
)
# harness/serving/: the protocol every adapter implements; how requests arrive (the loops both
# backends run); what an engine reports; the two backends; the driver that runs either.
SERVING_ORDER = ("protocol", "load", "metrics", "openai", "vllm", "drive")
BY_CONCEPT = {
    ANALYSIS: ANALYSIS_ORDER,
    "specbench.report": REPORT_ORDER,
    "specbench.harness": HARNESS_ORDER,
    "specbench.harness.serving": SERVING_ORDER,
}
# Modules allowed to sit flat beside the sub-packages of a BY_CONCEPT package (beyond its package
# face, __init__.py), each with the reason. None today: every module belongs to a concept.
FLAT_ALLOWED: dict[str, str] = {}


def _part(package: str, module: str) -> str | None:
    """The sub-package of `package` that `module` belongs to (None outside `package`, or for the
    package's own face)."""
    if not module.startswith(package + "."):
        return None
    return module.split(".")[package.count(".") + 1]


@pytest.mark.parametrize("package", sorted(BY_CONCEPT), ids=lambda p: p.split(".", 1)[1])
def test_no_module_outside_its_sub_packages(package: str) -> None:
    """analysis/, report/, harness/ and harness/serving/ hold their package face and the
    sub-packages their order lists, nothing else (FLAT_ALLOWED aside)."""
    order = BY_CONCEPT[package]
    depth = package.count(".") + 1
    top = [m for m in modules() if _part(package, m) is not None and m.count(".") == depth]
    flat = sorted(m for m in top if m not in _packages() and m not in FLAT_ALLOWED)
    assert not flat, f"{package} modules outside its sub-packages (move them into one):\n" + (
        "\n".join(flat)
    )
    unlisted = sorted(m for m in top if m in _packages() and m.rsplit(".", 1)[1] not in order)
    assert not unlisted, f"{package} sub-packages missing from its order: {unlisted}"
    missing = [p for p in order if f"{package}.{p}" not in _packages()]
    assert not missing, f"{package}'s order lists what is not a sub-package of it: {missing}"


@pytest.mark.parametrize("package", sorted(BY_CONCEPT), ids=lambda p: p.split(".", 1)[1])
def test_sub_packages_import_only_those_below_them(package: str) -> None:
    """Counting local and TYPE_CHECKING imports too, as the cycle test does."""
    order = BY_CONCEPT[package]
    rank = {p: i for i, p in enumerate(order)}
    upward: list[str] = []
    for mod, imps in graph().items():
        src = _part(package, mod)
        if src not in rank:
            continue
        for i in imps:
            dst = _part(package, i.target)
            if dst in rank and rank[dst] > rank[src]:
                where = "local" if i.local else "type-only" if i.type_only else "module level"
                upward.append(f"{mod}:{i.line} ({src}) imports {i.target} ({dst}, above; {where})")
    assert not upward, (
        f"{package}'s sub-packages import one way, "
        + " → ".join(reversed(order))
        + ":\n"
        + "\n".join(sorted(set(upward)))
    )


# --- thin commands (issue 30) ---------------------------------------------------------------------

# A command parses its options, builds a typed request, calls one function and renders the result
# (docs/architecture.md). Its body, not counting its parameter list and docstring, holds at most
# this many statements (nested ones counted: an `if` with two lines inside is three).
MAX_COMMAND_STATEMENTS = 12
# Commands not thinned yet, at their statement count today: a ratchet (a count only goes down, and
# a command leaves the list once it fits). Issue 30 item 3 thinned roi, run, accept, compare,
# verify, predict_check, simulate, canary and validate; schedule still does its work in the
# command body.
FAT_COMMANDS = {"schedule": 18}
# Options declared by several commands with different defaults on purpose (each reason says why).
INTENTIONAL_DEFAULTS = {
    "--gamma-max": "roi is analytic and looks further (defaults.ROI_GAMMA_MAX) than accept",
    "--gpus": "roi has no config to fall back on (1); run, report and validate take the config's",
    "--out": "compare's --out is where --ab writes its runs; the others' default is their own",
    "--seed": "verify's checks draw from seed 0; run and accept fall back to the config's seed",
    "--significance": "compare's falls back to the thresholds file; verify's is family-wise",
}
CLI = PACKAGE / "cli"


def command_functions() -> dict[str, ast.FunctionDef]:
    """Each function cli/app.py registers in COMMANDS, found in the cli module it imports it from."""
    app = tree(CLI / "app.py")
    source = {
        a.asname or a.name: node.module
        for node in app.body
        if isinstance(node, ast.ImportFrom) and node.module
        for a in node.names
    }
    names = [
        elt.id
        for node in app.body
        if isinstance(node, ast.AnnAssign | ast.Assign)
        and "COMMANDS" in ast.unparse(node.target if isinstance(node, ast.AnnAssign) else node)
        and isinstance(node.value, ast.Tuple)
        for elt in node.value.elts
        if isinstance(elt, ast.Name)
    ]
    out = {}
    for name in names:
        body = tree(modules()[source[name]]).body
        out[name] = next(f for f in body if isinstance(f, ast.FunctionDef) and f.name == name)
    return out


def body_statements(fn: ast.FunctionDef) -> int:
    """Statements in a function's body, nested ones included, its docstring not."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return sum(isinstance(node, ast.stmt) for stmt in body for node in ast.walk(stmt))


def test_commands_are_thin() -> None:
    commands = command_functions()
    assert len(commands) >= 12, sorted(commands)  # the COMMANDS tuple was found and read
    counts = {name: body_statements(fn) for name, fn in commands.items()}
    fat = sorted(
        f"{name}: {n} statements (at most {FAT_COMMANDS.get(name, MAX_COMMAND_STATEMENTS)})"
        for name, n in counts.items()
        if n > FAT_COMMANDS.get(name, MAX_COMMAND_STATEMENTS)
    )
    assert not fat, (
        "command bodies over their limit; build a typed request and call one function "
        "(e.g. harness/accept/accept_request.py):\n" + "\n".join(fat)
    )
    thinned = sorted(n for n in FAT_COMMANDS if counts[n] <= MAX_COMMAND_STATEMENTS)
    assert not thinned, f"remove from FAT_COMMANDS (they fit now): {thinned}"
    lower = {n: counts[n] for n in FAT_COMMANDS if counts[n] < FAT_COMMANDS[n]}
    assert not lower, f"lower FAT_COMMANDS to {lower} (a ratchet)"


def _option_aliases() -> dict[str, ast.expr]:
    """cli/options.py's `Name = Annotated[...]` aliases, by name."""
    return {
        node.targets[0].id: node.value
        for node in tree(CLI / "options.py").body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and ast.unparse(node.value).startswith("Annotated[")
    }


def option_defaults() -> dict[str, dict[str, str]]:
    """{"--seed": {"run": "None", "verify": "0"}, …}: each long option name a command declares,
    inline or through an alias of cli/options.py, with its default as written."""
    aliases = _option_aliases()
    found: dict[str, dict[str, str]] = {}
    for name, fn in command_functions().items():
        a = fn.args
        params = [*a.args, *a.kwonlyargs]
        defaults = [None] * (len(a.args) - len(a.defaults)) + [*a.defaults, *a.kw_defaults]
        for param, default in zip(params, defaults, strict=True):
            note = param.annotation
            if isinstance(note, ast.Name) and note.id in aliases:
                note = aliases[note.id]
            for node in ast.walk(note) if note is not None else []:
                if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("Option"):
                    for arg in node.args:
                        if isinstance(arg, ast.Constant) and str(arg.value).startswith("--"):
                            flag = str(arg.value).split("/")[0]
                            shown = "required" if default is None else ast.unparse(default)
                            found.setdefault(flag, {})[name] = shown
    return found


def test_an_option_has_one_default_across_commands() -> None:
    found = option_defaults()
    assert {"--json", "--seed", "--device", "--t-target"} <= set(found), sorted(found)
    differ = {
        flag: by_command
        for flag, by_command in found.items()
        if len(set(by_command.values())) > 1 and flag not in INTENTIONAL_DEFAULTS
    }
    assert not differ, (
        "options declared with different defaults in different commands (declare the option "
        "once in cli/options.py, or list it in INTENTIONAL_DEFAULTS with the reason):\n"
        + "\n".join(f"{flag}: {by_command}" for flag, by_command in sorted(differ.items()))
    )
    stale = sorted(f for f in INTENTIONAL_DEFAULTS if len(set(found.get(f, {}).values())) < 2)
    assert not stale, f"INTENTIONAL_DEFAULTS lists options whose defaults agree now: {stale}"


# --- unit tests stay pure -------------------------------------------------------------------------


def _unit_test_imports(path: Path) -> list[str]:
    """The modules a unit-test file imports at module level (tests.* helpers followed)."""
    out: list[str] = []
    for stmt, local, type_only in _walk(tree(path)):
        if local or type_only:
            continue
        if isinstance(stmt, ast.Import):
            out += [a.name for a in stmt.names]
        elif stmt.level:  # a helper next to it
            out.append(_resolve_relative(module_name(path), False, stmt.level, stmt.module))
        else:
            out += [f"{stmt.module}.{a.name}" for a in stmt.names] + [stmt.module or ""]
    return out


def _reaches(path: Path, seen: set[Path] | None = None) -> dict[str, list[str]]:
    seen = seen if seen is not None else set()
    seen.add(path)
    reached: dict[str, list[str]] = {}
    for name in _unit_test_imports(path):
        if name.startswith("tests."):
            helper = ROOT / Path(*name.split(".")).with_suffix(".py")
            if helper.exists() and helper not in seen:
                for k, chain in _reaches(helper, seen).items():
                    reached.setdefault(k, [name, *chain])
            continue
        if _top(name) in HEAVY:
            reached.setdefault(_top(name), [_top(name)])
        elif name in modules():
            for k, chain in runtime_closure(name).items():
                reached.setdefault(_top(k), chain)
    return reached


def test_pure_unit_tests_import_no_torch() -> None:
    """tests/README rule: only the tensor tests (tests/unit/tensors/) may import torch."""
    assert TORCH_UNIT_DIR.is_dir()
    found = []
    for path in sorted(UNIT.glob("test_*.py")):
        reached = _reaches(path)
        for heavy in HEAVY:
            if heavy in reached:
                found.append(f"{path.name}: " + " → ".join(reached[heavy]))
    assert not found, "unit tests that import torch/transformers:\n" + "\n".join(found)


# --- (e) startup without torch, in a fresh interpreter --------------------------------------------

MODEL_FREE_COMMANDS = (
    ("roi", "--alpha", "0.6"),
    ("compare", "--help"),
    ("report", "--help"),
    ("simulate", "--help"),
    ("canary", "--help"),
)

# Two fresh interpreters: one imports every module of analysis/ and report/; the other runs each
# command as `python -m specbench …` does, noting after each which heavy packages sys.modules
# holds (so the first command that imports torch is the one named).
_IMPORTS = """
import importlib, json, sys
import specbench.analysis, specbench.report
for name in {pure!r}:
    importlib.import_module(name)
print("STARTUP " + json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""
_COMMANDS = """
import json, runpy, sys
seen = {{}}
for argv in {commands!r}:
    sys.argv = ["specbench", *argv]
    try:
        runpy.run_module("specbench", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit:
        code = exit.code or 0
    seen["specbench " + " ".join(argv)] = [code, sorted(m for m in {heavy!r} if m in sys.modules)]
print("STARTUP " + json.dumps(seen))
"""


def _python(code: str) -> Any:
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "100", "PYTHONPATH": str(ROOT)},
    )
    line = [x for x in proc.stdout.splitlines() if x.startswith("STARTUP ")]
    assert proc.returncode == 0 and line, proc.stderr[-3000:]
    return json.loads(line[-1].removeprefix("STARTUP "))


@pytest.mark.slow  # fresh interpreters: make test, not the fast lane (tests/README.md)
@pytest.mark.subprocess
def test_importing_analysis_and_report_does_not_import_torch() -> None:
    pure = [m for m in modules() if _in(m, PURE_LAYERS)]
    heavy = _python(_IMPORTS.format(pure=pure, heavy=HEAVY))
    assert heavy == [], f"importing every module of analysis/ and report/ imported {heavy}"


@pytest.mark.slow  # fresh interpreters: make test, not the fast lane (tests/README.md)
@pytest.mark.subprocess
def test_model_free_commands_start_without_torch() -> None:
    """`specbench roi/compare/report/simulate` need no model: they run without importing torch."""
    seen = _python(_COMMANDS.format(commands=[list(c) for c in MODEL_FREE_COMMANDS], heavy=HEAVY))
    bad = {
        cmd: f"exit {code}, imported {heavy}"
        for cmd, (code, heavy) in seen.items()
        if code or heavy
    }
    assert not bad, f"model-free commands that failed or imported torch/transformers: {bad}"
