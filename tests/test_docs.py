"""The documentation stays true to the code: generated pages are current, links resolve, packages say what they own."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_ROOTS = ("memory", "desktop", "capture", "models")
README_MAX_WORDS = 2500


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_configuration_doc_is_current():
    gen = _load(ROOT / "scripts" / "gen_config_docs.py", "gen_config_docs")
    text, _missing = gen.render()
    current = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert current == text, (
        "docs/configuration.md does not match memory/config.py; "
        "run: .venv/bin/python scripts/gen_config_docs.py (and commit the result)")


def test_bench_results_are_current():
    report = _load(ROOT / "bench" / "report.py", "bench_report")
    current = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    assert current == report.render(), (
        "bench/RESULTS.md does not match bench/results/*.json; "
        "run: .venv/bin/python bench/report.py (and commit the result)")


def test_bench_pages_are_current_and_the_headline_is_short():
    report = _load(ROOT / "bench" / "report.py", "bench_report")
    for name, text in report.render_pages().items():
        page = ROOT / "bench" / "results" / name
        assert page.exists() and page.read_text(encoding="utf-8") == text, (
            f"bench/results/{name} does not match bench/results/*.json; "
            "run: .venv/bin/python bench/report.py (and commit the result)")
    assert not report.stale_pages(), "a bench page whose bench has no record; run: .venv/bin/python bench/report.py"
    rows = report.headline(report.load_records())
    assert 0 < len(rows) <= report.MAX_HEADLINE and all(row["target"] for _, row in rows)
    assert len({row["what"] for _, row in rows}) == len(rows), "one headline row per thing compared"


def test_bench_report_refuses_a_long_headline_or_one_without_a_target(tmp_path):
    report = _load(ROOT / "bench" / "report.py", "bench_report")
    rec = {"bench": "b", "title": "t", "command": "c", "date": "2026-01-01", "machine": "m", "output": {},
           "summary": [{"what": f"w{i}", "headline": f"h{i}", "result": "1", "target": "≤ 2"} for i in range(16)]}
    (tmp_path / "b.json").write_text(json.dumps(rec), encoding="utf-8")
    with pytest.raises(report.RecordError, match="16 headline rows"):
        report.render(tmp_path)
    rec["summary"] = [{"what": "w", "headline": "h", "result": "1", "target": ""}]
    (tmp_path / "b.json").write_text(json.dumps(rec), encoding="utf-8")
    with pytest.raises(report.RecordError, match="has no target"):
        report.render(tmp_path)


def test_every_bench_record_has_its_command_date_and_machine():
    report = _load(ROOT / "bench" / "report.py", "bench_report")
    for rec in report.load_records():
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", rec["date"]), f"{rec['_file']}: date must be YYYY-MM-DD"
        assert rec["command"].strip() and rec["machine"].strip(), f"{rec['_file']}: give the command and machine"
        assert rec["summary"], f"{rec['_file']}: give at least one summary row"


def test_bench_report_names_a_broken_record(tmp_path):
    report = _load(ROOT / "bench" / "report.py", "bench_report")
    (tmp_path / "x.json").write_text('{"bench": "x"}', encoding="utf-8")
    with pytest.raises(report.RecordError, match="x.json: missing"):
        report.render(tmp_path)


def test_readme_is_a_guide_not_a_notebook():
    words = len((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert words <= README_MAX_WORDS, (
        f"README.md has {words} words (at most {README_MAX_WORDS}); move details to docs/ "
        "and figures to bench/results/")


def test_readme_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = text.split("```")[1]
    assert "make run" in first_block and "make test" in first_block


def test_architecture_doc_exists():
    assert (ROOT / "docs" / "architecture.md").is_file(), "docs/architecture.md is the package map; restore it"


def _packages():
    for top in PACKAGE_ROOTS:
        for init in sorted((ROOT / top).rglob("__init__.py")):
            if "__pycache__" not in init.parts:
                yield init


def test_every_package_says_what_it_owns():
    missing = [str(p.relative_to(ROOT)) for p in _packages()
               if not (ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or "").strip()]
    assert not missing, f"these packages have no docstring in __init__.py (say what the package owns): {missing}"


_LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _doc_files():
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "bench" / "RESULTS.md",
            *sorted((ROOT / "bench" / "results").glob("*.md")), *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", _doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_files_that_exist(doc):
    broken = []
    text = doc.read_text(encoding="utf-8")
    for target in _LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor in the same page
        path = target.split("#", 1)[0]
        if not (doc.parent / path).exists():
            broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)} links to files that do not exist: {broken}"


def test_cli_reference_lists_every_command():
    gen = _load(ROOT / "scripts" / "gen_config_docs.py", "gen_config_docs")
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    missing = [" ".join(path) for path, _ in gen.cli_commands() if f"### `{' '.join(path)}`" not in text]
    assert not missing, (
        f"docs/cli.md has no section for {missing}; run: .venv/bin/python scripts/gen_config_docs.py --cli")


def test_every_bundled_data_file_is_named_in_models_doc():
    """docs/models.md names every weight and data file a package ships, with what it was trained on."""
    listed = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    shipped = [p for top in ("memory", "models", "capture", "desktop") for p in (ROOT / top).rglob("data/*")
               if p.is_file() and "__pycache__" not in p.parts]
    assert shipped
    missing = [str(p.relative_to(ROOT)) for p in shipped if str(p.relative_to(ROOT)) not in listed]
    assert not missing, f"add these to docs/models.md (source, licence, training data): {missing}"
