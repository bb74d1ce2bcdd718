"""JUnit XML for CI systems: one test case per precision x target x threshold (pure)."""

from __future__ import annotations

from typing import Sequence
from xml.etree import ElementTree as ET

from edgebench.judge.gate import Check, Verdict
from edgebench.rows import Document, InferenceRow


def render_junit(verdict: Verdict, failed_rows: Sequence[InferenceRow] = (), suite: str = "edgebench") -> str:
    """JUnit XML: one testcase per check (classname = suite.precision.target, name = metric) and
    one ``<error>`` case per row whose target failed."""
    cases = list(verdict.checks)
    root = ET.Element("testsuites")
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases) + len(failed_rows)),
                       failures=str(len(verdict.failures)), errors=str(len(failed_rows)), skipped="0")
    for c in cases:
        tc = ET.SubElement(ts, "testcase", classname=f"{suite}.{c.precision}.{c.target}", name=c.metric)
        if not c.passed:
            f = ET.SubElement(tc, "failure", message=c.message, type="threshold")
            f.text = c.message
    for r in failed_rows:
        tc = ET.SubElement(ts, "testcase", classname=f"{suite}.{r.precision}.{r.target}", name="run")
        e = ET.SubElement(tc, "error", message=str(r.error), type="infrastructure")
        e.text = str(r.error)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def render_document_junit(doc: Document) -> str:
    """A compare document's gate checks and failed rows as JUnit XML."""
    gate = doc.gate_result
    checks = tuple(Check(c.precision or "?", c.target or "?", c.metric or "?", c.value, c.threshold, c.passed, c.message)
                   for c in (gate.checks if gate is not None else ()))
    failed = [r for r in doc.rows if isinstance(r, InferenceRow) and not r.ok]
    return render_junit(Verdict(checks), failed, suite=f"edgebench.{doc.model or 'run'}")
