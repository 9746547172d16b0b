"""Quick acceptance check of a base model folder over a terms x digits grid.

``python -m saturated_dag.pretrain.evaluate --model saturated_dag/models/arith_base``

Samples n completions per question at T=0.6 / top-p 0.95 with transformers ``generate``,
checks the last ``\\boxed{}`` against the integer gold, and reports per-grid-point pass@1, the
saturated / hard shares, style diversity among saturated questions and the self-judge's
parse rate. A stand-alone sampler on purpose: it measures the checkpoint, not the pipeline.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from saturated_dag.scorers.judge_prompts import judge_messages, parse_judgment
from saturated_dag.scorers.rubric import is_correct, rubric_score
from saturated_dag.tasks.prompts import chain_sum_problem, policy_prompt, render_prompt
from saturated_dag.tasks.solution_styles import Expression, detect_style


def point_questions(points: list[tuple[int, int]], per_point: int, seed: int) -> dict:
    """reasoning-gym chain_sum questions, ``per_point`` for each (terms, digits) grid point."""
    from reasoning_gym.arithmetic.chain_sum import ChainSumConfig, ChainSumDataset

    out = {}
    for terms, digits in points:
        cfg = ChainSumConfig(
            min_terms=terms,
            max_terms=terms,
            min_digits=digits,
            max_digits=digits,
            seed=seed,
            size=per_point,
        )
        out[(terms, digits)] = [item["metadata"]["expression"] for item in ChainSumDataset(cfg)]
    return out


@torch.no_grad()
def sample(
    model,
    tokenizer,
    prompts: list[str],
    n: int,
    max_new_tokens: int,
    temperature: float = 0.6,
    top_p: float = 0.95,
    batch_prompts: int = 16,
) -> list[list[str]]:
    """``n`` sampled completions per rendered prompt (EOS-terminated, special tokens dropped)."""
    tokenizer.padding_side = "left"
    results: list[list[str]] = []
    for i in range(0, len(prompts), batch_prompts):
        chunk = prompts[i : i + batch_prompts]
        enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False)
        out = model.generate(
            **enc,
            do_sample=True,
            temperature=temperature,
            top_p=top_p,
            num_return_sequences=n,
            max_new_tokens=max_new_tokens,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        texts = tokenizer.batch_decode(
            out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True
        )
        results += [texts[j * n : (j + 1) * n] for j in range(len(chunk))]
    return results


def evaluate(
    model_dir: str,
    points: list[tuple[int, int]],
    per_point: int,
    n: int,
    seed: int,
    judge_pairs: int,
    threads: int,
) -> dict:
    """All acceptance numbers of one model folder, as a dict."""
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    questions = point_questions(points, per_point, seed)
    t0 = time.monotonic()
    report: dict = {"points": {}, "n": n, "per_point": per_point, "seed": seed}
    saturated: list[tuple[str, list[str]]] = []
    styles_all: Counter = Counter()
    for point, exprs in questions.items():
        prompts = [
            render_prompt(tokenizer, policy_prompt(chain_sum_problem(e)), "auto") for e in exprs
        ]
        comps = sample(model, tokenizer, prompts, n, max_new_tokens=40 + 20 * point[0])
        rates = []
        for expr, cs in zip(exprs, comps, strict=True):
            gold = Expression.parse(expr).answer
            ok = [is_correct(c, gold) for c in cs]
            rates.append(sum(ok) / n)
            styles_all.update(detect_style(c) for c in cs)
            if all(ok):
                saturated.append((expr, cs))
        report["points"][f"{point[0]}x{point[1]}"] = {
            "pass@1": round(sum(rates) / len(rates), 4),
            "saturated": sum(r == 1 for r in rates) / len(rates),
            "hard": sum(r <= 0.25 for r in rates) / len(rates),
        }
    report["sampling_s"] = round(time.monotonic() - t0, 1)
    report["style_counts"] = dict(styles_all)
    diverse = [len({detect_style(c) for c in cs}) >= 2 for _, cs in saturated]
    report["saturated_questions"] = len(saturated)
    report["saturated_with_2plus_styles"] = round(sum(diverse) / max(1, len(diverse)), 4)
    report["self_judge"] = judge_check(model, tokenizer, saturated, judge_pairs)
    return report


def judge_check(model, tokenizer, saturated: list[tuple[str, list[str]]], pairs: int) -> dict:
    """Self-judge comparisons of correct completions: parse rate and agreement with the rubric."""
    prompts, meta = [], []
    for expr, cs in saturated:
        for k in range(min(pairs, len(cs) // 2)):
            a, b = cs[2 * k], cs[2 * k + 1]
            msgs = judge_messages("chain_sum", chain_sum_problem(expr), [a, b], instruct=True)
            prompts.append(
                tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            )
            meta.append((rubric_score(a, expr), rubric_score(b, expr)))
    if not prompts:
        return {"comparisons": 0}
    outs = [o[0] for o in sample(model, tokenizer, prompts, 1, max_new_tokens=96, batch_prompts=32)]
    picks = [parse_judgment(o) for o in outs]
    parsed = [p for p in picks if p is not None]
    decided = [(p, s) for p, s in zip(picks, meta, strict=True) if p in (0, 1) and s[0] != s[1]]
    agree = sum((p == 1) == (s[1] > s[0]) for p, s in decided)
    return {
        "comparisons": len(prompts),
        "parse_rate": round(len(parsed) / len(prompts), 4),
        "rubric_agreement": round(agree / len(decided), 4) if decided else None,
        "rubric_decided_pairs": len(decided),
        "example": outs[0],
    }


def _points(spec: str) -> list[tuple[int, int]]:
    """``"2-5x1-3"`` -> every (terms, digits) in the ranges."""
    t, d = spec.split("x")
    t0, t1 = (int(v) for v in t.split("-")) if "-" in t else (int(t), int(t))
    d0, d1 = (int(v) for v in d.split("-")) if "-" in d else (int(d), int(d))
    return [(a, b) for a in range(t0, t1 + 1) for b in range(d0, d1 + 1)]


def main(argv: list[str] | None = None) -> None:
    """CLI: print the report as JSON (and write it with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="saturated_dag/models/arith_base")
    parser.add_argument("--grid", default="2-5x1-3", help="terms x digits ranges, e.g. 2-5x1-3")
    parser.add_argument("--per-point", type=int, default=16)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--judge-pairs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", default=None, help="also write the report here")
    args = parser.parse_args(argv)
    report = evaluate(
        args.model,
        _points(args.grid),
        args.per_point,
        args.n,
        args.seed,
        args.judge_pairs,
        args.threads,
    )
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
