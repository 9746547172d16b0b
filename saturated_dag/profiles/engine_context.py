"""How many tokens an engine's context must hold: each prompt it serves, measured with the
model's own tokenizer, plus what follows the prompt.

Why this exists: the self-judge runs on the policy's vLLM engine, and the paper's self-judge
prompt is the few-shot examples (about 2k tokens on Qwen3) with the question and two
completions of up to ``sampling.max_new_tokens`` (2,048) inside it, followed by a judgment of
up to ``scoring.judge_max_new_tokens`` (1,024). A 4,096-token engine cannot hold that, and
vLLM refuses such a prompt only when it arrives, hours into a run. A profile alone bounds the
need from below (two completions and a judgment, ``config.Profile``); the prompt template and
the longest question are measured here, when the engine starts, with the tokenizer it loads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from saturated_dag.scorers.judge_prompts import judge_messages
from saturated_dag.scorers.judges import render_judge_prompt
from saturated_dag.tasks.prompts import render_prompt

if TYPE_CHECKING:
    from saturated_dag.config import Profile

MARGIN = 32
"""Tokens beyond the measured parts: text joined at a boundary can tokenise a little
differently from its pieces, and an unfinished judgment is re-prompted with its analysis and a
short forced tail (``judges.force_tail``) before the index token."""


@dataclass(frozen=True)
class ContextNeed:
    """One kind of request an engine serves, and the context it needs."""

    what: str  # "self-judge", "strong judge", "sampling"
    task: str
    prompt: int  # the rendered prompt with the task's longest question (no completions)
    completions: int  # completion tokens placed inside the prompt (a judge's two solutions)
    generated: int  # tokens generated after it (a judgment, or a sampled completion)

    @property
    def total(self) -> int:
        return self.prompt + self.completions + self.generated + MARGIN

    def describe(self) -> str:
        inside = f" + completions {self.completions:,}" if self.completions else ""
        return (f"{self.what} on {self.task}: prompt {self.prompt:,} (template and longest "
                f"question){inside} + generated {self.generated:,} + margin {MARGIN} = "
                f"{self.total:,}")


def _tokens(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


KEEP = 8
"""Problems rendered into full prompts: the longest few by their own token count. A prompt is
a fixed template around the problem, so its longest is among them (a boundary merge changes a
count by a token or two, which ``MARGIN`` covers), and GSM8K's 8,792 questions are not each
rendered into a 2k-token few-shot prompt."""


def _longest(tokenizer: Any, problems: Sequence[str]) -> list[str]:
    if len(problems) <= KEEP:
        return list(problems)
    counts = [len(ids) for ids in tokenizer(list(problems), add_special_tokens=False)["input_ids"]]
    order = sorted(range(len(problems)), key=lambda i: -counts[i])
    return [problems[i] for i in order[:KEEP]]


def labelled_problems(profile: Profile, task: str) -> list[tuple[str, str]]:
    """``(where, problem)`` for problems at least as long as any the profile's engines will see for
    ``task``: one question per grid point of every question grid (``where`` names the grid point),
    or every GSM8K train and test question (``where`` is its id)."""
    from saturated_dag.tasks import chain_sum
    from saturated_dag.tasks.chain_sum import grid_of

    if task == "gsm8k":  # the pool, validation and eval questions, as the profile limits them
        from saturated_dag.data.questions import (
            eval_questions,
            training_questions,
            validation_questions,
        )

        return [(q.question_id, q.problem) for pick in (training_questions,
                                                        validation_questions, eval_questions)
                for q in pick(profile, "gsm8k")]
    cfg = profile.chain_sum
    grids = [g for g in (cfg.grid, cfg.strict_grid, cfg.eval_grid) if g is not None]
    points = sorted({point for grid in grids for point in grid_of(grid)})
    return [(f"chain_sum grid point {chain_sum.point_name(point)}", q.problem)
            for point in points for q in chain_sum.build_pool("D", [point], 1, cfg.seed)]


def longest_problems(profile: Profile, task: str) -> list[str]:
    """The problems of ``labelled_problems``, without their labels."""
    return [problem for _, problem in labelled_problems(profile, task)]


def sampling_overflows(profile: Profile, tokenizer: Any, max_positions: int) -> list[str]:
    """Each cell (chain sum) or question (GSM8K) whose sampling prompt plus
    ``sampling.max_new_tokens`` exceeds the model's context, with the numbers: a completion
    would be cut at the context, silently, and read as wrong."""
    from saturated_dag.tasks.prompts import policy_prompt

    policy, new = profile.policy, profile.sampling.max_new_tokens
    out = []
    for task in profile.tasks:
        labelled = labelled_problems(profile, task)
        if task == "gsm8k":  # thousands of questions: the longest few by their own tokens
            keep = set(_longest(tokenizer, [p for _, p in labelled]))
            labelled = [(w, p) for w, p in labelled if p in keep]
        for where, problem in labelled:
            prompt = _tokens(tokenizer, render_prompt(tokenizer, policy_prompt(problem),
                                                      policy.chat_template,
                                                      policy.enable_thinking))
            if prompt + new > max_positions:
                out.append(f"{where}: prompt {prompt:,} + sampling.max_new_tokens {new:,} = "
                           f"{prompt + new:,} > the model's context {max_positions:,}")
    return out


def judge_need(tokenizer: Any, task: str, problems: Sequence[str], *, instruct: bool,
               chat_template: str, completion_tokens: int, judgment_tokens: int,
               what: str) -> ContextNeed:
    """A pairwise judge's need: its prompt (as ``LlmJudge.prompt`` renders it) around the
    longest of ``problems`` with two empty solutions, the two solutions at their longest, and
    the judgment."""
    longest = max(_tokens(tokenizer, render_judge_prompt(
        tokenizer, judge_messages(task, p, ["", ""], instruct), chat_template))
        for p in _longest(tokenizer, problems))
    return ContextNeed(what, task, longest, 2 * completion_tokens, judgment_tokens)


def sampling_need(tokenizer: Any, task: str, problems: Sequence[str], *, chat_template: str,
                  enable_thinking: bool | None, max_new_tokens: int) -> ContextNeed:
    """The policy's sampling need: its rendered prompt for the longest problem, then a
    completion of ``max_new_tokens``."""
    from saturated_dag.tasks.prompts import policy_prompt

    longest = max(_tokens(tokenizer, render_prompt(tokenizer, policy_prompt(p), chat_template,
                                                   enable_thinking))
                  for p in _longest(tokenizer, problems))
    return ContextNeed("sampling", task, longest, 0, max_new_tokens)


def policy_needs(profile: Profile, tokenizer: Any) -> list[ContextNeed]:
    """What the policy's engine serves, per task: sampling (pool, validation, eval) and the
    self-judge (the policy judging pairs of its own completions)."""
    policy, scoring = profile.policy, profile.scoring
    out = []
    for task in profile.tasks:
        problems = longest_problems(profile, task)
        out.append(sampling_need(tokenizer, task, problems, chat_template=policy.chat_template,
                                 enable_thinking=policy.enable_thinking,
                                 max_new_tokens=profile.sampling.max_new_tokens))
        out.append(judge_need(tokenizer, task, problems,
                              instruct=profile.judges.self_judge.instruct,
                              chat_template=policy.chat_template,
                              completion_tokens=profile.sampling.max_new_tokens,
                              judgment_tokens=scoring.judge_max_new_tokens, what="self-judge"))
    return out


def strong_judge_needs(profile: Profile, tokenizer: Any) -> list[ContextNeed]:
    """What the strong judge's engine serves, per task."""
    strong = profile.judges.strong
    return [judge_need(tokenizer, task, longest_problems(profile, task), instruct=strong.instruct,
                       chat_template=strong.chat_template,
                       completion_tokens=profile.sampling.max_new_tokens,
                       judgment_tokens=profile.scoring.judge_max_new_tokens,
                       what="strong judge") for task in profile.tasks]


class ContextTooShort(ValueError):
    """A configured context that cannot hold what the engine will serve."""


def model_max_positions(model_dir: str | Path) -> int | None:
    """The model's own maximum context (``max_position_embeddings`` in its config.json)."""
    config = Path(model_dir) / "config.json"
    if not config.is_file():
        return None
    data = json.loads(config.read_text(encoding="utf-8"))
    value = data.get("max_position_embeddings") or data.get("text_config", {}).get(
        "max_position_embeddings")
    return int(value) if value else None


def resolve_context(setting: int | str | None, needs: Sequence[ContextNeed], field: str,
                    model_max: int | None = None) -> int | None:
    """The ``max_model_len`` to start the engine with: ``auto`` becomes the largest need; a
    number is kept if it holds every need; None stays None (the model's own maximum), after
    checking that maximum where it is known. Anything short is refused with every number."""
    need = max((n.total for n in needs), default=0)
    lines = "\n".join(f"  {n.describe()}" for n in needs)
    if setting == "auto":
        if model_max is not None and need > model_max:
            raise ContextTooShort(f"{field}: auto needs {need:,} tokens but the model's "
                                  f"maximum is {model_max:,}:\n{lines}\nlower "
                                  "sampling.max_new_tokens or scoring.judge_max_new_tokens")
        return need
    limit = model_max if setting is None else int(setting)
    if limit is not None and limit < need:
        which = "the model's maximum" if setting is None else f"{field} = {limit:,}"
        raise ContextTooShort(f"{which} cannot hold {need:,} tokens:\n{lines}\nset {field} "
                              "to auto, or to at least the largest total")
    return None if setting is None else int(setting)


def check_sampling_context(profile: Profile, tokenizer: Any, max_positions: int | None,
                           model: str) -> None:
    """Refuse, naming every cell or question and the numbers, a profile whose prompts and
    completions do not fit ``model``'s context (``sampling_overflows``)."""
    if max_positions is None:
        return
    found = sampling_overflows(profile, tokenizer, max_positions)
    if found:
        shown = "\n".join(f"  {line}" for line in found[:10])
        more = f"\n  ... and {len(found) - 10} more" if len(found) > 10 else ""
        raise ContextTooShort(f"policy {model}: {len(found)} prompt(s) and their completions "
                              f"do not fit its context:\n{shown}{more}\nshrink the grid "
                              "(chain_sum.grid, strict_grid, eval_grid) or "
                              "sampling.max_new_tokens")


PLAIN_FAST_TOKENIZER = "PreTrainedTokenizerFast"


def folder_tokenizer(folder: str | Path, trust_remote_code: bool = False) -> Any:
    """The tokenizer of a model folder, as ``AutoTokenizer`` loads it.

    ``AutoTokenizer`` imports torch and the model's config classes: about 4 s at every
    code-location load (the UI, each run and each CLI command). A folder whose
    ``tokenizer_config.json`` names the plain fast tokenizer (the embedded model) is loaded
    as that class directly, which needs neither; any other folder goes through
    ``AutoTokenizer``.
    """
    config = Path(folder) / "tokenizer_config.json"
    if config.is_file() and json.loads(config.read_text(encoding="utf-8")).get(
            "tokenizer_class") == PLAIN_FAST_TOKENIZER:
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast.from_pretrained(folder)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code)


def check_local_policy(profile: Profile) -> None:
    """At code-location load, for a transformers policy in a local folder (the embedded
    model, a path): the sampling prompts fit its context (``check_sampling_context``). A vLLM
    policy is measured when its engine starts (``resources.inference``), a hub or GGUF model
    when it loads."""
    from saturated_dag.generation.models import check_model_folder, resolve

    policy = profile.policy
    if policy.backend != "transformers":
        return
    source = resolve(policy.model)
    if source.kind != "folder":
        return
    check_model_folder(source.location, policy.model)
    tokenizer = folder_tokenizer(source.location, policy.trust_remote_code)
    check_sampling_context(profile, tokenizer, model_max_positions(source.location),
                           policy.model)
