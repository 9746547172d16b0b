"""Issue 9 acceptance: a full disk or a read-only output folder part-way through a run.

After one good materialisation of the generation pool, a second one runs where writes fail:

* a file-size limit (``RLIMIT_FSIZE``, in a child process, SIGXFSZ ignored so a write raises
  EFBIG as a full disk raises ENOSPC), once as a cache hit (only the asset's Parquet write
  fails) and once with a new seed (a shard write fails part-way through the stage);
* a read-only output folder (``chmod`` when not root; root ignores permissions, so there the
  failing ``mkstemp`` is simulated with the same EACCES error).

Each time the previous Parquet file is byte-identical, no temporary file is left, no partial
shard exists, and the run's error names the path and the cause.
"""

import errno
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

TINY = {
    "chain_sum": {"grid": {"terms": [2, 3], "digits": [1, 1]}, "questions_per_cell": 2,
                  "strict_grid": {"terms": [2, 2], "digits": [1, 1]},
                  "strict_questions_per_cell": 2},
    "sampling": {"n": 3, "max_new_tokens": 8},
    "stages": {"shard_questions": 2},
}

MATERIALISE = """
import json, sys
from pathlib import Path
import dagster as dg
from tests.pipeline import by_name, graph, resources


def materialise(out, model, overrides):
    overrides = {**overrides, "policy": {"model": model, "batch_size": 8}}
    pool = by_name(graph("demo", overrides)[0], "chain_sum", "generation_pool")
    return dg.materialize(pool, resources=resources(Path(out) / "out", "demo", overrides),
                          raise_on_error=False)


def failure_text(result):
    failure = next((e for e in result.all_events if e.is_step_failure), None)
    return None if failure is None else failure.step_failure_data.error.to_string()
"""

CHILD = MATERIALISE + """
import resource, signal
out, model, overrides, limit = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
import torch, transformers, pyarrow.parquet  # noqa: import before the limit
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
hit = materialise(out, model, overrides)
new_seed = {**overrides, "sampling": {**overrides["sampling"], "seed": 1}}
miss = materialise(out, model, new_seed)
print("RESULT" + json.dumps({"hit": [hit.success, failure_text(hit)],
                             "miss": [miss.success, failure_text(miss)]}))
"""


def _namespace() -> dict:
    scope: dict = {}
    exec(compile(MATERIALISE, "materialise", "exec"), scope)  # the child's exact helpers
    return scope


@pytest.fixture()
def first(tmp_path: Path, tiny_model_dir: Path) -> tuple[Path, bytes]:
    """One good materialisation; returns (pool path, its bytes)."""
    result = _namespace()["materialise"](str(tmp_path), str(tiny_model_dir), TINY)
    assert result.success
    path = tmp_path / "out" / "assets" / "chain_sum" / "generation_pool.parquet"
    return path, path.read_bytes()


def _no_temporaries(root: Path) -> None:
    assert not [p for p in root.rglob("*.tmp")], list(root.rglob("*.tmp"))


def test_full_disk_keeps_previous_pool_and_says_why(tmp_path: Path, tiny_model_dir: Path,
                                                    first: tuple[Path, bytes]) -> None:
    path, before = first
    limit = 1024
    assert len(before) > limit
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), str(tiny_model_dir), json.dumps(TINY),
         str(limit)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    line = next((x for x in child.stdout.splitlines() if x.startswith("RESULT")), None)
    assert line, child.stdout[-3000:] + child.stderr[-3000:]
    report = json.loads(line[len("RESULT"):])

    ok, error = report["hit"]  # every shard reused: only the asset's own write fails
    assert not ok and error
    assert f"could not write {path}" in error and "file size limit" in error, error
    ok, error = report["miss"]  # a new seed: the first shard write fails part-way
    assert not ok and error
    assert "could not write" in error and "shard-00000.parquet" in error, error
    assert "EFBIG" in error and "left intact" in error
    assert error.splitlines()[0].startswith("dagster._core.definitions.events.Failure: could not")

    assert path.read_bytes() == before
    _no_temporaries(tmp_path)
    stage = tmp_path / "out" / "stages" / "chain_sum__generation_pool"
    keys = [d for d in stage.iterdir() if d.is_dir()]
    assert len(keys) == 2  # the good run's shards and the failed run's empty folder
    for key in keys:
        for shard in key.glob("shard-*.parquet"):
            import pyarrow.parquet as pq

            assert pq.ParquetFile(shard).metadata.num_rows > 0  # whole, never truncated


def test_read_only_output_dir_keeps_previous_pool(tmp_path: Path, tiny_model_dir: Path,
                                                  first: tuple[Path, bytes],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path, before = first
    folder = path.parent
    if os.geteuid() == 0:  # root writes anywhere: fail the temporary file as chmod would
        real = tempfile.mkstemp

        def read_only(*args, dir=None, **kwargs):
            if dir is not None and Path(dir).resolve() == folder.resolve():
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(dir))
            return real(*args, dir=dir, **kwargs)

        monkeypatch.setattr(tempfile, "mkstemp", read_only)
    else:
        folder.chmod(0o555)
    try:
        result = _namespace()["materialise"](str(tmp_path), str(tiny_model_dir), TINY)
    finally:
        folder.chmod(0o755)
    assert not result.success
    error = next(e for e in result.all_events if e.is_step_failure
                 ).step_failure_data.error.to_string()
    assert f"could not write {path}" in error and "not writable" in error, error
    assert path.read_bytes() == before
    _no_temporaries(tmp_path)
