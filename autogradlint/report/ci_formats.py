"""CI outputs: GitHub workflow annotations and JUnit XML, naming files as the text report does
(relative to the current directory: the repository's root in a CI job)."""

from __future__ import annotations

from dataclasses import replace
from xml.etree import ElementTree as ET

from ..model import FileError, FileResult, printable
from .paths import relative, relative_in


def _escape_data(text: str) -> str:
    return printable(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(results: list[FileResult], errors: list[FileError]) -> str:
    """`::error file=...,line=...::message` lines, as GitHub Actions turns into annotations."""
    lines = []
    for result in results:
        for f in result.findings:
            level = "error" if f.severity == "error" else "warning"
            props = (
                f"file={_escape_property(relative(f.path))},line={f.line},col={f.col + 1},"
                f"endLine={f.end_line},endColumn={f.end_col + 1},"
                f"title={_escape_property(f'{f.rule_id} {f.name}')}"
            )
            text = f"{f.rule_id} {f.message}" + (f"\nhelp: {relative_in(f.help)}" if f.help else "")
            lines.append(f"::{level} {props}::{_escape_data(text)}")
    for error in errors:
        line = f",line={error.line}" if error.line else ""
        lines.append(
            f"::error file={_escape_property(relative(error.path))}{line}::"
            f"{_escape_data(error.message)}"
        )
    return "\n".join(lines)


def render_junit(results: list[FileResult], errors: list[FileError]) -> str:
    """One testsuite; a testcase per checked file, with a failure per finding."""
    suite = ET.Element("testsuite", name="autogradlint")
    failures = 0
    for result in results:
        # XML 1.0 cannot hold control characters or the undecodable bytes of a file name.
        name = printable(relative(result.path))
        case = ET.SubElement(suite, "testcase", name=name, classname="autogradlint")
        for f in result.findings:
            failures += 1
            failure = ET.SubElement(
                case, "failure", message=printable(f"{f.rule_id} {f.message}"), type=f.rule_id
            )
            failure.text = f"{name}:{f.line}:{f.col + 1}: {f.rule_id} {printable(f.message)}"
            if f.help:
                failure.text += f"\nhelp: {printable(relative_in(f.help))}"
    for error in errors:
        case = ET.SubElement(
            suite, "testcase", name=printable(relative(error.path)), classname="autogradlint"
        )
        message = printable(error.message)
        shown = replace(error, path=relative(error.path))
        ET.SubElement(case, "error", message=message).text = shown.describe()
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(failures))
    suite.set("errors", str(len(errors)))
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)
