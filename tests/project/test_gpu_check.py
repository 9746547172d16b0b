"""The GPU check (benchmarks/gpu_check.py, scripts/gpu_check.sh, scripts/gpu_wheels.sh) run
on CPU at toy shapes through the same code as on the GPU, so it cannot rot between GPU runs:
the JSON it writes, the trainers it times being training's own, the shapes file it reads
being the paper profile's, and the wheels it carries being the project's pins."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from datetime import datetime
from importlib.metadata import version

import pytest

from benchmarks import gpu_check as gc
from tests.conftest import REPO_ROOT as ROOT


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The check at toy shapes on CPU, in a fresh interpreter with polars, reasoning-gym and
    math-verify replaced by stand-ins (as on the GPU machine, where they are missing)."""
    out = tmp_path_factory.mktemp("gpu_check") / "gpu_check.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_check", "--shapes", "toy", "--device", "cpu",
         "--out", str(out), "--hide", ",".join(gc.STAND_INS)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out.read_text())


def test_dry_run_measures_everything_without_the_stand_in_packages(dry_run: dict) -> None:
    assert dry_run["kind"] == gc.KIND and dry_run["schema"] == gc.SCHEMA
    assert dry_run["complete"] and not dry_run["skipped"]
    assert dry_run["stand_ins"] == list(gc.STAND_INS)
    errors = [r for part in ("training", "sampling", "entropy") for r in dry_run[part]
              if "error" in r]
    assert not errors
    assert datetime.fromisoformat(dry_run["date"]).tzinfo is not None
    assert dry_run["device"]["type"] == "cpu" and dry_run["device"]["peak_bf16_flops"] is None
    for name in ("python", "torch", "transformers", "trl", "peft", "datasets"):
        assert dry_run["versions"][name]
    assert dry_run["shapes"] == gc.toy_shapes().to_json()


def test_dry_run_times_one_optimizer_step_per_method_and_checkpointing(dry_run: dict) -> None:
    shapes = gc.toy_shapes()
    runs = {(r["task"], r["method"], r["checkpointing"]): r for r in dry_run["training"]}
    assert set(runs) == {(c.task, c.method, ck) for c in shapes.training
                         for ck in shapes.checkpointing}
    for (_, method, checkpointing), row in runs.items():
        case = next(c for c in shapes.training if c.method == method)
        # every sequence has exactly the tokens the shapes say, counted from the batches the
        # trainer fed (DPO: chosen and rejected of each pair)
        assert row["tokens_per_sequence"] == case.prompt_tokens + case.completion_tokens
        assert row["sequences_per_step"] == case.settings["batch_size"] * (
            2 if method == "dpo" else 1)
        assert row["tokens_per_step"] == row["sequences_per_step"] * row["tokens_per_sequence"]
        assert row["grad_accumulation"] == 2  # batch 4 over per-device 2: accumulation runs
        assert len(row["all_step_seconds"]) == shapes.warmup_steps + shapes.timed_steps
        assert row["step_seconds"] == row["all_step_seconds"][shapes.warmup_steps:]
        assert row["median_step_s"] == pytest.approx(
            sorted(row["step_seconds"])[len(row["step_seconds"]) // 2]
            if len(row["step_seconds"]) % 2 else sum(row["step_seconds"]) / 2)
        assert row["tokens_per_s"] == pytest.approx(row["tokens_per_step"] / row["median_step_s"])
        assert row["flops_per_token"] == gc.flops_per_token(
            method, checkpointing, dry_run["model"]["matmul_parameters"])
        assert row["mfu"] is None  # no known peak for a CPU


def test_dry_run_samples_scores_and_loads(dry_run: dict) -> None:
    shapes = gc.toy_shapes()
    case = shapes.sampling[0]
    paths = {r["path"]: r for r in dry_run["sampling"]}
    assert set(paths) == {"decoder", "generate"}
    for row in paths.values():
        assert len(row["seconds"]) == shapes.repeats
        # random weights rarely draw the EOS: (nearly) every row runs to the token limit
        rows = case.prompts * case.n
        assert rows * case.max_new_tokens // 2 < row["generated_tokens"] <= (
            rows * case.max_new_tokens)
        assert row["tokens_per_s"] == pytest.approx(row["generated_tokens"] / row["median_s"])
    (entropy,) = dry_run["entropy"]
    e = shapes.entropy[0]
    assert entropy["tokens"] == e.sequences * (e.prompt_tokens + e.completion_tokens)
    loads = dry_run["loads"]
    assert len(loads["base_model"]["seconds"]) == shapes.repeats
    assert loads["adapter"]["save"]["median_s"] > 0 and loads["adapter"]["load"]["median_s"] > 0
    assert loads["adapter"]["lora_r"] == shapes.training[0].settings["lora"]["r"]


def _without_settings(shapes: gc.Shapes) -> dict:
    data = shapes.to_json()
    for case in data["training"]:
        case.pop("settings")
    return data


def test_committed_paper_shapes_are_what_the_profile_and_cost_table_give() -> None:
    """The shapes file against the profile and cost table now; trainer settings compared as
    the trainer configs they make (a setting added with its default changes nothing)."""
    shapes, fresh = gc.load_shapes("paper"), gc.shapes_from_profile("paper")
    stale = ("benchmarks/gpu_check_paper.json is stale: regenerate it with python -m "
             "benchmarks.gpu_check --write-shapes benchmarks/gpu_check_paper.json")
    assert _without_settings(shapes) == _without_settings(fresh), stale
    for committed, now in zip(shapes.training, fresh.training, strict=True):
        for checkpointing in (True, False):
            assert gc.trainer_settings(committed, checkpointing) == gc.trainer_settings(
                now, checkpointing), stale
    assert (shapes.model.hidden, shapes.model.layers, shapes.model.heads,
            shapes.model.kv_heads, shapes.model.intermediate, shapes.model.vocab) == (
        2048, 28, 16, 8, 6144, 151_936)
    assert shapes.dtype == "bfloat16"
    assert {(c.task, c.method) for c in shapes.training} == {
        (t, m) for t in ("chain_sum", "gsm8k") for m in ("dpo", "rrhf", "sft")}
    for case in shapes.training:
        settings = gc.trainer_settings(case, True)
        assert (settings.batch_size, settings.per_device_batch_size, settings.lora_r) == (8, 8, 32)
        assert case.settings["lora"]["target_modules"] == ["q_proj", "k_proj", "v_proj", "o_proj"]
    gsm8k = {c.method: c for c in shapes.training if c.task == "gsm8k"}
    assert (gsm8k["sft"].prompt_tokens, gsm8k["sft"].completion_tokens) == (80, 250)
    assert [(s.slots, s.n) for s in shapes.sampling] == [(64, 8), (64, 8)]


def test_the_dry_runs_settings_are_valid_training_settings() -> None:
    from saturated_dag.config import TrainingSettings

    assert TrainingSettings(**gc.TOY_TRAINING).model_dump(include=set(gc.TOY_TRAINING)) == (
        gc.TOY_TRAINING)


def test_the_checks_settings_build_the_trainer_the_validated_settings_build() -> None:
    """The check builds its trainers from a namespace of the recorded values (no pydantic on
    the GPU machine): the same trainer and LoRA configs as the profile's validated
    ``TrainingSettings`` give, for every case and both checkpointing settings."""
    from saturated_dag.config import TrainingSettings
    from saturated_dag.profiles import load_profile
    from saturated_dag.training.train import lora_config, trainer_config

    profile = load_profile("paper")
    for case in gc.load_shapes("paper").training:
        for checkpointing in (True, False):
            validated = profile.training.model_copy(
                update={"gradient_checkpointing": checkpointing})
            assert isinstance(validated, TrainingSettings)
            built = [(trainer_config(case.method, t, "/nonexistent", "bfloat16").to_dict(),
                      lora_config(t).to_dict())
                     for t in (gc.trainer_settings(case, checkpointing), validated)]
            assert built[0] == built[1], (case.task, case.method, checkpointing)


def test_the_check_trains_with_the_rrhf_groups_training_would_make() -> None:
    """The σ-RRHF trainer gets the check's groups in place of ``_rrhf_groups`` (polars
    cannot travel): through the real function, their rows give the same groups back."""
    import polars as pl

    from saturated_dag.training.train import _rrhf_groups

    case = gc.toy_shapes().training[1]
    assert case.method == "rrhf"
    groups = gc.training_rows(case, 12, 256)
    assert _rrhf_groups(pl.DataFrame(gc.completion_rows(groups))) == groups


def test_stand_ins_import_and_refuse_use() -> None:
    code = ("from benchmarks.gpu_check import install_stand_ins\n"
            "assert install_stand_ins(['polars']) == ['polars']\n"
            "import polars as pl\n"
            "from reasoning_gym.arithmetic.chain_sum import ChainSumConfig\n"
            "assert not isinstance(1, pl.DataFrame)\n"
            "try:\n    pl.col('x')\nexcept RuntimeError as err:\n    print('refused', err)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "refused polars.col is an import-only stand-in" in done.stdout


def test_carried_wheels_are_the_projects_pins() -> None:
    pins = dict(line.split("==") for line in
                (re.sub(r"#.*", "", raw).strip()
                 for raw in (ROOT / "benchmarks" / "gpu_wheels.txt").read_text().splitlines())
                if line)
    assert {"trl", "datasets", "dill", "multiprocess", "transformers", "peft"} <= set(pins)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    exact = dict(re.match(r"([A-Za-z0-9_.-]+)==([^,;\s]+)", d).groups()
                 for d in project if re.match(r"[A-Za-z0-9_.-]+==", d))
    for name, pinned in pins.items():
        if name in exact:
            assert pinned == exact[name], name
        else:  # not pinned exactly there: the version the project's environment resolved
            assert pinned == version(name), name
    assert "transformers" not in exact and pins["transformers"] == version("transformers")


def test_scripts_install_offline_and_check_the_carry_limit() -> None:
    check = (ROOT / "scripts" / "gpu_check.sh").read_text()
    wheels = (ROOT / "scripts" / "gpu_wheels.sh").read_text()
    for script in ("gpu_check.sh", "gpu_wheels.sh"):
        subprocess.run(["bash", "-n", str(ROOT / "scripts" / script)], check=True)
    assert "--no-index" in check and "--shapes paper" in check and "$OUT" in check
    assert "40 * MIB" in wheels and "64 * MIB" in wheels
    assert ".whl/" in (ROOT / ".gitignore").read_text().splitlines()
