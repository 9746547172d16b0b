"""The demo results in docs/results.md come from the run's own table files
(scripts/readme_results.py), and the snapshots live there, not in README."""

import importlib.util
from pathlib import Path

import polars as pl
import pytest

from saturated_dag.infra.atomic import atomic_write_parquet
from saturated_dag.profiles import load_profile
from tests.conftest import REPO_ROOT as ROOT
from tests.scoring_data import eval_report


def _module(name: str = "readme_results"):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _eval_reports(out: Path) -> None:
    """A base report and one adapter report, 4 questions x 8 samples: Δ pass@1 = +25 points
    on every question (2 more of 8 right), so the interval is [+25, +25]."""
    base = eval_report({f"q{i}": (8, 2 * i) for i in range(4)}, cell="3x1")
    run = eval_report({f"q{i}": (8, 2 * i + 2) for i in range(4)}, cell="3x1")
    (out / "assets" / "chain_sum" / "eval").mkdir(parents=True)
    (out / "assets" / "chain_sum" / "saturated" / "eval").mkdir(parents=True)
    atomic_write_parquet(base, out / "assets" / "chain_sum" / "eval" / "base.parquet")
    atomic_write_parquet(run, out / "assets" / "chain_sum" / "saturated" / "eval" / "sft.parquet")


def test_results_block_is_replaced_from_the_table_files_and_names_the_rules(tmp_path):
    mod = _module()
    _eval_reports(tmp_path)
    (tmp_path / "chain_sum").mkdir()
    (tmp_path / "chain_sum" / "results_table.md").write_text("eval set: X\n\n| a |\n|---|\n| 1 |\n")
    doc = tmp_path / "results.md"
    doc.write_text(f"intro\n{mod.START}\nold numbers\n{mod.END}\nrest\n")
    with pytest.raises(SystemExit, match=r"run_record\.json is missing"):  # origin unknown
        mod.main(["--profile", "demo", "--output-dir", str(tmp_path), "--results-doc", str(doc)])
    _module("run_record").record(tmp_path, "demo", "demo", 123.4)
    mod.main(["--profile", "demo", "--output-dir", str(tmp_path), "--results-doc", str(doc)])
    text = doc.read_text()
    assert "Snapshot of `bash scripts/run_demo.sh` at commit " in text and "123.4 s" in text
    assert "old numbers" not in text and "| 1 |" in text and text.endswith("rest\n")
    assert "dpo_distinct_texts: true" in text and "answer_check: math_verify" in text
    once = text
    # --readme is the option's old name: same file, same result
    mod.main(["--profile", "demo", "--output-dir", str(tmp_path), "--readme", str(doc)])
    assert doc.read_text() == once  # same tables, same page


def test_the_snapshots_live_in_docs_results_and_the_scripts_target_it():
    """README is the short guide: both generated blocks are in docs/results.md, which both
    refresh commands write by default, and README holds neither."""
    demo, study = _module(), _module("study_report")
    assert demo.RESULTS_DOC == study.RESULTS_DOC == ROOT / "docs" / "results.md"
    results = demo.RESULTS_DOC.read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for mod in (demo, study):
        assert results.count(mod.START) == results.count(mod.END) == 1
        assert mod.START not in readme and mod.END not in readme


def test_the_run_record_names_commit_machine_and_changes(tmp_path):
    record = _module("run_record")
    data = record.record(tmp_path, "demo", "demo", 10)
    assert len(data["commit"]) == 40 and "cores)" in data["machine"]
    line = record.describe(tmp_path, "bash scripts/run_demo.sh")
    assert data["commit"][:7] in line and "10 s" in line
    assert ("uncommitted changes" in line) == data["uncommitted_changes"]


def test_the_run_scripts_never_rewrite_a_tracked_file():
    """README's first command (and the study's) leave the clone clean: the refresh of the
    snapshots in docs/results.md is a separate command, not a step of the run scripts."""
    for script in ("run_demo.sh", "run_study.sh"):
        text = (ROOT / "scripts" / script).read_text()
        commands = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
        assert not any(word in line
                       for word in ("readme_results", "README", "--readme", "--results-doc",
                                    "results.md")
                       for line in commands), script


def test_paper_rules_are_named_as_the_papers():
    rules = _module().rules(load_profile("paper"))
    assert "y_l = argmin" in rules and "(the paper's rule)" in rules


def test_missing_tables_or_markers_are_clear_errors(tmp_path):
    mod = _module()
    doc = tmp_path / "results.md"
    doc.write_text("no markers\n")
    with pytest.raises(SystemExit, match="no result tables"):
        mod.main(["--output-dir", str(tmp_path), "--results-doc", str(doc)])
    (tmp_path / "chain_sum").mkdir()
    (tmp_path / "chain_sum" / "results_table.md").write_text("| a |\n")
    _module("run_record").record(tmp_path, "demo", "demo", 1)
    with pytest.raises(SystemExit, match=r"results\.md has no <!-- demo-results:start -->"):
        mod.main(["--output-dir", str(tmp_path), "--results-doc", str(doc)])


def test_delta_pairs_each_question_with_its_base_whatever_the_row_order(tmp_path):
    """A report stored in another row order gives the same Δ and interval (rows are paired
    by question id); a sample listed twice is refused."""
    delta = _module("delta_intervals")
    _eval_reports(tmp_path)
    run_file = tmp_path / "assets" / "chain_sum" / "saturated" / "eval" / "sft.parquet"
    before = delta.delta_rows(tmp_path, "chain_sum")
    atomic_write_parquet(pl.read_parquet(run_file).reverse(), run_file)
    assert delta.delta_rows(tmp_path, "chain_sum") == before == (
        4, [("saturated/sft", 25.0, 25.0, 25.0)])
    # one question much better: the interval now has width, and still pairs correctly
    atomic_write_parquet(pl.read_parquet(run_file).with_columns(
        correct=pl.when(pl.col("question_id") == "q0").then(True).otherwise(pl.col("correct"))
    ), run_file)
    (_, [(_, d, low, high)]) = delta.delta_rows(tmp_path, "chain_sum")
    assert d == pytest.approx(100 * (8 / 8 + 3 * 2 / 8) / 4) and low < d < high
    twice = pl.read_parquet(run_file)
    atomic_write_parquet(pl.concat([twice, twice.head(1)]), run_file)
    with pytest.raises(SystemExit, match="lists a sample of a question more than once"):
        delta.delta_rows(tmp_path, "chain_sum")
