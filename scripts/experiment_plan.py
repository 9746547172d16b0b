"""Print, for a profile, each table row and the configurations it trains and selects among.

    .venv/bin/python scripts/experiment_plan.py --profile paper
    .venv/bin/python scripts/experiment_plan.py --profile paper_instruct

Per task, one line per table row (main matrix, then each sweep): the cell it reports, how many
configurations it selects among and over how many training seeds, the settings it holds and
the values its selection varies (``saturated_dag.reporting.plan_text``). Check a GPU run with
it before paying for one; docs/paper-run.md embeds its output for ``paper`` and
``paper_instruct``.
With ``--context``, also each vLLM engine's context need, measured with the model's tokenizer
where it is on this machine (the paper's Qwen3 models are not: their need is measured when the
engine starts).
"""

from __future__ import annotations

import argparse

from saturated_dag.profiles import load_profile
from saturated_dag.reporting.plan_text import markdown


def _context(profile) -> str:
    from transformers import AutoTokenizer

    from saturated_dag.generation.models import local_model_dir
    from saturated_dag.profiles.engine_context import policy_needs, strong_judge_needs

    engines = [("policy.vllm.max_model_len", profile.policy, policy_needs)]
    if profile.judges.strong.kind == "llm":
        engines.append(("judges.strong.vllm.max_model_len", profile.judges.strong,
                        strong_judge_needs))
    lines = []
    for field, settings, needs in engines:
        if settings.backend != "vllm":
            continue
        try:
            tokenizer = AutoTokenizer.from_pretrained(local_model_dir(str(settings.model)))
        except (OSError, ValueError) as err:
            lines.append(f"- {field} = {settings.vllm.max_model_len}: tokenizer of "
                         f"{settings.model} not on this machine ({type(err).__name__}); "
                         "measured when the engine starts")
            continue
        found = needs(profile, tokenizer)
        lines.append(f"- {field} = {settings.vllm.max_model_len}; needs "
                     f"{max(n.total for n in found):,}:")
        lines += [f"  - {n.describe()}" for n in found]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="paper", help="a profile name or YAML path")
    parser.add_argument("--context", action="store_true",
                        help="also measure each vLLM engine's context need (loads tokenizers)")
    args = parser.parse_args(argv)
    profile = load_profile(args.profile)
    print(markdown(profile))
    if args.context:
        print(_context(profile))


if __name__ == "__main__":
    main()
