"""Resumable, cached stages: completed shards on disk, keyed by what the stage computes from.

Why: a generation or judging stage on the paper profile runs for hours. Each stage splits its
work (questions, or question groups) into fixed shards and writes every finished shard
atomically under ``<output_dir>/stages/<stage>/<key>/``, where ``key`` (``stage_key``) hashes
the stage name, its code version, the settings that change its output (sampling, model
fingerprint, shard size) and the content of its inputs. A re-run computes only the missing
shards (none when nothing changed: a cache hit); any changed input, setting or code version
gives a new key, so a stale shard is never reused.

Determinism: a shard's samples depend only on its own questions and a seed derived from
(sampling seed, shard index) (``shard_seed``), so a resumed run equals an uninterrupted one on
the transformers backend (each row has its own seeded stream, ``generation.base.row_seed``) and
vLLM on a GPU; vLLM's CPU build crashes on per-request seeds and seeds its engine once, so there
a resumed run draws different, equally valid samples for the recomputed shards.

Other stages (training) use the same key and a completed-folder marker: ``stage_dir``,
``is_complete`` and ``mark_complete``. Shards are polars DataFrames stored as Parquet; a shard
computed now and one read back are the same frame (``_roundtrip``).
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from saturated_dag.infra.atomic import atomic_write_parquet, atomic_write_text
from saturated_dag.infra.log import LogFn

T = TypeVar("T")

COMPLETE_MARKER = "COMPLETE.json"
MANIFEST = "manifest.json"


# --- keys ----------------------------------------------------------------------------------

def _is_pandas_table(value: Any) -> bool:
    """A pandas DataFrame or Series, recognised without importing pandas."""
    kind = type(value)
    return kind.__module__.startswith("pandas") and kind.__name__ in ("DataFrame", "Series")


def _canonical(value: Any) -> Any:
    """JSON-able form with a stable order; frames and question lists become digests.

    A pandas frame (or a lazy polars one) is refused rather than passed to ``default=str``,
    whose truncated repr would make a key blind to most of the frame's cells.
    """
    if isinstance(value, pl.DataFrame):
        return {"frame": frame_digest(value)}
    if isinstance(value, pl.Series):
        return {"series": frame_digest(value.to_frame())}
    if isinstance(value, pl.LazyFrame) or _is_pandas_table(value):
        raise TypeError(f"cannot hash a {type(value).__module__}.{type(value).__name__} into a "
                        "cache key: pass a polars DataFrame (pl.from_pandas / LazyFrame.collect)")
    if is_dataclass(value) and not isinstance(value, type):
        return _canonical(asdict(value))
    if hasattr(value, "model_dump"):
        return _canonical(value.model_dump(mode="json"))
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and value != value:  # NaN
        return "NaN"
    return value


def digest(value: Any) -> str:
    """sha256 of the canonical JSON of ``value``."""
    text = json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_DIGEST_ROWS = 65_536
"""Rows per slice when a column is hashed: bounds the memory of one JSON text."""


def readable_digest(digest: str, group: int = 16) -> str:
    """A hex digest in groups of ``group`` digits separated by spaces (``0a65 …``), as a page
    shows it: a browser breaks a line only at a space, and 64 digits in one word are wider
    than the UI's metadata panel. ``digest_of`` reads it back."""
    return " ".join(digest[i:i + group] for i in range(0, len(digest), group))


def digest_of(text: str) -> str:
    """The digest a ``readable_digest`` shows (its groups joined); a plain digest unchanged."""
    return text.replace(" ", "")


def frame_digest(frame: pl.DataFrame) -> str:
    """Content hash of a polars DataFrame: column names, dtypes, height and every value.

    Why not ``DataFrame.hash_rows``: polars keeps its hashes stable only within one version,
    and a digest that moved with a polars upgrade would turn every cached stage into a miss
    (every adapter retrains). Each column's values are hashed through their Python form as
    JSON (integers exactly, floats by their shortest round-trip repr, NaN as ``NaN``, null as
    ``null``), so the digest depends on content only: not on chunking, memory layout or
    process, and a change to any cell changes it.
    """
    if not isinstance(frame, pl.DataFrame):
        raise TypeError(f"frame_digest needs a polars DataFrame, got {type(frame).__name__}")
    h = hashlib.sha256()
    h.update(json.dumps({"columns": [[name, str(dtype)] for name, dtype in frame.schema.items()],
                         "rows": frame.height}).encode())
    for series in frame.get_columns():
        for start in range(0, frame.height, _DIGEST_ROWS):
            values = series.slice(start, _DIGEST_ROWS).to_list()
            h.update(json.dumps(values, separators=(",", ":"), default=str).encode())
    return h.hexdigest()


def questions_digest(questions: Iterable[Any]) -> str:
    """Hash of a question list: ids, prompts, golds and metadata, in order."""
    return digest([asdict(q) if is_dataclass(q) else q for q in questions])


def stage_key(stage: str, code_version: str, config: Mapping[str, Any],
              inputs: Mapping[str, Any]) -> str:
    """The cache key of one stage run: a change to any argument changes the key.

    ``config`` holds the settings that change the output (sampling, model fingerprint, shard
    size, judge, ...); ``inputs`` the stage's data (polars DataFrames are hashed by content,
    ``frame_digest``).
    """
    return digest({"stage": stage, "code_version": code_version, "config": config,
                   "inputs": inputs})


_FINGERPRINTS: dict[tuple[str, int, int], str] = {}


def file_fingerprint(location: Path) -> str:
    """sha256[:16] over the file names and bytes of a model file or folder (top level).

    The same value as ``base_model``'s data version; memoised per (path, size, mtime) so
    several stages of one process hash multi-gigabyte weights once.
    """
    files = [location] if location.is_file() else sorted(p for p in location.iterdir()
                                                         if p.is_file())
    stamp = [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    memo = (str(location), hash(tuple(stamp)), len(stamp))
    if memo in _FINGERPRINTS:
        return _FINGERPRINTS[memo]
    h = hashlib.sha256()
    for path in files:
        h.update(path.name.encode())
        with path.open("rb") as handle:
            for block in iter(lambda f=handle: f.read(1 << 20), b""):
                h.update(block)
    _FINGERPRINTS[memo] = h.hexdigest()[:16]
    return _FINGERPRINTS[memo]


def shard_seed(seed: int, index: int) -> int:
    """The sampling seed of shard ``index``: independent of every other shard."""
    raw = hashlib.sha256(f"{seed}:{index}".encode()).digest()
    return int.from_bytes(raw[:4], "little") & 0x7FFFFFFF


# --- completed folders (training and other single-output stages) ------------------------------

def stage_dir(output_dir: str | Path, stage: str, key: str) -> Path:
    """``<output_dir>/stages/<stage>/<key>``: where a stage's shards or products live."""
    return Path(output_dir) / "stages" / stage / key


def is_complete(folder: Path) -> bool:
    """True when ``mark_complete`` ran on ``folder`` (its products are whole)."""
    return (folder / COMPLETE_MARKER).is_file()


def mark_complete(folder: Path, info: Mapping[str, Any] | None = None) -> None:
    """Write the completion marker last, atomically: until then the folder is a cache miss."""
    atomic_write_text(folder / COMPLETE_MARKER,
                      json.dumps({"completed_at": time.time(), **(info or {})}, default=str))


# --- shards --------------------------------------------------------------------------------

@dataclass
class ShardStats:
    """How a sharded stage ran: ``cache`` is hit (nothing computed), miss or resumed."""

    key: str
    shards_total: int = 0
    shards_reused: int = 0
    shards_computed: int = 0

    @property
    def cache(self) -> str:
        if self.shards_total and self.shards_reused == self.shards_total:
            return "hit"
        return "resumed" if self.shards_reused else "miss"

    def metadata(self) -> dict[str, Any]:
        return {"cache": self.cache, "cache_key": self.key, "shards_total": self.shards_total,
                "shards_reused": self.shards_reused, "shards_computed": self.shards_computed}

    def computed_elsewhere(self, shards: int) -> None:
        """Count ``shards`` that another pass of this run computed (and this one read back)
        as computed, so a report's cache metadata says what its run did."""
        moved = min(shards, self.shards_reused)
        self.shards_reused -= moved
        self.shards_computed += moved

    def message(self, stage: str) -> str:
        if self.cache == "hit":
            return f"cache hit: {stage} {self.key[:12]} reused {self.shards_reused} shards"
        return (f"cache {self.cache}: {stage} {self.key[:12]} reused {self.shards_reused}, "
                f"computed {self.shards_computed} of {self.shards_total} shards")


def _roundtrip(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame as a stored shard reads back, so fresh and reused shards match exactly."""
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    buffer.seek(0)
    return pl.read_parquet(buffer)


def _checked(frame: Any, index: int) -> pl.DataFrame:
    """``compute``'s result, refused with a clear message unless it is a polars DataFrame."""
    if not isinstance(frame, pl.DataFrame):
        raise TypeError(f"shard {index}: compute returned a {type(frame).__module__}."
                        f"{type(frame).__name__}; shards are polars DataFrames")
    return frame


def plan_shards(count: int, shard_size: int | None) -> list[range]:
    """Fixed index ranges of ``count`` items; ``None`` or 0: one shard of everything."""
    if count == 0:
        return []
    size = shard_size if shard_size and shard_size > 0 else count
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


class ShardStore:
    """Completed shards of one stage run under ``root`` (``stage_dir(..., key)``)."""

    def __init__(self, root: Path | str, key: str | None = None):
        self.root = Path(root)
        self.key = key or self.root.name
        self.last_stats: ShardStats | None = None

    @classmethod
    def for_stage(cls, output_dir: str | Path, stage: str, key: str) -> ShardStore:
        return cls(stage_dir(output_dir, stage, key), key)

    def shard_path(self, index: int) -> Path:
        return self.root / f"shard-{index:05d}.parquet"

    def has(self, index: int, log: LogFn | None = None) -> bool:
        """A whole shard, as its stage wrote it, is present. A damaged one (unreadable footer)
        is removed; so is one whose bytes do not hash to what the manifest recorded when it
        was written (edited, or written by a version that recorded no hash), saying so with
        its path: a reused shard is recorded as this stage's work, so it must be that work."""
        path = self.shard_path(index)
        if not path.is_file():
            return False
        try:
            import pyarrow.parquet as pq

            pq.ParquetFile(path).metadata  # noqa: B018 - reads and checks the footer
        except Exception:
            path.unlink(missing_ok=True)
            return False
        recorded = self._manifest().get("hashes", {}).get(str(index))
        if recorded is None or file_fingerprint(path) != recorded:
            why = ("does not match the hash its stage recorded" if recorded else
                   "has no recorded hash")
            (log or (lambda _m: None))(f"shard {path} {why}; computing it again")
            path.unlink(missing_ok=True)
            return False
        return True

    def load(self, index: int) -> pl.DataFrame:
        return pl.read_parquet(self.shard_path(index))

    def save(self, index: int, frame: pl.DataFrame) -> None:
        """Write the shard, then record its hash in the manifest (a shard without one is
        not reused: a crash between the two costs one shard, never a wrong one)."""
        path = atomic_write_parquet(frame, self.shard_path(index))
        manifest = self._manifest()
        manifest.setdefault("hashes", {})[str(index)] = file_fingerprint(path)
        atomic_write_text(self.root / MANIFEST, json.dumps(manifest, sort_keys=True))

    def _manifest(self) -> dict[str, Any]:
        try:
            found = json.loads((self.root / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def completed(self) -> list[int]:
        """Indices of shard files present (whole or not)."""
        return sorted(int(p.stem.split("-")[1]) for p in self.root.glob("shard-*.parquet"))

    def _check_manifest(self, plan: dict[str, Any], say: LogFn) -> None:
        """Record the shard plan; a different plan under the same key drops the old shards."""
        path = self.root / MANIFEST
        if path.is_file():
            old = self._manifest()
            if {k: v for k, v in old.items() if k != "hashes"} == plan:
                return
            say(f"shard plan under {self.root} changed; discarding its old shards")
            for index in self.completed():
                self.shard_path(index).unlink(missing_ok=True)
        atomic_write_text(path, json.dumps(plan, sort_keys=True))

    def prepare(self, items: int, shard_size: int | None, log: LogFn | None = None
                ) -> list[range]:
        """The shard plan of ``items`` items, recorded as ``run_shards`` records it, so shards
        written by another pass (``evaluation.sample_shards_together``) are reused by it."""
        plan = plan_shards(items, shard_size)
        if plan:
            self.root.mkdir(parents=True, exist_ok=True)
            self._check_manifest({"items": items, "shard_size": len(plan[0]),
                                  "shards": len(plan), "key": self.key}, log or (lambda _m: None))
        return plan

    def cleanup_temporaries(self) -> None:
        """Remove leftovers of writes that a crash interrupted (never read as shards)."""
        for tmp in self.root.glob(".*.tmp"):
            tmp.unlink(missing_ok=True)

    def run(self, items: Sequence[T], shard_size: int | None,
            compute: Callable[[int, Sequence[T]], pl.DataFrame],
            log: LogFn | None = None) -> tuple[pl.DataFrame, ShardStats]:
        return run_shards(self, items, shard_size, compute, log)


def run_shards(store: ShardStore | None, items: Sequence[T], shard_size: int | None,
               compute: Callable[[int, Sequence[T]], pl.DataFrame],
               log: LogFn | None = None) -> tuple[pl.DataFrame, ShardStats]:
    """``compute(shard index, shard items)`` for every shard not already stored; the
    concatenation of all shards in order. Without a store nothing is persisted, but the plan
    (and so the result) is the same.

    Every shard has the same columns; a shard in which a column is all null may carry the
    ``Null`` dtype, so the concatenation relaxes each column to the shards' common type."""
    say = log or (lambda _m: None)
    plan = plan_shards(len(items), shard_size)
    stats = ShardStats(store.key if store else "", shards_total=len(plan))
    if not plan:
        frame = _checked(compute(0, []), 0)
        if store is not None:
            store.last_stats = stats
        return frame, stats
    if store is not None:
        store.prepare(len(items), shard_size, say)
    frames = []
    for index, span in enumerate(plan):
        if store is not None and store.has(index, say):
            frames.append(store.load(index))
            stats.shards_reused += 1
            continue
        if len(plan) > 1:
            say(f"shard {index + 1}/{len(plan)}: {len(span)} items")
        frame = _checked(compute(index, [items[i] for i in span]), index)
        if store is not None:
            store.save(index, frame)
            frames.append(store.load(index))
        else:
            frames.append(_roundtrip(frame))
        stats.shards_computed += 1
    if store is not None:
        store.cleanup_temporaries()
        store.last_stats = stats
    result = pl.concat(frames, how="vertical_relaxed") if len(frames) > 1 else frames[0]
    return result, stats

