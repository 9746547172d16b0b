"""σ-RRHF as a ``transformers.Trainer`` subclass that owns its loss and logs its parts.

Each dataset row is a whole question (its completions and their scores), and the collator
expands rows into completions, so every completion of a question is in the same micro-batch
whatever the device batch size: the rank loss always sees complete groups. The Trainer's
``per_device_train_batch_size`` therefore counts questions (``rrhf_questions_per_device``
turns the profile's completions into questions).

The loss of an optimizer step is the mean over that step's questions of
λ·L_rank(q) + L_ft(q), also under gradient accumulation: ``get_batch_samples`` counts the
questions of all micro-batches of the step, each micro-batch's loss is its questions' sum
divided by that count, and ``loss_is_scaled_for_ga`` tells ``Trainer.training_step`` not to
divide again by the number of micro-batches (transformers 5 divides a custom loss by it
unless told so). The sum of the micro-batch gradients is then exactly the gradient of the
step's mean, even when the last micro-batch holds fewer questions.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import Trainer, TrainingArguments

from saturated_dag.training.losses import RrhfLossConfig, rrhf_loss, sequence_logprobs


@dataclass
class RrhfConfig(TrainingArguments):
    """Configuration class for ``RrhfTrainer``, shaped like TRL's ``DPOConfig``: the Trainer's
    arguments plus σ-RRHF's own, each with its help text, validated in ``__post_init__``.

    The one carrier of σ-RRHF's settings from the profile (``training.rrhf_*``, built by
    ``training.train.trainer_config``) to the loss: the trainer reads ``self.args``.
    ``per_device_train_batch_size`` counts questions (``rrhf_questions_per_device``).
    """

    rank_weight: float = field(default=0.1, metadata={
        "help": "λ, the weight of the rank loss (the paper's σ-RRHF runs use 0.1); 0 leaves "
                "the SFT term alone, which is RAFT (App. C.2)."})
    use_sft: bool = field(default=True, metadata={
        "help": "Add the SFT term −log π(y_best | x); False is Table 8's \"no SFT loss\"."})
    hinge: bool = field(default=True, metadata={
        "help": "Hinge the log-probability gaps, max(0, p_i − p_j); False is Table 8's \"no "
                "hinge\" (the raw gaps are summed)."})
    logistic_weight: bool = field(default=True, metadata={
        "help": "Weight each pair by σ(r_j − r_i) of the score gap; False is Table 8's \"no "
                "logistic weighting\" (every ordered pair weighs 1)."})
    sft_token_mean: bool = field(default=True, metadata={
        "help": "The SFT term as the mean token NLL of y_best (RRHF's and the authors' code); "
                "False: the sequence's summed NLL, as the paper's equation writes it."})
    max_length: int = field(default=2048, metadata={
        "help": "Prompt plus completion tokens kept per sequence (longer ones are cut)."})

    def __post_init__(self) -> None:
        if self.rank_weight < 0:
            raise ValueError(f"rank_weight must be >= 0, got {self.rank_weight}")
        if self.rank_weight == 0 and not self.use_sft:
            raise ValueError("rank_weight 0 without the SFT term trains nothing: its loss and "
                             "gradient are exactly 0")
        if self.max_length < 1:
            raise ValueError(f"max_length must be >= 1, got {self.max_length}")
        super().__post_init__()

    @property
    def loss_config(self) -> RrhfLossConfig:
        """The loss function's switches (``losses.rrhf_loss``), read off these arguments."""
        return RrhfLossConfig(self.rank_weight, self.use_sft, self.hinge,
                              self.logistic_weight, self.sft_token_mean)


class GroupCollator:
    """Rows {prompt, completions, scores} -> padded completions with a completion mask."""

    def __init__(self, tokenizer: Any, max_length: int, add_special_tokens: bool):
        self.tokenizer = tokenizer
        self._encoded: dict[tuple[str, str], tuple[list[int], list[int]]] = {}
        self.max_length = max_length
        self.add_special_tokens = add_special_tokens
        if tokenizer.eos_token_id is None:
            raise ValueError("tokenizer has no EOS token: completions could not be terminated")

    def _encode(self, prompt: str, completion: str) -> tuple[list[int], list[int]]:
        key = (prompt, completion)
        if key not in self._encoded:  # tokenised once per dataset, not per batch and epoch
            self._encoded[key] = self._tokenise(prompt, completion)
        return self._encoded[key]

    def _tokenise(self, prompt: str, completion: str) -> tuple[list[int], list[int]]:
        p = self.tokenizer(prompt, add_special_tokens=self.add_special_tokens)["input_ids"]
        c = self.tokenizer(completion, add_special_tokens=False)["input_ids"]
        c = [*c, self.tokenizer.eos_token_id]
        ids = (p + c)[: self.max_length]
        mask = ([0] * len(p) + [1] * len(c))[: self.max_length]
        if not any(mask):
            raise ValueError(f"prompt of {len(p)} tokens leaves no completion token within "
                             f"max_length {self.max_length}")
        return ids, mask

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        seqs, masks, scores, groups = [], [], [], []
        for g, row in enumerate(rows):
            if len(row["completions"]) != len(row["scores"]):
                raise ValueError("each completion needs exactly one score")
            for completion, score in zip(row["completions"], row["scores"], strict=True):
                ids, mask = self._encode(row["prompt"], completion)
                seqs.append(ids)
                masks.append(mask)
                scores.append(float(score))
                groups.append(g)
        width = max(len(s) for s in seqs)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        return {
            "input_ids": torch.tensor([s + [pad] * (width - len(s)) for s in seqs]),
            "attention_mask": torch.tensor([[1] * len(s) + [0] * (width - len(s))
                                            for s in seqs]),
            "completion_mask": torch.tensor([m + [0] * (width - len(m)) for m in masks]),
            "scores": torch.tensor(scores, dtype=torch.float32),
            "group": torch.tensor(groups),
        }


def rrhf_questions_per_device(per_device_batch_size: int, largest_group: int) -> int:
    """Whole questions per forward pass: as many as fit in ``per_device_batch_size``
    completions, at least one (a question is never split, so one larger than the budget
    still goes through whole)."""
    if per_device_batch_size < 1 or largest_group < 1:
        raise ValueError(f"per_device_batch_size ({per_device_batch_size}) and the largest "
                         f"group ({largest_group}) must be positive")
    return max(1, per_device_batch_size // largest_group)


class RrhfTrainer(Trainer):
    """mean over questions of λ·Σ σ(r_j−r_i)·max(0, p_i−p_j) + (−log π(y_best|x)).

    Its settings are its arguments, an ``RrhfConfig`` (λ and the ablation switches of
    App. C.3); see the module docstring for how the mean is kept exact under gradient
    accumulation.
    """

    loss_is_scaled_for_ga = True  # compute_loss divides by the questions of the whole step

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if not isinstance(self.args, RrhfConfig):
            raise TypeError(f"RrhfTrainer needs an RrhfConfig as args, got "
                            f"{type(self.args).__name__}")
        self.loss_config = self.args.loss_config
        # logged parts: per-question sums and question counts since the last log
        self._metrics: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])

    def get_batch_samples(self, epoch_iterator: Any, num_batches: int, device: Any
                          ) -> tuple[list, Any]:
        """The step's micro-batches and its number of questions (the loss's divisor)."""
        batches, _ = super().get_batch_samples(epoch_iterator, num_batches, device)
        questions = sum(int(torch.unique(b["group"]).numel()) for b in batches)
        return batches, (questions or None)

    def compute_loss(self, model: Any, inputs: dict[str, torch.Tensor],
                     return_outputs: bool = False, num_items_in_batch: Any = None) -> Any:
        logits = model(input_ids=inputs["input_ids"],
                       attention_mask=inputs["attention_mask"]).logits
        # Position t predicts token t+1. Shifting the labels (not slicing the logits) keeps
        # the logits' gradient one tensor: a slice's backward would allocate a second one.
        labels = torch.nn.functional.pad(inputs["input_ids"][:, 1:], (0, 1), value=0)
        mask = torch.nn.functional.pad(inputs["completion_mask"][:, 1:], (0, 1), value=0)
        sums, counts = sequence_logprobs(logits, labels, mask)
        # num_items_in_batch: the questions of the whole optimizer step (get_batch_samples);
        # None outside the training loop, where this batch is the whole step.
        loss, parts = rrhf_loss(sums, counts, inputs["scores"].to(sums.dtype),
                                inputs["group"], self.loss_config,
                                questions=num_items_in_batch)
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"σ-RRHF loss is {loss.item()} at step {self.state.global_step} "
                f"(rank {parts['rank_loss']}, sft {parts['sft_loss']}): stopping")
        questions = int(torch.unique(inputs["group"]).numel())
        for key, value in parts.items():
            self._metrics[key][0] += value * questions
            self._metrics[key][1] += questions
        return (loss, logits) if return_outputs else loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Adds rank_loss and sft_loss: per-question means since the last log."""
        for key, (total, questions) in self._metrics.items():
            if questions:
                logs[key] = total / questions
        self._metrics.clear()
        super().log(logs, start_time)
