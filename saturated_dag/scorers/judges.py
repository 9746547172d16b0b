"""Pairwise judges behind one interface: an LLM over a generation backend, or the rubric.

Why an interface: the tournament (``tournament.py``) schedules pairs and counts wins without
knowing who decides. The LLM judge sees the paper's App. D prompts verbatim
(``judge_prompts.py``) and always returns a verdict ending ``Judgment: [N]``:

* vLLM (``generate_constrained``): greedy under a regex that ends with the judgment;
* transformers (``greedy_shared_prefix``): greedy analysis with the shared prompt prefix's KV
  cache reused; if the analysis lacks a valid judgment, ``Judgment: [`` is appended and the index
  is the argmax over the index tokens only (a *forced* judgment, counted);
* any other backend: greedy ``sample`` and parse; a failure is counted, never hidden.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from saturated_dag.generation.base import SamplingParams
from saturated_dag.scorers.judge_prompts import judge_messages, parse_judgment

LogFn = Callable[[str], None]

_FOUND = re.compile(r"(?:\*\*)?Judgment:\s*\[(\d+)\](?:\*\*)?")
_PARTIAL = re.compile(r"\**Judg")
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


# --- prompts -------------------------------------------------------------------------------

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


def first_judgment(text: str, max_idx: int) -> tuple[int | None, str]:
    """The first complete ``Judgment: [N]`` with N <= max_idx, and the text up to it."""
    match = _FOUND.search(text)
    if match is None:
        return None, text
    head = text[: match.end()]
    choice = parse_judgment(head)
    return (choice if choice is not None and choice <= max_idx else None), head


def strip_partial_judgment(text: str) -> str:
    """The analysis without any judgment line it started (complete, out of range or cut off)."""
    match = _PARTIAL.search(text)
    if match is not None:
        text = text[: match.start()]
    for k in range(len(FORCE_TAIL) - 1, 0, -1):
        if text.endswith(FORCE_TAIL[:k]):
            text = text[: -k]
            break
    return text.rstrip()


def constrained_regex(max_idx: int) -> str:
    """vLLM structured-output regex: an analysis, then ``**Judgment: [N]**`` and nothing after.

    The analysis may not contain ``J``: otherwise a base model that writes the judgment and
    goes on (into a new few-shot example) would run to the token limit; excluding the one
    letter keeps the regex a simple character class the grammar engines accept.
    """
    choices = "|".join(str(i) for i in range(max_idx + 1))
    return rf"[^J]*\*\*Judgment: \[({choices})\]\*\*"


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

    def judge(self, requests: Sequence[JudgeRequest], log: LogFn | None = None) -> list[Verdict]:
        if not requests:
            return []
        prompts = [self.prompt(r) for r in requests]
        max_idx = [len(r.solutions) - 1 for r in requests]
        if hasattr(self.backend, "generate_constrained"):
            return self._vllm(prompts, max_idx)
        if hasattr(self.backend, "greedy_shared_prefix"):
            return self._transformers(prompts, max_idx, log)
        return self._plain(prompts, max_idx)

    def _transformers(self, prompts: list[str], max_idx: list[int],
                      log: LogFn | None) -> list[Verdict]:
        top = max(max_idx)

        def stop(text: str) -> bool:
            return _FOUND.search(text) is not None

        def progress(done: int, total: int) -> None:
            if log is not None:
                log(f"judged {done}/{total} comparisons")

        outputs = self.backend.greedy_shared_prefix(
            prompts, self.max_new_tokens, stop=stop, batch_size=self.batch_size,
            progress=progress)
        verdicts: list[Verdict | None] = []
        pending: list[tuple[int, str]] = []
        for i, (_, text) in enumerate(outputs):
            choice, head = first_judgment(text, max_idx[i])
            if choice is not None:
                verdicts.append(Verdict(choice, text=head))
            else:
                verdicts.append(None)
                pending.append((i, strip_partial_judgment(text)))
        if pending:
            candidates = [self._index_token(d) for d in range(top + 1)]
            forced = self._force(prompts, max_idx, pending, candidates)
            for (i, analysis), choice in zip(pending, forced, strict=True):
                tail = f"{choice}]**" if choice is not None else ""
                sep = "\n\n" if analysis else ""
                verdicts[i] = Verdict(choice, forced=choice is not None,
                                      text=f"{analysis}{sep}{FORCE_TAIL}{tail}")
        return [v for v in verdicts if v is not None]

    def _index_token(self, index: int) -> int | None:
        ids = self.backend.tokenizer(str(index), add_special_tokens=False)["input_ids"]
        return ids[0] if len(ids) == 1 else None

    def _force(self, prompts: list[str], max_idx: list[int], pending: list[tuple[int, str]],
               candidates: list[int | None]) -> list[int | None]:
        """Argmax over index tokens after ``**Judgment: [``; ``None`` if an index is not one
        token in this vocabulary (then nothing can be forced: a parse failure)."""
        out: list[int | None] = [None] * len(pending)
        by_top: dict[int, list[int]] = {}
        for k, (i, _) in enumerate(pending):
            by_top.setdefault(max_idx[i], []).append(k)
        for top, ks in by_top.items():
            allowed = candidates[: top + 1]
            if any(c is None for c in allowed):
                continue
            texts = []
            for k in ks:
                i, analysis = pending[k]
                sep = "\n\n" if analysis else ""
                texts.append(f"{prompts[i]}{analysis}{sep}{FORCE_TAIL}")
            picks = self.backend.choose_next_token(texts, allowed, batch_size=self.batch_size)
            for k, pick in zip(ks, picks, strict=True):
                out[k] = int(pick)
        return out

    def _vllm(self, prompts: list[str], max_idx: list[int]) -> list[Verdict]:
        verdicts: list[Verdict | None] = [None] * len(prompts)
        for top in sorted(set(max_idx)):
            idx = [i for i, m in enumerate(max_idx) if m == top]
            outs = self.backend.generate_constrained(
                [prompts[i] for i in idx], constrained_regex(top), self.max_new_tokens)
            pending = []
            for i, sample in zip(idx, outs, strict=True):
                choice, head = first_judgment(sample.text, top)
                if choice is not None:
                    verdicts[i] = Verdict(choice, text=head)
                else:  # cut off by the token limit: force the index, as on transformers
                    pending.append((i, strip_partial_judgment(sample.text)))
            if pending:
                choices = "|".join(str(d) for d in range(top + 1))
                texts = [f"{prompts[i]}{a}{chr(10) * 2 if a else ''}{FORCE_TAIL}"
                         for i, a in pending]
                forced = self.backend.generate_constrained(texts, rf"({choices})\]\*\*", 4)
                for (i, analysis), sample in zip(pending, forced, strict=True):
                    match = re.match(r"(\d+)", sample.text)
                    choice = int(match.group(1)) if match else None
                    if choice is not None and choice > top:
                        choice = None
                    verdicts[i] = Verdict(choice, forced=choice is not None,
                                          text=f"{analysis}{FORCE_TAIL}{sample.text}")
        return [v if v is not None else Verdict(None) for v in verdicts]

    def _plain(self, prompts: list[str], max_idx: list[int]) -> list[Verdict]:
        params = SamplingParams(n=1, temperature=0, max_new_tokens=self.max_new_tokens)
        outs = self.backend.sample(prompts, params)
        verdicts = []
        for row, top in zip(outs, max_idx, strict=True):
            choice, head = first_judgment(row[0].text, top)
            verdicts.append(Verdict(choice, text=head))
        return verdicts


_EXPRESSION = re.compile(r"Compute the following step by step:\s*\n(.+?)\s*=\s*$", re.DOTALL)


def chain_sum_expression(problem: str) -> str:
    """The expression inside a chain-sum problem statement (``tasks/prompts.py``)."""
    match = _EXPRESSION.search(problem.strip())
    if match is None:
        raise ValueError(f"not a chain-sum problem statement: {problem[:80]!r}")
    return match.group(1).strip()


def load_rubric_score() -> Callable[[str, str], float]:
    """``rubric.rubric_score``, imported late and after the ``pretrain`` package.

    Why: ``scorers.rubric`` imports ``pretrain.styles``, whose package ``__init__`` imports
    ``pretrain.corpus``, which imports ``scorers.rubric``: a cycle that fails whenever the
    rubric is the first of them imported. Importing ``pretrain`` first resolves it.
    """
    import saturated_dag.pretrain  # noqa: F401
    from saturated_dag.scorers.rubric import rubric_score

    return rubric_score


class RubricJudge:
    """The demo's strong judge: the higher rubric score wins; equal scores tie.

    Only chain sum has a rubric (it checks every intermediate sum); GSM8K is refused.
    """

    name = "rubric"

    def judge(self, requests: Sequence[JudgeRequest], log: LogFn | None = None) -> list[Verdict]:
        rubric_score = load_rubric_score()
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
