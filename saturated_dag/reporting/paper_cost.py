"""What the paper's run costs: each stage's work at a profile's sizes, and an estimate of its
GPU-hours on one 80 GB H100.

Why this exists: nobody has run the ``paper`` profile on a GPU yet, and the selection
alone trains thousands of adapters. Before anyone books a machine, the work per stage
(sequences sampled, tokens read and generated, judge comparisons, training tokens) should be
known exactly where the profile decides it and stated as an assumption where the data decide it
(how many questions saturate, how long a completion is). So the counts here come from the same
functions the Dagster layer builds its graph from (``saturated_dag.experiments``: cells,
configurations, replicates, sweeps; ``scorers.tournament.expected_calls``: comparisons), and
everything else is a named field of ``Assumptions`` or ``Throughput``, never a number buried in
a formula.

The GPU-hours are an ESTIMATE, not a measurement: no GPU was available to measure one. Each
throughput is derived from a published figure (``SOURCES``: value, conditions, address) and the
way it was scaled is written next to it; the rest are labelled assumptions. Time is linear in
every throughput, so a measured figure can replace any of them (``Throughput.scaled``).

Pure: no Dagster import (``docs/paper-run.md``; ``scripts/paper_cost.py`` prints the table).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType

from saturated_dag.config import Profile
from saturated_dag.data.questions import can_train_split as _trainable
from saturated_dag.experiments import Adapter, experiment_plan
from saturated_dag.methods import label as method_label
from saturated_dag.scorers.tournament import expected_calls
from saturated_dag.tasks.chain_sum import grid_of
from saturated_dag.training.memory import QWEN3_1_7B, ModelShape

# --------------------------------------------------------------------------------------------
# What the paper reports (constants of the paper, cited where they are used)

TABLE6_D: tuple[tuple[int, ...], ...] = (
    (56, 50, 43, 32, 27),
    (47, 41, 34, 25, 18),
    (40, 33, 27, 19, 14),
    (33, 27, 20, 14, 9),
    (28, 23, 16, 11, 7),
)
"""App. A.2, Table 6(b): pass@1 (%, from k=8 samples of Qwen3-1.7B-Base) per chain-sum grid point
of D; rows are terms 6-10, columns digits 6-10."""
TABLE6_D_PRIME: tuple[tuple[int, ...], ...] = (
    (93, 91, 87, 82),
    (92, 87, 83, 79),
    (86, 81, 75, 68),
    (76, 70, 63, 56),
)
"""App. A.2, Table 6(a): the same for D_prime (terms and digits 3-6; the 6/6 grid point is not
in D_prime)."""
GSM8K_SATURATED = 2302
"""Sec. 4.3: |Q_easy| = 2,302 GSM8K questions with p-hat = 1 (Qwen3-1.7B-Base)."""
GSM8K_TEST = 1319
"""App. B.1, Table 4: GSM8K is evaluated on its 1,319 test questions."""
GSM8K_TRAIN = 7473
"""Lines of GSM8K's train.jsonl (Cobbe et al., 2021; ../shared/data/gsm8k/train.jsonl)."""
CHAIN_SUM_EVAL_ROWS = 200
"""App. B.1, Table 4: the chain-sum eval set (hannoh/chainsum_eval) has 200 questions."""


def table6_pass_rate(terms: int, digits: int) -> float:
    """The grid point's pass@1 from Table 6 as a fraction; one outside both tables is an error."""
    if 6 <= terms <= 10 and 6 <= digits <= 10:
        return TABLE6_D[terms - 6][digits - 6] / 100
    if 3 <= terms <= 6 and 3 <= digits <= 6:
        return TABLE6_D_PRIME[terms - 3][digits - 3] / 100
    raise ValueError(f"Table 6 has no pass@1 for {terms} terms x {digits} digits")


# --------------------------------------------------------------------------------------------
# Assumptions about the data (what the profile cannot decide)


@dataclass(frozen=True)
class Lengths:
    """Mean tokens of one population of questions: the prompt the policy reads and one sampled
    completion."""

    prompt: float
    completion: float


POPULATIONS = ("pool", "strict_pool", "saturated", "strict_saturated", "hard", "validation",
               "eval")
"""The populations whose lengths a task states: D (or GSM8K train), D_prime, the three training
splits, the validation set and the eval set."""


@dataclass(frozen=True)
class TaskAssumptions:
    """One task's split sizes and lengths.

    ``hard`` counts the hard questions (p-hat <= 1/4) with at least one correct completion: the
    ones scored and trained on (App. C.1 drops pass@8 = 0); ``hard_correct`` their correct
    completions (the hard SFT set). ``judge_overhead`` is the judge prompt's tokens per
    comparison beyond the problem and the two solutions that prefix caching cannot share (the
    instruction and few-shot text before them is one shared prefix).
    """

    saturated: int
    strict_saturated: int
    hard: int
    hard_correct: int
    lengths: Mapping[str, Lengths]
    self_judge_output: float
    strong_judge_output: float
    judge_overhead: float = 20.0
    basis: str = ""

    def __post_init__(self) -> None:
        missing = set(POPULATIONS) - set(self.lengths)
        if missing:
            raise ValueError(f"lengths lack {sorted(missing)}")
        object.__setattr__(self, "lengths", MappingProxyType(dict(self.lengths)))

    def length(self, population: str) -> Lengths:
        return self.lengths[population]


@dataclass(frozen=True)
class Assumptions:
    """Everything about the data the cost depends on and the profile does not decide."""

    chain_sum: TaskAssumptions
    gsm8k: TaskAssumptions
    gsm8k_train: int = GSM8K_TRAIN
    gsm8k_test: int = GSM8K_TEST
    chain_sum_eval_rows: int = CHAIN_SUM_EVAL_ROWS
    check_tokens: int = 32
    """Tokens each adapter's load check generates (assets/adapters.py: greedy, 32 tokens)."""

    def task(self, name: str) -> TaskAssumptions:
        return {"chain_sum": self.chain_sum, "gsm8k": self.gsm8k}[name]


def chain_sum_prompt_tokens(terms: int, digits: int) -> float:
    """ASSUMPTION: the policy prompt (tasks/prompts.py) in Qwen3 tokens.

    Qwen's tokenizer writes every digit as its own token; the fixed text around the expression
    (``Compute the following step by step:`` ... ``for example \\boxed{42}.``) is taken as 33
    tokens, each operand as its digits plus the operator or space before it."""
    return 33 + terms * (digits + 1)


def chain_sum_completion_tokens(terms: int, digits: int) -> float:
    """ASSUMPTION: one completion in Qwen3 tokens, modelled on the paper's example (App. A.4,
    Completion B: 4 terms, 3 digits, about 117 tokens at one token per digit).

    It restates the expression (``22 + terms * (digits + 1)``), writes one step per operator of
    about ``10 + 5 * digits`` tokens (a label and the three numbers of ``a - b = c``) and boxes
    an answer of ``digits + 1`` tokens. Rambling or truncated completions (up to 2,048 tokens)
    are not modelled: the real mean is likely higher."""
    return 22 + terms * (digits + 1) + (terms - 1) * (10 + 5 * digits) + digits + 1


def correct_of_n(k: int, p: float, n: int, rho: float = 0.0) -> float:
    """P(k of n samples correct) for a question drawn from a grid point of mean pass
    rate ``p``.

    ``rho`` = 0: every question has rate ``p`` (binomial). ``rho`` > 0: rates vary between the
    grid point's questions as Beta(a, b) with mean ``p`` and intra-question correlation ``rho`` =
    1 / (a + b + 1) (beta-binomial), which puts more questions at "all correct" and "none"."""
    if rho == 0:
        return math.comb(n, k) * p**k * (1 - p) ** (n - k)
    if not 0 < rho < 1:
        raise ValueError(f"rho must lie in [0, 1), got {rho}")
    scale = 1 / rho - 1
    a, b = p * scale, (1 - p) * scale

    def log_beta(x: float, y: float) -> float:
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)

    return math.comb(n, k) * math.exp(log_beta(a + k, b + n - k) - log_beta(a, b))


def chain_sum_assumptions(per_point: int = 3000, n: int = 8, rho: float = 0.0,
                          self_judge_output: float = 300,
                          strong_judge_output: float = 300) -> TaskAssumptions:
    """Chain-sum split sizes and lengths from Table 6's pass@1 per grid point, for
    ``per_point`` questions at each grid point of D and D_prime.

    The paper reports pass@1 per grid point but not the size of any split, so the sizes are an
    ASSUMPTION: by default (``rho`` = 0) every question of a grid point is solved with its
    pass@1, independently per sample (k correct of n is binomial). Difficulty does vary within a
    grid point, which makes "all n correct" more likely (p^n is convex), so this is a lower bound on
    the saturated splits and an upper bound on the hard one; ``rho`` > 0 spreads the rates
    (``correct_of_n``). The judge outputs are ASSUMPTIONS (the budget is 1,024 tokens). Lengths
    are weighted by the grid points' counts of each split.
    """
    d_points = [(t, d) for t in range(6, 11) for d in range(6, 11)]
    dp_points = [(t, d) for t in range(3, 7) for d in range(3, 7) if (t, d) != (6, 6)]
    hard_max = math.floor(n / 4)  # p-hat <= 1/4

    def weigh(points: Sequence[tuple[int, int]], weight) -> Lengths:
        w = [weight(t, d) for t, d in points]
        total = sum(w) or 1.0
        return Lengths(
            prompt=sum(wi * chain_sum_prompt_tokens(t, d) for wi, (t, d) in zip(w, points,
                                                                             strict=True)) / total,
            completion=sum(wi * chain_sum_completion_tokens(t, d)
                           for wi, (t, d) in zip(w, points, strict=True)) / total)

    def saturated(t: int, d: int) -> float:
        return per_point * correct_of_n(n, table6_pass_rate(t, d), n, rho)

    def hard(t: int, d: int) -> float:
        return per_point * sum(correct_of_n(k, table6_pass_rate(t, d), n, rho)
                              for k in range(1, hard_max + 1))

    def hard_correct(t: int, d: int) -> float:
        return per_point * sum(k * correct_of_n(k, table6_pass_rate(t, d), n, rho)
                              for k in range(1, hard_max + 1))

    uniform = weigh(d_points, lambda t, d: 1.0)
    return TaskAssumptions(
        saturated=round(sum(saturated(t, d) for t, d in d_points)),
        strict_saturated=round(sum(saturated(t, d) for t, d in dp_points)),
        hard=round(sum(hard(t, d) for t, d in d_points)),
        hard_correct=round(sum(hard_correct(t, d) for t, d in d_points)),
        lengths={"pool": uniform, "strict_pool": weigh(dp_points, lambda t, d: 1.0),
                 "saturated": weigh(d_points, saturated),
                 "strict_saturated": weigh(dp_points, saturated),
                 "hard": weigh(d_points, hard), "validation": uniform,
                 # the paper's eval set is harder than a uniform draw over D: D's mean is used
                 "eval": uniform},
        self_judge_output=self_judge_output, strong_judge_output=strong_judge_output,
        # the printed basis keeps "per cell" (docs/paper-run.md's table is its output)
        basis=(f"Table 6 pass@1 per cell, {per_point:,} questions per cell, k of n={n} correct "
               + ("binomial" if rho == 0 else f"beta-binomial, rho={rho}")))


def gsm8k_assumptions() -> TaskAssumptions:
    """GSM8K: the saturated count is the paper's (Sec. 4.3); the rest are ASSUMPTIONS.

    Prompt: the mean train question is 235 characters (measured on train.jsonl), taken at about
    4.3 characters per token (55 tokens) plus the 25-token boxed-answer instruction. Completion:
    250 tokens (GSM8K's reference solutions average 287 characters; a model's step-by-step
    answer is taken as about twice as long). Hard split: 700 questions with 1-2 correct of 8
    and 1,000 correct completions among them (the paper gives no GSM8K hard count). The
    instruct profile (``paper_instruct``) uses the same numbers: the paper gives none for it.
    """
    same = Lengths(prompt=80, completion=250)
    return TaskAssumptions(
        saturated=GSM8K_SATURATED, strict_saturated=0, hard=700, hard_correct=1000,
        lengths=dict.fromkeys(POPULATIONS, same), self_judge_output=300,
        strong_judge_output=300,
        basis="saturated: Sec. 4.3; hard and lengths: assumptions")


def paper_assumptions(rho: float = 0.0) -> Assumptions:
    """The defaults for the ``paper`` and ``paper_instruct`` profiles (3,000 questions per
    chain-sum grid point, n = 8); ``rho``: see ``correct_of_n``."""
    return Assumptions(chain_sum=chain_sum_assumptions(rho=rho), gsm8k=gsm8k_assumptions())


# --------------------------------------------------------------------------------------------
# Throughput (ESTIMATES from published figures)


@dataclass(frozen=True)
class Source:
    """A published figure the estimate rests on: what, where, under which conditions, and how
    it is used here."""

    figure: str
    value: str
    conditions: str
    url: str
    used: str


H100_BF16_DENSE_FLOPS = 989e12
"""NVIDIA H100 SXM: 1,979 BF16 Tensor-Core TFLOPS with 2:4 sparsity, 989 without."""
LLAMA3_MFU = 0.38
"""The Llama 3 Herd of Models, Table 4: 38-43% BF16 MFU on H100 (the lower end)."""
ML_ENERGY_QWEN3_8B = (512, 8535.0)
"""ML.ENERGY Leaderboard: Qwen3-8B, lm-arena-chat, 1x H100, vLLM, max_num_seqs 512: output
tokens/s."""
ML_ENERGY_QWEN3_30B_A3B: tuple[tuple[int, float], ...] = (
    (8, 611.3), (16, 902.1), (32, 1393.8), (64, 2163.9), (96, 2658.8))
"""ML.ENERGY Leaderboard: Qwen3-30B-A3B-Instruct-2507, lm-arena-chat, 1x H100, vLLM:
(max_num_seqs, output tokens/s)."""
VLLM_OVER_HF = 8.5
"""vLLM launch blog: 8.5x-15x the throughput of HF Transformers with three parallel samples."""
QWEN3_8B = ModelShape(layers=36, hidden=4096, intermediate=12288, heads=32, kv_heads=8,
                      head_dim=128, vocab=151_936, tied=False, qk_norm=True)
"""Qwen/Qwen3-8B (its config.json): the dense model ML.ENERGY measured, for scaling."""
QWEN3_30B_A3B_PARAMS = 30.5e9
QWEN3_30B_A3B_ACTIVE = 3.3e9
"""Qwen/Qwen3-30B-A3B's model card: 30.5B parameters, 3.3B activated per token."""
QWEN3_30B_A3B_KV_BYTES = 2 * 48 * 4 * 128 * 2
"""K and V of 48 layers x 4 KV heads x 128 in bfloat16: 96 KiB per token (its config)."""


def matmul_parameters(shape: ModelShape) -> float:
    """Weights a token multiplies through: every layer plus the output head (an untied input
    embedding is a lookup, not a matmul)."""
    return shape.parameters() - (0 if shape.tied else shape.vocab * shape.hidden)


SOURCES: tuple[Source, ...] = (
    Source("ML.ENERGY Leaderboard, Qwen3-8B (dense)", "8,535 output tokens/s",
           "1x H100 80GB HBM3, vLLM, bfloat16, lm-arena-chat prompts, max_num_seqs 512 "
           "(mean batch 474), mean output 645 tokens; steady state",
           "https://github.com/ml-energy/leaderboard/blob/0cd52dab897c5d91a45f4d413038f3b8b4251b0f"
           "/public/data/models/Qwen__Qwen3-8B__lm-arena-chat.json (https://ml.energy/leaderboard)",
           "policy decoding (Qwen3-1.7B): scaled by the ratio of matmul parameters per token, "
           "Qwen3-8B 7.57B / Qwen3-1.7B 1.72B = 4.40x; optimistic, since attention over the KV "
           "cache (36 vs 28 layers of 8 KV heads) shrinks only 1.3x"),
    Source("ML.ENERGY Leaderboard, Qwen3-30B-A3B-Instruct-2507 (MoE)",
           "611 / 902 / 1,394 / 2,164 / 2,659 output tokens/s at max_num_seqs 8 / 16 / 32 / 64 "
           "/ 96", "1x H100 80GB HBM3, vLLM, bfloat16, lm-arena-chat, mean output about 920 "
           "tokens; same architecture as Qwen3-30B-A3B",
           "https://github.com/ml-energy/leaderboard/blob/0cd52dab897c5d91a45f4d413038f3b8b4251b0f"
           "/public/data/models/Qwen__Qwen3-30B-A3B-Instruct-2507__lm-arena-chat.json",
           "strong-judge decoding: read off (linear between points) at the number of judge "
           "sequences the KV cache holds under the profile's gpu_memory_utilization"),
    Source("NVIDIA H100 SXM datasheet", "1,979 TFLOPS BF16 with sparsity (989 dense)",
           "H100 SXM5 80GB", "https://www.nvidia.com/en-us/data-center/h100/",
           "peak for every FLOP-based rate (prefill, teacher forcing, training)"),
    Source("The Llama 3 Herd of Models, Table 4", "38-43% BF16 MFU",
           "Llama 3 405B pre-training on 8,192-16,384 H100s", "https://arxiv.org/abs/2407.21783",
           "vLLM prefill at 38% (large batched GEMMs); the ceiling the training and "
           "teacher-forcing assumptions derate"),
    Source("vLLM launch blog", "8.5x-15x the throughput of HF Transformers",
           "three parallel samples per request; LLaMA-7B on A10G, LLaMA-13B on A100-40GB, "
           "ShareGPT lengths", "https://blog.vllm.ai/2023/06/20/vllm.html",
           "validation sampling inside the training process (transformers generate): vLLM's "
           "decode rate / 8.5 (the favourable end for HF)"),
)


@dataclass(frozen=True)
class Throughput:
    """Rates on one H100 80GB. ESTIMATES (``default_throughput`` says where each comes from).

    ``strong_decode`` maps judge sequences in flight to output tokens/s; the rest are tokens/s,
    except ``training_flops`` (achieved FLOP/s) and the memory fields (bytes).
    """

    policy_decode: float
    policy_prefill: float
    hf_generate: float
    teacher_forced: float
    training_flops: float
    strong_decode: tuple[tuple[int, float], ...]
    strong_prefill: float
    policy_matmul_params: float = float(matmul_parameters(QWEN3_1_7B))
    device_bytes: float = 80e9
    strong_weight_bytes: float = QWEN3_30B_A3B_PARAMS * 2
    strong_kv_bytes_per_token: float = QWEN3_30B_A3B_KV_BYTES
    engine_reserve_bytes: float = 2e9
    assumptions: tuple[str, ...] = field(default=(), compare=False)
    training_by: tuple[tuple[str, str, float], ...] = ()
    """(task, method, achieved FLOP/s) where a rate was measured for that task's training
    by that method (``measured_throughput``); ``training_flops`` elsewhere."""
    hf_generate_by: tuple[tuple[str, float], ...] = ()
    """(task, tokens/s) of validation sampling measured at that task's lengths."""
    teacher_forced_by: tuple[tuple[str, float], ...] = ()
    """(task, tokens/s) of the teacher-forced entropy pass measured at that task's lengths."""

    RATES = ("policy_decode", "policy_prefill", "hf_generate", "teacher_forced",
             "training_flops", "strong_prefill")

    def scaled(self, factor: float) -> Throughput:
        """Every rate times ``factor`` (memory and model sizes unchanged): GPU-hours divide by
        it."""
        return replace(self, **{k: getattr(self, k) * factor for k in self.RATES},
                       strong_decode=tuple((c, v * factor) for c, v in self.strong_decode),
                       training_by=tuple((t, m, v * factor) for t, m, v in self.training_by),
                       hf_generate_by=tuple((t, v * factor) for t, v in self.hf_generate_by),
                       teacher_forced_by=tuple((t, v * factor)
                                               for t, v in self.teacher_forced_by))

    def training_rate(self, task: str, method: str) -> float:
        """Achieved FLOP/s of ``method``'s training on ``task``: measured if given, else the
        shared ``training_flops``."""
        return next((v for t, m, v in self.training_by if (t, m) == (task, method)),
                    self.training_flops)

    def hf_generate_rate(self, task: str) -> float:
        """Validation sampling's tokens/s on ``task``: measured if given, else
        ``hf_generate``."""
        return dict(self.hf_generate_by).get(task, self.hf_generate)

    def teacher_forced_rate(self, task: str) -> float:
        """The teacher-forced entropy pass's tokens/s on ``task``: measured if given, else
        ``teacher_forced``."""
        return dict(self.teacher_forced_by).get(task, self.teacher_forced)

    def strong_concurrency(self, tokens_per_sequence: float, gpu_memory_utilization: float
                           ) -> int:
        """Judge sequences whose KV cache fits beside the judge's weights in the share of the
        device vLLM may take (at least 1)."""
        free = (gpu_memory_utilization * self.device_bytes - self.strong_weight_bytes
                - self.engine_reserve_bytes)
        return max(1, int(free // (self.strong_kv_bytes_per_token * tokens_per_sequence)))

    def strong_rate(self, concurrency: int) -> float:
        """Output tokens/s at ``concurrency`` sequences: linear between measured points, the
        first point's rate per sequence below them, the last point's rate above them."""
        points = sorted(self.strong_decode)
        if concurrency <= points[0][0]:
            return points[0][1] * concurrency / points[0][0]
        for (c0, v0), (c1, v1) in itertools.pairwise(points):
            if concurrency <= c1:
                return v0 + (v1 - v0) * (concurrency - c0) / (c1 - c0)
        return points[-1][1]


TRAINING_MFU = 0.20
"""ASSUMPTION: about half the Llama 3 figure: micro-batches of 8 sequences of a few hundred
tokens, padded to the longest, through transformers' Trainer with unfused LoRA, norm and
attention kernels."""
TEACHER_FORCED_MFU = 0.10
"""ASSUMPTION: one completion per forward (entropy_scores.TeacherForcedEntropy), a few hundred
tokens: launch-bound, far from the batched rate."""


def default_throughput() -> Throughput:
    """The ESTIMATE used in docs/paper-run.md, from ``SOURCES`` and the two MFU assumptions."""
    policy = float(matmul_parameters(QWEN3_1_7B))
    ratio = matmul_parameters(QWEN3_8B) / policy
    decode = ML_ENERGY_QWEN3_8B[1] * ratio
    prefill_flops = LLAMA3_MFU * H100_BF16_DENSE_FLOPS
    return Throughput(
        policy_decode=decode,
        policy_prefill=prefill_flops / (2 * policy),
        hf_generate=decode / VLLM_OVER_HF,
        teacher_forced=TEACHER_FORCED_MFU * H100_BF16_DENSE_FLOPS / (2 * policy),
        training_flops=TRAINING_MFU * H100_BF16_DENSE_FLOPS,
        strong_decode=ML_ENERGY_QWEN3_30B_A3B,
        strong_prefill=prefill_flops / (2 * QWEN3_30B_A3B_ACTIVE),
        policy_matmul_params=policy,
        assumptions=(
            f"training: {TRAINING_MFU:.0%} MFU (assumption; Llama 3 reached "
            f"{LLAMA3_MFU:.0%}-43% on far larger batches)",
            f"teacher-forced entropy: {TEACHER_FORCED_MFU:.0%} MFU, one completion per forward "
            "(assumption)",
            "strong-judge KV cache: the profile's gpu_memory_utilization x 80e9 bytes, less "
            "61 GB of weights (30.5B x 2 bytes) and a 2 GB engine reserve (assumption), at "
            "96 KiB per token",
            "eval reports sample through vLLM LoRA requests at the base model's rate (LoRA's "
            "overhead is not modelled)",
        ))


# --------------------------------------------------------------------------------------------
# The work per stage


@dataclass(frozen=True)
class StageCost:
    """One row of the table: a stage of one task.

    ``prompt_tokens`` are the tokens an engine reads without generating them: prompts (once per
    question when its n samples share them, unique parts only where a judge's instructions are
    a cached prefix) and, for teacher-forced entropy, the completions themselves.
    ``training_tokens`` = sequences x epochs x tokens, summed over the stage's adapters.
    """

    task: str
    stage: str
    sequences: int = 0
    prompt_tokens: float = 0.0
    generated_tokens: float = 0.0
    judge_comparisons: int = 0
    training_tokens: float = 0.0
    gpu_hours: float = 0.0
    adapters: int = 0


SPLITS_MODELLED = ("saturated", "strict_saturated", "hard")


def task_adapters(profile: Profile, task: str) -> list[Adapter]:
    """Every adapter the task trains: each cell's configurations x training seeds, each
    once (the task's plan, as the graph builds its adapter assets)."""
    return experiment_plan(profile)[task].adapters


def pool_sizes(profile: Profile, task: str, assumptions: Assumptions) -> dict[str, int]:
    """Questions sampled per pool: D and D_prime of chain sum, GSM8K's train lines less the held-out
    validation questions (and ``train_limit``)."""
    if task == "chain_sum":
        cfg = profile.chain_sum
        sizes = {"pool": len(grid_of(cfg.grid)) * cfg.questions_per_cell}
        if cfg.strict_grid is not None:
            sizes["strict_pool"] = len(grid_of(cfg.strict_grid)) * cfg.strict_questions_per_cell
        return sizes
    available = assumptions.gsm8k_train - profile.training.gsm8k_validation_questions
    limit = profile.gsm8k.train_limit
    return {"pool": available if limit is None else min(limit, available)}


def eval_size(profile: Profile, task: str, assumptions: Assumptions) -> int:
    """Questions of the eval set (tasks.eval_questions' rule, counted without loading it)."""
    if task == "gsm8k":
        limit = profile.gsm8k.test_limit
        return assumptions.gsm8k_test if limit is None else min(limit, assumptions.gsm8k_test)
    cfg = profile.chain_sum
    if cfg.eval_source is not None:
        return cfg.eval_limit or assumptions.chain_sum_eval_rows
    grid = cfg.eval_grid if cfg.eval_grid is not None else cfg.grid
    return len(grid_of(grid)) * cfg.eval_questions_per_cell


def validation_size(profile: Profile, task: str) -> int:
    """Questions of the checkpoint-selection set (tasks.validation_questions' rule)."""
    if task == "gsm8k":
        return profile.training.gsm8k_validation_questions
    return len(grid_of(profile.chain_sum.grid)) * profile.training.validation_questions_per_cell


def split_questions(task: TaskAssumptions, split: str) -> int:
    return {"saturated": task.saturated, "strict_saturated": task.strict_saturated,
            "hard": task.hard}[split]


def scored_splits(profile: Profile, task: str) -> list[str]:
    """Splits whose completions every scorer scores (scoring.correct_splits, then
    all_completion_splits), for the task's pools."""
    scoring = profile.scoring
    splits = [*scoring.correct_splits, *scoring.all_completion_splits]
    unknown = [s for s in splits if s not in SPLITS_MODELLED]
    if unknown:
        raise ValueError(f"scoring of splits {unknown} is not modelled (only "
                         f"{list(SPLITS_MODELLED)})")
    if "hard" in scoring.correct_splits:
        raise ValueError("hard in scoring.correct_splits (only its 1-2 correct completions "
                         "scored) is not modelled")
    return [s for s in splits if _trainable(profile, task, s)]


def scored_per_question(profile: Profile) -> int:
    """Completions scored per question: all n of a saturated question are correct (p-hat = 1);
    a hard question with a correct one has all n scored (all_completion_splits)."""
    return profile.sampling.n


def _check_sizes(profile: Profile, task: str, pools: dict[str, int], data: TaskAssumptions
                 ) -> None:
    """Split sizes are counts of pool questions: one larger than its pool is a mistake."""
    d = pools["pool"]
    if data.saturated + data.hard > d:
        raise ValueError(f"{task}: saturated ({data.saturated}) + hard ({data.hard}) questions "
                         f"exceed the pool's {d}")
    strict_pool = pools.get("strict_pool", 0)
    if _trainable(profile, task, "strict_saturated") and data.strict_saturated > strict_pool:
        raise ValueError(f"{task}: {data.strict_saturated} strict_saturated questions exceed "
                         f"D_prime ({strict_pool})")
    n = profile.sampling.n
    if not data.hard <= data.hard_correct <= data.hard * max(1, math.floor(n / 4)):
        raise ValueError(f"{task}: hard_correct ({data.hard_correct}) must lie between hard "
                         f"({data.hard}) and hard x floor(n/4)")


def training_examples(profile: Profile, data: TaskAssumptions, exp: Adapter
                      ) -> tuple[int, float]:
    """(sequences per epoch, tokens per epoch) of one adapter's training set.

    Saturated splits (all n correct): SFT every correct completion (n per question), DPO one
    pair (chosen and rejected: 2 sequences), σ-RRHF one group of n, RAFT the argmax. Hard split:
    SFT its correct completions, DPO one correct-vs-incorrect pair, σ-RRHF all n (ranked by the
    self-judge, correct first), RAFT the argmax.
    """
    n = profile.sampling.n
    questions = split_questions(data, exp.split)
    lengths = data.length(exp.split)
    per_sequence = lengths.prompt + lengths.completion
    if exp.method == "sft":
        sequences = data.hard_correct if exp.split == "hard" else questions * n
    elif exp.method == "dpo":
        sequences = 2 * questions
    elif exp.method == "rrhf":
        sequences = questions * n
    elif exp.method == "raft":
        sequences = questions
    else:
        raise ValueError(f"unknown method {exp.method!r}")
    return sequences, sequences * per_sequence


def training_flops_per_token(profile: Profile, method: str, params: float) -> float:
    """Matmul FLOPs per training token: forward 2N, backward to the activations 2N (frozen
    weights need no weight gradient; LoRA's are negligible), the recomputed forward 2N under
    gradient checkpointing; DPO adds the reference forward (adapter disabled) 2N."""
    flops = (6 if profile.training.gradient_checkpointing else 4) * params
    return flops + (2 * params if method == "dpo" else 0)


def judge_prompt_tokens(data: TaskAssumptions, split: str) -> float:
    """A comparison's prompt tokens beyond the shared, cached instructions: the problem, two
    solutions and the template's per-comparison text."""
    lengths = data.length(split)
    return lengths.prompt + 2 * lengths.completion + data.judge_overhead


def strong_in_flight(profile: Profile, data: TaskAssumptions, split: str,
                     rate: Throughput) -> int:
    """Strong-judge sequences of ``split`` that fit the KV cache at once (the shared prefix
    is cached once, so each sequence holds its own prompt part and its output)."""
    return rate.strong_concurrency(judge_prompt_tokens(data, split) + data.strong_judge_output,
                                   profile.judges.strong.vllm.gpu_memory_utilization)




def _hours(seconds: float) -> float:
    return seconds / 3600


def stage_costs(profile: Profile, assumptions: Assumptions | None = None,
                throughput: Throughput | None = None) -> list[StageCost]:
    """Each stage's work for every task of ``profile`` and its estimated GPU-hours.

    Rows per task: pool sampling (per pool), self-judge comparisons, strong-judge comparisons,
    teacher-forced entropy, training per method (its adapters: each cell's
    configurations x training seeds, sweeps included), validation sampling after each epoch
    (epoch selection), adapter load checks, eval reports (the base model and each cell's chosen
    configuration x training seeds, x eval replicates). Random scores, datasets and tables are
    CPU work and have no row.
    """
    data_all = assumptions or paper_assumptions()
    rate = throughput or default_throughput()
    n = profile.sampling.n
    vllm = profile.policy.backend == "vllm"
    rows: list[StageCost] = []

    for task in profile.tasks:
        data = data_all.task(task)
        decode = rate.policy_decode if vllm else rate.hf_generate_rate(task)

        def sample_hours(prompt: float, generated: float, decode: float = decode) -> float:
            return _hours(generated / decode + prompt / rate.policy_prefill)

        pools = pool_sizes(profile, task, data_all)
        _check_sizes(profile, task, pools, data)
        names = {"pool": "D" if task == "chain_sum" else "train", "strict_pool": "D_prime"}
        for pool, questions in pools.items():
            lengths = data.length(pool)
            prompt, generated = questions * lengths.prompt, questions * n * lengths.completion
            rows.append(StageCost(task, f"pool sampling: {names[pool]}", questions * n, prompt,
                                  generated, gpu_hours=sample_hours(prompt, generated)))

        splits = scored_splits(profile, task)

        def judge_prompt(split: str, data: TaskAssumptions = data) -> float:
            return judge_prompt_tokens(data, split)

        per_split = {s: split_questions(data, s) * expected_calls(
            [scored_per_question(profile)], profile.scoring.both_orders) for s in splits}
        comparisons = sum(per_split.values())
        judge_read = sum(c * judge_prompt(s) for s, c in per_split.items())
        self_out = comparisons * data.self_judge_output
        rows.append(StageCost(task, "self-judge comparisons", comparisons, judge_read, self_out,
                              comparisons, gpu_hours=sample_hours(judge_read, self_out)))

        strong = profile.judges.strong
        if strong.kind == "llm":
            strong_out = comparisons * data.strong_judge_output
            seconds = judge_read / rate.strong_prefill
            for s, c in per_split.items():
                in_flight = strong_in_flight(profile, data, s, rate)
                seconds += c * data.strong_judge_output / rate.strong_rate(in_flight)
            rows.append(StageCost(task, "strong-judge comparisons", comparisons, judge_read,
                                  strong_out, comparisons, gpu_hours=_hours(seconds)))
        else:
            rows.append(StageCost(task, "strong-judge comparisons (rubric, CPU)", comparisons,
                                  judge_comparisons=comparisons))

        if vllm or not profile.scoring.entropy_include_eos:
            selected = sum(split_questions(data, s) * scored_per_question(profile)
                           for s in splits)
            read = sum(split_questions(data, s) * scored_per_question(profile)
                       * (data.length(s).prompt + data.length(s).completion) for s in splits)
            rows.append(StageCost(task, "teacher-forced entropy", selected, read,
                                  gpu_hours=_hours(read / rate.teacher_forced_rate(task))))

        adapters = task_adapters(profile, task)
        val_questions = validation_size(profile, task)
        val = data.length("validation")
        val_passes = 0
        by_method: dict[str, list[Adapter]] = {}
        for exp in adapters:
            by_method.setdefault(exp.method, []).append(exp)
        for method, exps in by_method.items():
            sequences = tokens = flops = 0.0
            for exp in exps:
                epochs = exp.training(profile.training).epochs
                val_passes += epochs
                per_epoch_seq, per_epoch_tokens = training_examples(profile, data, exp)
                sequences += per_epoch_seq * epochs
                tokens += per_epoch_tokens * epochs
                flops += per_epoch_tokens * epochs * training_flops_per_token(
                    profile, method, rate.policy_matmul_params)
            rows.append(StageCost(task, f"training: {method_label(method)}", int(sequences),
                                  training_tokens=tokens,
                                  gpu_hours=_hours(flops / rate.training_rate(task, method)),
                                  adapters=len(exps)))
        val_sequences = val_passes * val_questions * n
        val_prompt = val_passes * val_questions * val.prompt
        val_generated = val_sequences * val.completion
        rows.append(StageCost(task, "validation sampling (each epoch)", val_sequences,
                              val_prompt, val_generated,
                              gpu_hours=_hours(val_generated / rate.hf_generate_rate(task)
                                               + val_prompt / rate.policy_prefill)))

        check_prompt = len(adapters) * val.prompt
        check_generated = len(adapters) * data_all.check_tokens
        rows.append(StageCost(task, "adapter load checks", len(adapters), check_prompt,
                              check_generated,
                              gpu_hours=sample_hours(check_prompt, check_generated)))

        cells = experiment_plan(profile)[task].cells
        targets = 1 + sum(c.seeds or profile.training.replicates for c in cells)
        questions = eval_size(profile, task, data_all) * profile.evaluation.replicates
        ev = data.length("eval")
        prompt, generated = targets * questions * ev.prompt, targets * questions * n * ev.completion
        rows.append(StageCost(task, f"eval reports: base + {len(cells)} cells",
                              targets * questions * n, prompt, generated,
                              gpu_hours=sample_hours(prompt, generated)))
    return rows


def training_lengths(profile: Profile, assumptions: Assumptions | None = None
                     ) -> dict[tuple[str, str], Lengths]:
    """Mean prompt and completion tokens of the sequences each (task, method) trains on, over
    all its adapters and epochs, as ``stage_costs`` counts them.

    Why: the GPU check (``benchmarks/gpu_check.py``) times one optimizer step per method at
    the lengths the cost table assumes, so a measured rate prices the tokens it was measured
    at."""
    data_all = assumptions or paper_assumptions()
    sums: dict[tuple[str, str], list[float]] = {}
    for task in profile.tasks:
        data = data_all.task(task)
        for exp in task_adapters(profile, task):
            sequences, _ = training_examples(profile, data, exp)
            weight = sequences * exp.training(profile.training).epochs
            lengths = data.length(exp.split)
            acc = sums.setdefault((task, exp.method), [0.0, 0.0, 0.0])
            acc[0] += weight
            acc[1] += weight * lengths.prompt
            acc[2] += weight * lengths.completion
    return {key: Lengths(prompt=p / w, completion=c / w) for key, (w, p, c) in sums.items()
            if w}


def entropy_lengths(profile: Profile, assumptions: Assumptions | None = None
                    ) -> dict[str, Lengths]:
    """Mean prompt and completion tokens of the completions the teacher-forced entropy pass
    reads, per task (the scored splits, weighted by their completions)."""
    data_all = assumptions or paper_assumptions()
    out: dict[str, Lengths] = {}
    for task in profile.tasks:
        data = data_all.task(task)
        weights = {s: split_questions(data, s) for s in scored_splits(profile, task)}
        whole = sum(weights.values())
        if whole:
            out[task] = Lengths(
                prompt=sum(w * data.length(s).prompt for s, w in weights.items()) / whole,
                completion=sum(w * data.length(s).completion for s, w in weights.items())
                / whole)
    return out


# --------------------------------------------------------------------------------------------
# Measured rates (the GPU check's JSON)

GPU_CHECK_KIND = "gpu_check"
"""The ``kind`` of the JSON ``benchmarks/gpu_check.py`` writes."""


def measured_throughput(report: Mapping[str, object], profile: Profile,
                        base: Throughput | None = None) -> tuple[Throughput, dict[str, str]]:
    """``base`` (the ESTIMATE by default) with each rate the GPU check measured put in its
    place, and for each rate put in, a label saying where and when it was measured.

    Training: per task and method, the tokens/s measured with the profile's gradient
    checkpointing, turned into achieved FLOP/s by this module's FLOP count
    (``training_flops_per_token``), so a training row's hours are its tokens over the
    measured tokens/s. Validation sampling: the decoder's generated tokens/s per task (its
    time includes the prompts' prefill, which the row still adds at the vLLM prefill rate: a
    few tenths of a percent of the row). Teacher-forced entropy: tokens read per second per
    task. The check does not run vLLM, so policy decoding and prefill and the strong judge stay
    ESTIMATES.

    Refused: another kind of JSON, and a check at other shapes than the profile's model (a
    dry run's toy model prices nothing).
    """
    rate = base or default_throughput()
    if report.get("kind") != GPU_CHECK_KIND:
        raise ValueError(f"not a GPU check's JSON (kind {report.get('kind')!r}, expected "
                         f"{GPU_CHECK_KIND!r})")
    model = dict(report.get("shapes", {}).get("model", {}))  # type: ignore[union-attr]
    expected = {"layers": QWEN3_1_7B.layers, "hidden": QWEN3_1_7B.hidden,
                "intermediate": QWEN3_1_7B.intermediate, "heads": QWEN3_1_7B.heads,
                "kv_heads": QWEN3_1_7B.kv_heads, "head_dim": QWEN3_1_7B.head_dim,
                "vocab": QWEN3_1_7B.vocab}
    differs = {k: model.get(k) for k, v in expected.items() if model.get(k) != v}
    if differs:
        raise ValueError(f"the GPU check ran other shapes than Qwen3-1.7B's ({differs}): its "
                         "rates do not price the paper profile")
    device = report.get("device", {}).get("name", "unknown device")  # type: ignore[union-attr]
    label = f"MEASURED on {device}, {str(report.get('date', ''))[:10]}"
    measured: dict[str, str] = {}
    checkpointing = profile.training.gradient_checkpointing
    training: list[tuple[str, str, float]] = []
    for row in report.get("training", []):  # type: ignore[union-attr]
        if row.get("error") or row.get("checkpointing") != checkpointing:
            continue
        if row["task"] not in profile.tasks:
            continue
        flops = training_flops_per_token(profile, row["method"], rate.policy_matmul_params)
        training.append((row["task"], row["method"], float(row["tokens_per_s"]) * flops))
        measured[f"training {row['task']} {row['method']}"] = label
    hf: list[tuple[str, float]] = []
    for row in report.get("sampling", []):  # type: ignore[union-attr]
        if row.get("error") or row.get("path") != "decoder" or row["task"] not in profile.tasks:
            continue
        hf.append((row["task"], float(row["tokens_per_s"])))
        measured[f"validation sampling {row['task']}"] = label
    forced: list[tuple[str, float]] = []
    for row in report.get("entropy", []):  # type: ignore[union-attr]
        if row.get("error") or row["task"] not in profile.tasks:
            continue
        forced.append((row["task"], float(row["tokens_per_s"])))
        measured[f"teacher-forced entropy {row['task']}"] = label
    return (replace(rate, training_by=tuple(training), hf_generate_by=tuple(hf),
                    teacher_forced_by=tuple(forced)), measured)


def total(rows: Sequence[StageCost], task: str = "all") -> StageCost:
    """The sum of ``rows``."""
    sums = {f.name: sum(getattr(r, f.name) for r in rows) for f in fields(StageCost)
            if f.name not in ("task", "stage")}
    return StageCost(task, "total", **sums)


def _count(value: float) -> str:
    return f"{round(value):,}"


def _tokens(value: float) -> str:
    if value == 0:
        return "0"
    if value >= 1e9:
        return f"{value / 1e9:,.2f}B"
    if value >= 1e6:
        return f"{value / 1e6:,.1f}M"
    return f"{value / 1e3:,.1f}K"


def markdown_table(rows: Sequence[StageCost], hours: str = "GPU-hours (estimate)") -> str:
    """The rows (and a total) as a Markdown table; ``hours`` heads the last column."""
    head = ("| task | stage | adapters | sequences | prompt tokens | generated tokens "
            f"| judge comparisons | training tokens | {hours} |")
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in [*rows, total(rows)]:
        bold = "**" if r.stage == "total" else ""
        lines.append(
            f"| {r.task} | {bold}{r.stage}{bold} | {_count(r.adapters) if r.adapters else ''} "
            f"| {_count(r.sequences)} | {_tokens(r.prompt_tokens)} "
            f"| {_tokens(r.generated_tokens)} | {_count(r.judge_comparisons)} "
            f"| {_tokens(r.training_tokens)} | {bold}{r.gpu_hours:,.1f}{bold} |")
    return "\n".join(lines)
