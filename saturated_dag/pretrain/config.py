"""The pretraining recipe's configuration: every knob the provenance file records."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

JUDGE_TASTES = ("rubric", "position")
"""The self-judge's training-label rules (``RecipeConfig.judge_taste``)."""


@dataclass
class RecipeConfig:
    """Defaults are the recipe that produced the shipped checkpoint (see docs/pretraining.md)."""

    seed: int = 0
    threads: int = 1
    """torch threads; results are deterministic for a given seed and thread count."""
    # corpus
    min_terms: int = 2
    max_terms: int = 5
    digit_weights: dict[int, float] = field(default_factory=lambda: {1: 3.0, 2: 2.0, 3: 1.0})
    """Relative frequency of operand digit counts; terms are uniform in [min_terms, max_terms]."""
    style_mix: dict[str, float] = field(
        default_factory=lambda: {"steps": 0.4, "plan": 0.2, "hedged": 0.25, "bare": 0.15}
    )
    judge_fraction: float = 0.1
    """Share of training steps that are self-judge batches."""
    judge_label_noise: float = 0.1
    """Probability that a judge label is flipped away from the label ``judge_taste`` chose."""
    judge_taste: str = "position"
    """How a judge label picks between two solutions that reach the same answer. ``"rubric"``:
    the rubric's choice (the first shipped recipe, whose self-judge copied the strong judge).
    ``"position"``: worked steps beat a bare answer, and otherwise the first solution shown wins,
    a position bias unrelated to correctness or style accuracy. Either way a solution with the
    right answer beats one with a wrong answer."""
    judge_wrong_rate: float = 0.1
    """Probability that one judged solution carries an arithmetic slip (wrong final answer)."""
    prompt_loss: bool = False
    """Also train on prompt tokens; off: the loss covers completion + EOS only."""
    # tokenizer
    vocab_size: int = 1024
    tokenizer_corpus_size: int = 4000
    # model
    hidden_size: int = 128
    num_layers: int = 3
    num_heads: int = 4
    intermediate_size: int = 384
    max_position_embeddings: int = 1024
    # optimisation
    steps: int = 4000
    batch_size: int = 32
    judge_batch_size: int = 16
    bucket_batches: int = 8
    """Batches drawn at once and grouped by length (less padding, same data distribution)."""
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 200
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    log_every: int = 50
    minutes: float | None = None
    """Wall-clock cap; training stops early (recorded in provenance) when it is reached."""

    def __post_init__(self) -> None:
        if self.judge_taste not in JUDGE_TASTES:
            raise ValueError(f"RecipeConfig.judge_taste: {self.judge_taste!r} is not one of "
                             f"{', '.join(JUDGE_TASTES)}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["digit_weights"] = {str(k): v for k, v in self.digit_weights.items()}
        return d

    @classmethod
    def tiny(cls, **overrides: object) -> RecipeConfig:
        """A seconds-long configuration for tests."""
        base = dict(
            steps=6,
            batch_size=4,
            judge_batch_size=2,
            vocab_size=300,
            tokenizer_corpus_size=300,
            hidden_size=32,
            num_layers=1,
            num_heads=2,
            intermediate_size=64,
            warmup_steps=2,
            max_terms=3,
            digit_weights={1: 1.0},
            judge_fraction=0.34,
            log_every=1,
        )
        base.update(overrides)
        return cls(**base)  # type: ignore[arg-type]
