"""Pairwise judges behind one interface: an LLM over a generation backend, or the rubric.

Why an interface: the tournament (``tournament.py``) schedules pairs and counts wins without
knowing who decides. The LLM judge sees the paper's App. D prompts verbatim
(``judge_prompts.py``) and returns a verdict ending ``Judgment: [N]`` (the paper's output
constraint, which restricts nothing before the verdict). One rule on every route:

1. greedy free generation that stops at the first complete ``Judgment: [N]`` with a valid N
   (``judgment_stops``; EOS and ``max_new_tokens`` end it too). The analysis is whatever the
   judge writes: "John", "**Judge**" or an out-of-range ``Judgment: [7]`` pass unchanged;
2. when no valid judgment came, ``Judgment: [`` is appended (``force_tail``: the rest of a
   marker the analysis already opened, else a new paragraph and ``**Judgment: [``; nothing
   written is removed) and only the index is decoded, greedily among ``0..max_idx`` (a
   *forced* judgment, counted).

Backends: vLLM (``greedy_until`` with stop strings, then ``generate_constrained`` with a regex
over the index only); transformers (``greedy_shared_prefix`` with a stop callback on the same
strings, reusing the shared prompt prefix's KV cache, then ``choose_next_token``: the argmax
over the index tokens); any other backend: greedy ``sample`` and parse, where a missing
verdict is a counted parse failure, never hidden.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from saturated_dag.generation.base import ProgressFn, SamplingParams
from saturated_dag.infra.log import LogFn, time_left
from saturated_dag.scorers.judge_prompts import judge_messages
from saturated_dag.scorers.rubric import rubric_score

FORCE_TAIL = "**Judgment: ["
"""Appended to an analysis that lacks a valid judgment; the next token is the index."""


@dataclass(frozen=True)
class JudgeRequest:
    """One comparison: the problem as the judge sees it and the solutions, in order."""

    task: str
    problem: str
    solutions: tuple[str, ...]


@dataclass(frozen=True)
class Verdict:
    """``choice`` is the index of the better solution; ``None`` is a parse failure.

    ``forced``: the index was decoded after an appended ``Judgment: [``; ``tie``: the judge
    (the rubric) could not separate them, and each solution gets half a win.
    """

    choice: int | None
    forced: bool = False
    tie: bool = False
    text: str = ""


class Judge(Protocol):
    name: str

    def judge(self, requests: Sequence[JudgeRequest], log: LogFn | None = None) -> list[Verdict]:
        """One verdict per request, in order."""
        ...


# --- prompts and verdict text --------------------------------------------------------------

def render_judge_prompt(tokenizer: Any, messages: list[dict], chat_template: str = "auto") -> str:
    """Messages through the tokenizer's chat template when it has one (and the backend's mode
    allows it), else plain text: the contents joined by blank lines, then a newline, so a base
    model continues the few-shot ``### EVALUATION`` heading.

    ``enable_thinking=False`` reaches templates that know it (Qwen3 hybrid models): a judge
    answers within ``judge_max_new_tokens``; other templates ignore the variable.
    """
    has = bool(getattr(tokenizer, "chat_template", None))
    if chat_template == "never" or not has:
        if chat_template == "always" and not has:
            raise ValueError("chat_template='always' but the judge tokenizer has no template")
        return "\n\n".join(m["content"] for m in messages) + "\n"
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                         enable_thinking=False)


def _indices(max_idx: int) -> list[str]:
    if max_idx < 1:
        raise ValueError(f"a judge compares at least two solutions: max_idx must be >= 1, "
                         f"got {max_idx}")
    return [str(i) for i in range(max_idx + 1)]


def judgment_stops(max_idx: int) -> list[str]:
    """The strings that end a judge's free generation: ``Judgment: [N]`` for each valid N.

    Literal, as the paper's prompts write the verdict: vLLM stops on exactly these strings,
    so the transformers route and the parser use them too (one rule, identical verdicts).
    """
    return [f"Judgment: [{i}]" for i in _indices(max_idx)]


def judgment_stop(max_idx: int) -> Callable[[str], bool]:
    """``stop(text)`` for ``greedy_shared_prefix``: true once a valid judgment is complete."""
    stops = judgment_stops(max_idx)
    return lambda text: any(s in text for s in stops)


def first_judgment(text: str, max_idx: int) -> tuple[int | None, str]:
    """The first complete ``Judgment: [N]`` with N <= max_idx, and the text up to it (with a
    ``**`` that closes it); ``(None, text)`` when there is none.

    An out-of-range ``Judgment: [7]`` is analysis like any other text: generation went on
    past it, and so does the search.
    """
    choices = "|".join(_indices(max_idx))
    match = re.search(rf"Judgment: \[({choices})\](?:\*\*)?", text)
    if match is None:
        return None, text
    return int(match.group(1)), text[: match.end()]


def _opened_rest(analysis: str) -> str | None:
    """The rest of a judgment marker that the analysis ends inside of, else ``None``.

    The marker's start must begin the text or follow whitespace, and be at least ``**`` (the
    bold opening) or ``Judg``: text that only looks alike ("the **Judge**", "Janet") is not
    inside a marker and is left alone.
    """
    for marker, shortest in ((FORCE_TAIL, 2), (FORCE_TAIL[2:], 4)):
        for k in range(len(marker), shortest - 1, -1):
            before = analysis[: len(analysis) - k]
            if analysis.endswith(marker[:k]) and (not before or before[-1].isspace()):
                return marker[k:]
    return None


def force_tail(analysis: str) -> str:
    """What to append to an analysis without a valid judgment so the next token is the index.

    Nothing the judge wrote is removed: if the token budget ran out inside a marker
    (``...**Judgment: ``) only its rest is appended, otherwise a new paragraph and
    ``**Judgment: [``.
    """
    rest = _opened_rest(analysis)
    if rest is not None:
        return rest
    if not analysis:
        return FORCE_TAIL
    newlines = len(analysis) - len(analysis.rstrip("\n"))
    return "\n" * max(0, 2 - newlines) + FORCE_TAIL


def forced_text(analysis: str, choice: int | None) -> str:
    """The verdict text of a forced judgment: the analysis unchanged, the completed marker,
    the index and the closing bracket (and ``**`` after a bold marker)."""
    opened = analysis + force_tail(analysis)
    if choice is None:
        return opened
    return f"{opened}{choice}]{'**' if opened.endswith(FORCE_TAIL) else ''}"


# --- judges --------------------------------------------------------------------------------

class LlmJudge:
    """An LLM judge (the self-judge is the policy's backend; a strong judge its own)."""

    def __init__(self, backend: Any, instruct: bool, max_new_tokens: int = 1024,
                 batch_size: int | None = None, name: str = "llm"):
        self.backend, self.instruct = backend, instruct
        self.max_new_tokens, self.batch_size, self.name = max_new_tokens, batch_size, name

    def prompt(self, request: JudgeRequest) -> str:
        messages = judge_messages(request.task, request.problem, list(request.solutions),
                                  self.instruct)
        return render_judge_prompt(self.backend.tokenizer, messages,
                                   getattr(self.backend, "chat_template", "auto"))

    @property
    def route(self) -> str:
        """``vllm``, ``transformers`` or ``plain``: which backend calls the judge makes."""
        if hasattr(self.backend, "greedy_until") and hasattr(self.backend,
                                                             "generate_constrained"):
            return "vllm"
        if hasattr(self.backend, "greedy_shared_prefix"):
            return "transformers"
        return "plain"

    def judge(self, requests: Sequence[JudgeRequest], log: LogFn | None = None) -> list[Verdict]:
        """Free generation up to the first valid judgment, then the index forced where none
        came; requests are grouped by their number of solutions (one stop rule per group)."""
        if not requests:
            return []
        prompts = [self.prompt(r) for r in requests]
        max_idx = [len(r.solutions) - 1 for r in requests]
        verdicts = [Verdict(None)] * len(prompts)
        done, started = 0, time.monotonic()
        for top in sorted(set(max_idx)):
            group = [i for i, m in enumerate(max_idx) if m == top]
            texts = self._free([prompts[i] for i in group], top,
                               _progress(log, done, len(prompts), started))
            done += len(group)
            pending: list[tuple[int, str]] = []
            for i, text in zip(group, texts, strict=True):
                choice, head = first_judgment(text, top)
                verdicts[i] = Verdict(choice, text=head)
                if choice is None:
                    pending.append((i, text))
            if pending and self.route != "plain":
                picks = self._pick([prompts[i] + a + force_tail(a) for i, a in pending], top)
                for (i, analysis), choice in zip(pending, picks, strict=True):
                    verdicts[i] = Verdict(choice, forced=choice is not None,
                                          text=forced_text(analysis, choice))
        return verdicts

    def _free(self, prompts: list[str], top: int, progress: ProgressFn | None) -> list[str]:
        """Greedy analyses, each ended by the first valid judgment, EOS or the token budget."""
        if self.route == "vllm":
            outs = self.backend.greedy_until(prompts, judgment_stops(top), self.max_new_tokens)
            return [s.text for s in outs]
        if self.route == "transformers":
            outputs = self.backend.greedy_shared_prefix(
                prompts, self.max_new_tokens, stop=judgment_stop(top),
                batch_size=self.batch_size, progress=progress)
            return [text for _, text in outputs]
        params = SamplingParams(n=1, temperature=0, max_new_tokens=self.max_new_tokens)
        return [row[0].text for row in self.backend.sample(prompts, params)]

    def _pick(self, texts: list[str], top: int) -> list[int | None]:
        """The greedy index among ``0..top`` after each text (which ends ``Judgment: [``)."""
        if self.route == "vllm":
            regex = "(" + "|".join(_indices(top)) + ")"
            outs = self.backend.generate_constrained(texts, regex, len(str(top)) + 1)
            picks: list[int | None] = []
            for sample in outs:
                match = re.match(r"\d+", sample.text.strip())
                picks.append(int(match.group()) if match and int(match.group()) <= top
                             else None)
            return picks
        candidates = [self._index_token(d) for d in range(top + 1)]
        if any(c is None for c in candidates):
            # An index that is not one token in this vocabulary cannot be forced: a parse
            # failure, counted as such.
            return [None] * len(texts)
        chosen = self.backend.choose_next_token(texts, candidates, batch_size=self.batch_size)
        return [int(k) for k in chosen]

    def _index_token(self, index: int) -> int | None:
        ids = self.backend.tokenizer(str(index), add_special_tokens=False)["input_ids"]
        return ids[0] if len(ids) == 1 else None


def _progress(log: LogFn | None, before: int, total: int, started: float
              ) -> ProgressFn | None:
    """A backend progress callback that logs judged comparisons over all groups, with the
    time the judging still needs at its pace since ``started`` (``time.monotonic()``)."""
    if log is None:
        return None

    def report(done: int, _: int) -> None:
        left = time_left(time.monotonic() - started, before + done, total)
        log(f"judged {before + done}/{total} comparisons ({left})")

    return report


_EXPRESSION = re.compile(r"Compute the following step by step:\s*\n(.+?)\s*=\s*$", re.DOTALL)


def chain_sum_expression(problem: str) -> str:
    """The expression inside a chain-sum problem statement (``tasks/prompts.py``)."""
    match = _EXPRESSION.search(problem.strip())
    if match is None:
        raise ValueError(f"not a chain-sum problem statement: {problem[:80]!r}")
    return match.group(1).strip()


class RubricJudge:
    """The demo's strong judge: the higher rubric score wins; equal scores tie.

    Only chain sum has a rubric (it checks every intermediate sum); GSM8K is refused.
    """

    name = "rubric"

    def judge(self, requests: Sequence[JudgeRequest], log: LogFn | None = None) -> list[Verdict]:
        verdicts = []
        for request in requests:
            if request.task != "chain_sum":
                raise ValueError(
                    f"the rubric judge scores chain sums only, not {request.task!r}: there is "
                    "no rubric for GSM8K; use an LLM strong judge (judges.strong.kind: llm)")
            expression = chain_sum_expression(request.problem)
            scores = [rubric_score(s, expression) for s in request.solutions]
            best = max(scores)
            winners = [i for i, s in enumerate(scores) if s == best]
            text = "rubric " + ", ".join(f"{s:.4f}" for s in scores)
            verdicts.append(Verdict(winners[0], tie=len(winners) > 1, text=text))
        return verdicts


PRETRAIN_RECIPE = "saturated_dag.pretrain"
JUDGES_ARE_COPIES = (
    "identical by construction: the policy's self-judge was pretrained on the rubric's own "
    "verdicts (judge_taste: rubric, saturated_dag/pretrain/corpus.py) and the strong judge is "
    "that rubric, so a self-judge against strong-judge contrast measures nothing")
"""What every self-judge vs strong-judge contrast is marked with when ``judges_are_copies``."""


def judges_are_copies(policy_model: str, strong_kind: str) -> bool:
    """True when the self-judge was trained to imitate the strong judge: a model of the
    project's pretraining recipe whose ``PROVENANCE.json`` records the ``rubric`` taste (the
    first embedded model, before the taste existed, counts as ``rubric``), judged against the
    chain-sum rubric (``JUDGES_ARE_COPIES``). Read from the model folder, not assumed from its
    name: the shipped model's self-judge has a taste of its own."""
    import json
    from pathlib import Path

    from saturated_dag.generation.models import resolve

    if strong_kind != "rubric":
        return False
    try:
        source = resolve(str(policy_model))
    except (FileNotFoundError, ValueError):
        return False
    provenance = Path(source.location) / "PROVENANCE.json"
    if source.kind != "folder" or not provenance.is_file():
        return False
    record = json.loads(provenance.read_text(encoding="utf-8"))
    return (record.get("recipe") == PRETRAIN_RECIPE
            and record.get("config", {}).get("judge_taste", "rubric") == "rubric")
