"""A run comparison as JUnit XML for CI test reports (`specbench compare --junit FILE`): one
suite per workload × temperature, one test case per row."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter

from specbench.analysis.compare.metrics import (
    INCONCLUSIVE,
    INFORMATIONAL,
    NOT_COMPARABLE,
    REGRESSED,
)
from specbench.analysis.compare.verdict import Comparison
from specbench.report.compare.compare import (
    fmt_change,
    fmt_p,
    fmt_value,
    group_label,
    row_note,
    status_text,
    thresholds_line,
)


def to_junit(c: Comparison) -> str:
    """JUnit XML: one suite per workload × temperature, one test case per metric; gating
    regressions are failures; inconclusive, not-comparable and informational rows are
    skipped."""
    root = ET.Element("testsuites", name="specbench compare")
    suites: dict[str, ET.Element] = {}
    totals: Counter[tuple[str, str]] = Counter()
    for r in c.rows:
        name = group_label(r)
        suite = suites.get(name)
        if suite is None:
            suite = ET.SubElement(root, "testsuite", name=name)
            suites[name] = suite
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"specbench.compare.{r.workload}.T{r.temperature:g}",
            name=r.label,
        )
        summary = (
            f"{r.label}: {fmt_value(r, r.base)} → {fmt_value(r, r.new)} ({fmt_change(r)}, "
            f"p={fmt_p(r.p_value)}) {status_text(r)}" + (f"; {row_note(r)}" if row_note(r) else "")
        )
        totals[(name, "tests")] += 1
        if r.status == REGRESSED and r.gating:
            fail = ET.SubElement(case, "failure", message=summary, type="regression")
            fail.text = f"{r.method}\n{thresholds_line(c)}"
            totals[(name, "failures")] += 1
        elif r.status in (NOT_COMPARABLE, INFORMATIONAL, INCONCLUSIVE):
            ET.SubElement(case, "skipped", message=summary)
            totals[(name, "skipped")] += 1
        else:
            ET.SubElement(case, "system-out").text = summary
    if c.failures:
        suite = ET.SubElement(root, "testsuite", name="failed or missing")
        suites["failed or missing"] = suite
        for f in c.failures:
            case = ET.SubElement(suite, "testcase", classname="specbench.compare.missing", name=f)
            totals[("failed or missing", "tests")] += 1
            if c.strict:
                ET.SubElement(case, "failure", message=f, type="failed or missing")
                totals[("failed or missing", "failures")] += 1
            else:
                ET.SubElement(case, "skipped", message=f)
                totals[("failed or missing", "skipped")] += 1
    for name, suite in suites.items():
        for k in ("tests", "failures", "skipped"):
            suite.set(k, str(totals[(name, k)]))
        suite.set("errors", "0")
    root.set("tests", str(sum(totals[(n, "tests")] for n in suites)))
    root.set("failures", str(sum(totals[(n, "failures")] for n in suites)))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
