"""reasoning-gym ``chain_sum`` as a grid of (terms, digits) points, as in the paper's Table 6.

Each grid point of each pool draws from its own seed. reasoning-gym's item ``i`` under seed
``s`` is item ``i-1`` under seed ``s+1`` (it seeds ``Random(s + i)``), so seeds are spaced
``SEED_SPACING`` apart: pools never share an item index as long as a grid point draws fewer
items than that. Small grid points repeat expressions by chance, so each pool is
de-duplicated and the eval set additionally skips every expression present in a training pool.

The paper's own eval set (``hannoh/chainsum_eval``) is a fixed file instead: ``load_eval_set``
reads it from the hub, a ``datasets`` folder or a JSONL file, and the training and validation
pools then skip its expressions.
"""

from __future__ import annotations

import functools
import json
import os
import re
import socket
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from saturated_dag.tasks.base import DatasetFormatError, Question, jsonl_rows
from saturated_dag.tasks.prompts import chain_sum_problem, policy_prompt

TASK = "chain_sum"
SEED_SPACING = 1_000_000
DRAW_SPACING = 100_000 * SEED_SPACING
"""Between two data seeds' base seeds (``Profile.data_seeds``): item i under seed s is item
i - 1 under seed s + 1 (``../shared/FACTS.md``), so data seed d = base seed + 1 would draw
data seed 0's questions shifted by one item (201 of the study's 208 were shared). Above
every (pool, grid point) slot of ``point_seed`` times its spacing, so no two draws' item ranges
overlap."""
POOL_INDEX = {"D": 0, "D_prime": 1, "eval": 2, "validation": 3}

GridPoint = tuple[int, int]
"""One point of the question grid: (terms, digits). Not a "cell", which is a row of the
experiment plan (docs/glossary.md)."""


def grid_points(
    terms: tuple[int, int], digits: tuple[int, int], exclude: Iterable[GridPoint] = ()
) -> list[GridPoint]:
    """All (terms, digits) points of the inclusive ranges, minus ``exclude``, row-major."""
    excluded = {tuple(p) for p in exclude}
    points = [
        (t, d)
        for t in range(terms[0], terms[1] + 1)
        for d in range(digits[0], digits[1] + 1)
        if (t, d) not in excluded
    ]
    if not points:
        raise ValueError(
            f"chain_sum grid is empty: terms {terms}, digits {digits}, exclude {sorted(excluded)}"
        )
    return points


# The paper's D (terms and digits 6-10) and D_prime (3-6, excluding 6/6), Sec. 4.1.
PRESETS: dict[str, list[GridPoint]] = {
    "D": grid_points((6, 10), (6, 10)),
    "D_prime": grid_points((3, 6), (3, 6), exclude=[(6, 6)]),
}


def draw_seed(base_seed: int, data_seed: int) -> int:
    """The base seed of data seed ``data_seed``'s training pools: ``DRAW_SPACING`` apart."""
    return base_seed + data_seed * DRAW_SPACING


def point_seed(base_seed: int, pool: str, point: GridPoint) -> int:
    """A seed per (pool, grid point), far enough from every other that item ranges never
    overlap."""
    terms, digits = point
    if not (0 < terms < 100 and 0 < digits < 100):
        raise ValueError(f"chain_sum grid point {point} out of range (terms and digits must "
                         "be 1-99)")
    slot = POOL_INDEX[pool] * 10_000 + terms * 100 + digits
    return base_seed + slot * SEED_SPACING


def point_name(point: GridPoint) -> str:
    """``6x10``: the grid point's name in question ids and the questions' ``cell`` column."""
    return f"{point[0]}x{point[1]}"


def _items(base_seed: int, pool: str, point: GridPoint) -> Iterator[tuple[int, dict]]:
    # reasoning-gym (and the matplotlib it imports) takes 1.4 s: only when questions are drawn
    from reasoning_gym.arithmetic.chain_sum import ChainSumConfig, ChainSumDataset

    terms, digits = point
    config = ChainSumConfig(
        min_terms=terms,
        max_terms=terms,
        min_digits=digits,
        max_digits=digits,
        allow_negation=False,
        seed=point_seed(base_seed, pool, point),
        size=SEED_SPACING,
    )
    dataset = ChainSumDataset(config)
    for idx in range(SEED_SPACING):
        yield idx, dataset[idx]


def build_pool(
    pool: str,
    points: list[GridPoint],
    per_point: int,
    base_seed: int,
    exclude_expressions: set[str] | frozenset[str] = frozenset(),
) -> list[Question]:
    """``per_point`` distinct questions from each grid point, skipping ``exclude_expressions``.

    Raises when a grid point has too few distinct expressions (e.g. 40 questions from 2-term
    1-digit sums with most of them already used by a training pool).
    """
    if per_point < 1:
        raise ValueError(f"chain_sum questions per grid point must be >= 1, got {per_point}")
    questions: list[Question] = []
    for point in points:
        seen: set[str] = set()
        for idx, item in _items(base_seed, pool, point):
            if len(seen) == per_point:
                break
            if idx >= 50 * per_point + 1000:
                raise ValueError(
                    f"chain_sum grid point {point_name(point)} of pool {pool} has only "
                    f"{len(seen)} distinct unused expressions after {idx} draws; ask for fewer "
                    f"than {per_point}"
                )
            expression = item["metadata"]["expression"]
            if expression in seen or expression in exclude_expressions:
                continue
            seen.add(expression)
            problem = chain_sum_problem(expression)
            questions.append(
                Question(
                    question_id=f"{TASK}/{pool}/{point_name(point)}/{idx}",
                    task=TASK,
                    pool=pool,
                    cell=point_name(point),
                    problem=problem,
                    prompt_text=policy_prompt(problem),
                    gold=item["answer"],
                    meta={"terms": point[0], "digits": point[1], "expression": expression},
                )
            )
    return questions


def expressions(questions: Iterable[Question]) -> set[str]:
    return {q.meta["expression"] for q in questions}


# --- the paper's fixed eval set -------------------------------------------------------------

HUB_SPLIT = "train"  # the paper's eval.py: load_dataset(eval_dataset, split="train")
QUESTION_COLUMNS = ("question", "problem", "prompt")
GOLD_COLUMNS = ("answer", "ground_truth", "gold")
_EXPRESSION = re.compile(r"-?\d+(?:\s*[+-]\s*-?\d+)+")
_FIRST_TERM = re.compile(r"\s*(-?\d+)")
_NEXT_TERM = re.compile(r"\s*([+-])\s*(-?\d+)")


class EvalSourceError(FileNotFoundError):
    """The eval set named by ``chain_sum.eval_source`` cannot be read (missing, offline)."""


def _parse_expression(text: str, where: str) -> tuple[str, list[int], int]:
    """(normalised expression, operands, value) of ``a ± b ± ...``, evaluated left to right.

    Normalised as reasoning-gym writes it (``a + b - c``), so expressions compare equal to
    the generated pools' and the prompt is the one the pools use.
    """
    first = _FIRST_TERM.match(text)
    if first is None:
        raise DatasetFormatError(f"{where}: expression {text!r} does not start with a number")
    operands, parts = [int(first.group(1))], [str(int(first.group(1)))]
    value, pos = operands[0], first.end()
    while (step := _NEXT_TERM.match(text, pos)) is not None:
        op, term = step.group(1), int(step.group(2))
        value = value + term if op == "+" else value - term
        operands.append(term)
        parts += [op, str(term)]
        pos = step.end()
    if not re.fullmatch(r"\s*=?\s*", text[pos:]) or len(operands) < 2:
        raise DatasetFormatError(f"{where}: {text!r} is not a chain sum (a ± b ± ... =)")
    return " ".join(parts), operands, value


def _metadata(row: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The row's ``metadata`` (a dict or a JSON string), or {} when absent."""
    meta = row.get("metadata")
    if meta is None or meta == "":
        return {}
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except json.JSONDecodeError as err:
            raise DatasetFormatError(
                f"{where}: column 'metadata' is not JSON ({err.msg})") from None
    if not isinstance(meta, Mapping):
        raise DatasetFormatError(f"{where}: column 'metadata' must be an object, "
                                 f"got {type(meta).__name__}")
    return dict(meta)


def _first(row: Mapping[str, Any], names: tuple[str, ...]) -> tuple[str, Any] | None:
    for name in names:
        value = row.get(name)
        if value is not None and str(value).strip():
            return name, value
    return None


def _gold(row: Mapping[str, Any], where: str) -> int:
    """The integer answer: reasoning-gym's ``answer`` or the paper's ``ground_truth``
    (whose eval.py keeps the text after a ``####``)."""
    found = _first(row, GOLD_COLUMNS)
    if found is None:
        raise DatasetFormatError(f"{where}: missing column for the answer: one of "
                                 f"{', '.join(GOLD_COLUMNS)} (columns: {', '.join(row)})")
    name, value = found
    text = str(value).rsplit("####", 1)[-1].strip().replace(",", "")
    try:
        return int(text)
    except ValueError:
        raise DatasetFormatError(
            f"{where}: column {name!r} = {value!r} is not an integer") from None


def eval_question(row: Any, index: int, where: str, source: str) -> Question:
    """One eval question from a reasoning-gym style row.

    Columns: ``question`` (or ``problem``/``prompt``) and ``answer`` (or ``ground_truth``/
    ``gold``); ``metadata`` (dict or JSON string) with ``expression``/``num_terms``/
    ``num_digits`` is optional: without it the expression is read from the question text and
    terms and digits from the expression. The prompt is rebuilt from the expression (App.
    A.3, as for the pools); the source's own text is kept in ``meta``. The answer must equal
    the expression's value, which catches a wrong column.
    """
    if not isinstance(row, Mapping):
        raise DatasetFormatError(f"{where}: expected an object, got {type(row).__name__}")
    meta = _metadata(row, where)
    text = _first(row, QUESTION_COLUMNS)
    raw = meta.get("expression") or row.get("expression")
    if raw is None:
        if text is None:
            raise DatasetFormatError(f"{where}: missing column for the question: one of "
                                     f"{', '.join(QUESTION_COLUMNS)} (columns: {', '.join(row)})")
        matches = _EXPRESSION.findall(str(text[1]))
        if not matches:
            raise DatasetFormatError(f"{where}: no chain-sum expression in column "
                                     f"{text[0]!r}: {str(text[1])[:80]!r}")
        raw = matches[-1]
    expression, operands, value = _parse_expression(str(raw), where)
    gold = _gold(row, where)
    if gold != value:
        raise DatasetFormatError(f"{where}: answer {gold} is not the value {value} of "
                                 f"{expression!r}")
    terms = int(meta.get("num_terms") or row.get("num_terms") or len(operands))
    if terms != len(operands):
        raise DatasetFormatError(f"{where}: num_terms {terms} but {expression!r} has "
                                 f"{len(operands)} terms")
    digits = int(meta.get("num_digits") or row.get("num_digits")
                 or max(len(str(abs(x))) for x in operands))
    problem = chain_sum_problem(expression)
    return Question(
        question_id=f"{TASK}/eval/{point_name((terms, digits))}/row{index}",
        task=TASK,
        pool="eval",
        cell=point_name((terms, digits)),
        problem=problem,
        prompt_text=policy_prompt(problem),
        gold=str(gold),
        meta={"terms": terms, "digits": digits, "expression": expression, "source": source,
              "source_row": index, "source_question": str(text[1]) if text else ""},
    )


def _read_jsonl(path: Path, source: str) -> list[Question]:
    questions: list[Question] = []
    for _line_no, where, row in jsonl_rows(path):
        questions.append(eval_question(row, len(questions), where, source))
    return questions


def _rows(dataset: Any, label: str, source: str) -> list[Question]:
    return [eval_question(row, i, f"{label} row {i}", source) for i, row in enumerate(dataset)]


def _one_split(loaded: Any, label: str) -> tuple[Any, str]:
    """A ``Dataset`` from ``load_from_disk``: itself, or the ``train`` (or only) split."""
    from datasets import DatasetDict

    if not isinstance(loaded, DatasetDict):
        return loaded, label
    if HUB_SPLIT in loaded:
        return loaded[HUB_SPLIT], f"{label}[{HUB_SPLIT}]"
    if len(loaded) == 1:
        (name,) = loaded
        return loaded[name], f"{label}[{name}]"
    raise EvalSourceError(f"chain_sum eval set {label} has splits {sorted(loaded)} and none is "
                          f"{HUB_SPLIT!r}: save the eval split alone")


def _read_folder(path: Path, source: str) -> list[Question]:
    """A ``save_to_disk`` folder, or a folder of data files (``load_dataset(folder)``)."""
    import datasets

    if (path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file():
        dataset, label = _one_split(datasets.load_from_disk(str(path)), str(path))
    else:
        dataset = datasets.load_dataset(str(path), split=HUB_SPLIT)
        label = f"{path}[{HUB_SPLIT}]"
    return _rows(dataset, label, source)


def _hub_reachable(timeout: float = 5.0) -> bool:
    """One TCP connection to the hub endpoint: without network ``load_dataset`` spends ~25 s
    on retries before failing. Behind a proxy the library is left to try."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        with socket.create_connection(
            (url.hostname or "", url.port or (443 if url.scheme == "https" else 80)), timeout
        ):
            return True
    except OSError:
        return False


def _how_to(source: str, reason: str) -> EvalSourceError:
    return EvalSourceError(
        f"chain_sum eval set {source!r} cannot be loaded from the Hugging Face hub: {reason}. "
        "Provide a local copy: on a machine with network run\n"
        f"  python -c 'import datasets; datasets.load_dataset(\"{source}\", split=\"{HUB_SPLIT}\")"
        '.to_json("chainsum_eval.jsonl")\'\n'
        "copy chainsum_eval.jsonl here and set chain_sum.eval_source to its path (a "
        "datasets.save_to_disk folder works too). With HF_HUB_OFFLINE=1 a copy already in the "
        "Hugging Face cache is used."
    )


def _read_hub(source: str) -> list[Question]:
    import datasets

    offline = datasets.config.HF_HUB_OFFLINE
    if not offline and not _hub_reachable():
        raise _how_to(source, "the hub is not reachable (no network)")
    try:
        dataset = datasets.load_dataset(source, split=HUB_SPLIT)
    except Exception as err:  # offline without a cached copy, unknown id, no such split
        reason = f"{type(err).__name__}: {err}"
        raise _how_to(source, ("offline (HF_HUB_OFFLINE=1) and not in the cache; " + reason)
                      if offline else reason) from err
    return _rows(dataset, f"{source}[{HUB_SPLIT}]", source)


def _looks_like_path(source: str) -> bool:
    return source.startswith((".", "/", "~")) or source.endswith((".jsonl", ".json")) or (
        source.count("/") != 1
    )


@functools.lru_cache(maxsize=8)
def _load(source: str, stamp: tuple[float, int] | None) -> tuple[Question, ...]:
    """Cached per source (and file stamp): several assets of a run ask for the same set."""
    path = Path(source).expanduser()
    if path.is_file():
        if path.suffix not in (".jsonl", ".json"):
            raise EvalSourceError(f"chain_sum eval set {path}: expected a .jsonl file (JSON "
                                  "lines) or a datasets folder")
        questions = _read_jsonl(path, source)
    elif path.is_dir():
        questions = _read_folder(path, source)
    elif _looks_like_path(source):
        raise EvalSourceError(f"chain_sum eval set not found: {path} (chain_sum.eval_source "
                              "is a JSONL file, a datasets folder or a hub id owner/name)")
    else:
        questions = _read_hub(source)
    if not questions:
        raise DatasetFormatError(f"chain_sum eval set {source}: no rows")
    return tuple(questions)


def load_eval_set(source: str) -> list[Question]:
    """The fixed eval set ``source``: a JSONL file, a ``datasets`` folder, or a hub id.

    A path that exists is read locally; ``owner/name`` otherwise goes to the hub
    (split ``train``, as the paper's ``eval.py``), failing at once with how to provide a local
    copy when the hub cannot be reached. Rows keep their order; none is dropped.
    """
    path = Path(source).expanduser()
    stat = path.stat() if path.exists() else None
    return list(_load(source, (stat.st_mtime, stat.st_size) if stat else None))


def grid_of(grid: str | Any) -> list[GridPoint]:
    """The points of a profile's grid: a preset's name (``D``, ``D_prime``) or a grid setting
    (``config.GridSpec``, anything with ``points()``)."""
    return list(PRESETS[grid]) if isinstance(grid, str) else grid.points()

