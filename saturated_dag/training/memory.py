"""Estimated peak GPU memory of one training step, per method, from a profile.

``python -m saturated_dag.training.memory paper`` prints the table of docs/training-memory.md.

Estimates, not measurements on a GPU: the tensors a step keeps alive, from what the installed
code saves for backward:

* weights: every base parameter in the training precision; LoRA A/B in float32 with their
  gradients and AdamW's two moments (16 bytes per LoRA parameter);
* activations: per decoder layer and token, the tensors autograd saves in a Qwen3/Llama layer
  (``layer_bytes_per_token``), times layers and tokens; with gradient checkpointing only each
  layer's input is kept, and one layer is recomputed in backward;
* backward working set: one layer's worth again;
* logits: σ-RRHF's trainer materialises them and one gradient of the same size; TRL's DPO and
  SFT trainers use its fused LM head, which never holds them;
* DPO's reference pass: the adapter-disabled model under ``no_grad``, at most one layer's worth.

Sequences are taken at ``max_length``, per-device batches as the trainers build them. Not
counted: fragmentation and workspaces beyond ``OVERHEAD``.
tests/training/test_training_memory.py checks the per-layer count against what autograd saves.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from saturated_dag.training.config import method_training

if TYPE_CHECKING:
    from saturated_dag.config import Profile

GIB = 1024**3
OVERHEAD = 2 * GIB
"""CUDA context, cuBLAS workspaces and allocator slack: a fixed allowance, not derived."""
FUSED_TOKENS, FUSED_VOCAB = 4096, 32768
"""TRL's fused LM head tile (``trl.kernels.chunked_logprob``)."""
LOGPROB_BLOCK = 1 << 20
"""Elements per block in ``losses._TokenLogprob`` (its float32 temporaries)."""


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a decoder-only transformer that set its training memory."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool = True
    qk_norm: bool = True  # Qwen3 normalises q and k per head (Llama does not)

    @property
    def q_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim

    def parameters(self) -> int:
        """All weights: embeddings (once if tied), attention, MLP and norms."""
        d, q, kv = self.hidden, self.q_width, self.kv_width
        attention = d * q + 2 * d * kv + q * d
        mlp = 3 * d * self.intermediate
        norms = 2 * d + (2 * self.head_dim if self.qk_norm else 0)
        embeddings = self.vocab * d * (1 if self.tied else 2)
        return self.layers * (attention + mlp + norms) + embeddings + d

    def module_widths(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each projection LoRA may target."""
        d, q, kv, f = self.hidden, self.q_width, self.kv_width, self.intermediate
        return {"q_proj": (d, q), "k_proj": (d, kv), "v_proj": (d, kv), "o_proj": (q, d),
                "gate_proj": (d, f), "up_proj": (d, f), "down_proj": (f, d)}

    def lora_parameters(self, r: int, targets: tuple[str, ...]) -> int:
        widths = self.module_widths()
        unknown = set(targets) - set(widths)
        if unknown:
            raise ValueError(f"LoRA targets {sorted(unknown)} are not projections of this model")
        return self.layers * sum(r * sum(widths[t]) for t in targets)


QWEN3_1_7B = ModelShape(layers=28, hidden=2048, intermediate=6144, heads=16, kv_heads=8,
                        head_dim=128, vocab=151_936, tied=True, qk_norm=True)
"""Qwen/Qwen3-1.7B-Base (its config.json): 1.72B parameters, 1.41B without embeddings."""
KNOWN_SHAPES = {"Qwen/Qwen3-1.7B-Base": QWEN3_1_7B, "Qwen/Qwen3-1.7B": QWEN3_1_7B}


def shape_from_config(config: object) -> ModelShape:
    """The shape of a transformers config (Llama, Qwen2/3 and their kin)."""
    c = config
    heads = c.num_attention_heads
    return ModelShape(
        layers=c.num_hidden_layers, hidden=c.hidden_size, intermediate=c.intermediate_size,
        heads=heads, kv_heads=getattr(c, "num_key_value_heads", None) or heads,
        head_dim=getattr(c, "head_dim", None) or c.hidden_size // heads,
        vocab=c.vocab_size, tied=bool(getattr(c, "tie_word_embeddings", False)),
        qk_norm=getattr(c, "model_type", "") in ("qwen3", "qwen3_moe"))


@dataclass(frozen=True)
class StepShape:
    """What one forward/backward pass holds: its sequences, precision and switches."""

    sequences: int  # per forward pass
    length: int  # tokens per sequence (max_length)
    compute_bytes: int  # 2 (bfloat16) or 4 (float32)
    checkpointing: bool
    lora_r: int
    lora_targets: tuple[str, ...]
    lora_dropout: bool  # dropout > 0: a mask and a separate input copy per LoRA module
    padded: bool = True  # a padding mask: SDPA gets a bias and GQA's k/v are repeated
    dropout_mask_bytes: int = 1  # CUDA's native dropout keeps a bool mask (CPU: a float one)

    @property
    def tokens(self) -> int:
        return self.sequences * self.length

    @property
    def autocast(self) -> bool:
        return self.compute_bytes < 4


def layer_bytes_per_token(model: ModelShape, step: StepShape) -> int:
    """Bytes one decoder layer saves for backward per token (gradient on LoRA weights only).

    RMSNorm saves its float32 input (and a float32 reciprocal per row); a frozen projection
    saves nothing (its input gradient needs only its weight); a LoRA module saves its
    (dropped-out) input in the compute dtype, the dropout mask and its rank-r middle; SDPA's
    kernels save q, k, v (repeated to all heads when a padding mask rules out native GQA), the
    output and a float32 logsumexp per head, and the bias the padding mask becomes; SwiGLU
    saves gate, up and SiLU(gate).
    """
    b, d, r = step.compute_bytes, model.hidden, step.lora_r
    q, kv, f, h = model.q_width, model.kv_width, model.intermediate, model.heads
    norms = 2 * (4 * d + 4)
    if model.qk_norm:
        norms += 4 * (q + kv) + 4 * (model.heads + model.kv_heads)
    widths = model.module_widths()
    own_input = step.lora_dropout or step.autocast
    lora, shared_saved = 0, False
    for target in step.lora_targets:
        fan_in = widths[target][0]
        lora += b * r  # lora_A's output, saved by lora_B
        if own_input:  # its dropout output, or PEFT's float32 cast re-cast by autocast
            lora += b * fan_in + (step.dropout_mask_bytes * fan_in if step.lora_dropout else 0)
        elif target == "o_proj":
            pass  # its input is the attention output the SDPA kernel already saved
        elif target not in ("q_proj", "k_proj", "v_proj"):
            lora += b * fan_in
        elif not shared_saved:  # q, k and v read the same normalised input: saved once
            lora += b * fan_in
            shared_saved = True
    kv_saved = q if step.padded else kv
    attention = b * (2 * q + 2 * kv_saved) + 4 * h + (b * step.length if step.padded else 0)
    mlp = 3 * b * f
    return norms + lora + attention + mlp


def lora_weight_copies(model: ModelShape, step: StepShape) -> int:
    """Per layer: autocast's compute-dtype copies of the float32 LoRA weights, kept for backward."""
    if not step.autocast:
        return 0
    widths = model.module_widths()
    return sum(step.lora_r * sum(widths[t]) * step.compute_bytes for t in step.lora_targets)


@dataclass(frozen=True)
class Estimate:
    """A step's memory in bytes: what is held throughout, and the moments on top of it.

    The moments do not overlap (σ-RRHF's logits are freed before the layers' backward; DPO's
    reference pass ends before the loss's backward), so ``peak`` adds the largest one.
    """

    method: str
    step: StepShape
    held: dict[str, int]
    moments: dict[str, dict[str, int]]

    @property
    def peak_moment(self) -> str:
        return max(self.moments, key=lambda k: sum(self.moments[k].values()))

    @property
    def peak(self) -> int:
        return sum(self.held.values()) + sum(self.moments[self.peak_moment].values())


def estimate(method: str, model: ModelShape, step: StepShape) -> Estimate:
    """Memory of one σ-RRHF, DPO or SFT/RAFT step (see the module docstring).

    Held throughout: weights, LoRA optimizer state, saved activations, the allowance.
    Moments: a decoder layer's backward (recomputed under checkpointing, plus its gradients);
    the loss's backward (σ-RRHF: logits and their gradient; DPO, SFT: TRL's fused LM head
    tile and a float32 gradient of the last hidden states); DPO's reference pass.
    """
    entry = method_training(method)  # an unknown method is refused, naming the known ones
    n, b = step.tokens, step.compute_bytes
    per_layer = layer_bytes_per_token(model, step)
    if step.checkpointing:
        saved = model.layers * n * b * model.hidden  # each checkpointed layer's input
        layer = {"recomputed layer": per_layer * n, "its gradients": per_layer * n}
    else:
        saved = model.layers * (per_layer * n + lora_weight_copies(model, step))
        layer = {"its gradients": per_layer * n}
    held = {"base weights": model.parameters() * b,
            "LoRA weights, gradients, AdamW moments (fp32)":
                16 * model.lora_parameters(step.lora_r, step.lora_targets),
            "saved activations": saved + n * (4 * model.hidden + 4),  # + final norm input
            "allowance (CUDA context, workspaces, slack)": OVERHEAD}
    moments = {"layer backward": layer}
    tile = min(n, FUSED_TOKENS) * min(model.vocab, FUSED_VOCAB) * b
    if entry.full_logits:
        logits = n * model.vocab * b
        moments["loss backward"] = {"logits": logits, "logits gradient": logits,
                                    "logsumexp, blocks": 4 * n + 2 * 4 * LOGPROB_BLOCK}
    else:
        moments["loss backward"] = {"fused LM head tile": tile,
                                    "last hidden gradient (fp32)": 4 * n * model.hidden}
    if entry.reference_pass:
        moments["reference pass"] = {"one no_grad layer": per_layer * n,
                                     "fused LM head tile": tile}
    return Estimate(method, step, held, moments)


def plain_logsoftmax_extra(model: ModelShape, step: StepShape) -> int:
    """What a float32 ``log_softmax`` + ``gather`` would add to σ-RRHF's logits (for contrast).

    It saves a float32 log-probability tensor, and its backward holds the scattered gradient
    of ``gather`` and that of ``log_softmax`` (float32) at once: 3 x tokens x vocab x 4 bytes.
    """
    return 3 * step.tokens * model.vocab * 4


def _shape_of(profile: Profile) -> ModelShape:
    spec = profile.policy.model
    if spec in KNOWN_SHAPES:
        return KNOWN_SHAPES[spec]
    from transformers import AutoConfig

    from saturated_dag.generation.models import local_model_dir

    return shape_from_config(AutoConfig.from_pretrained(local_model_dir(spec)))


def profile_steps(profile: Profile) -> dict[str, StepShape]:
    """Each method's forward pass under ``profile`` (precision auto: bf16 where CUDA is)."""
    from saturated_dag.training.config import LORA_TARGET_MODULES
    from saturated_dag.training.rrhf_trainer import rrhf_questions_per_device

    t, n = profile.training, profile.sampling.n
    bf16 = t.dtype == "bfloat16" or (t.dtype == "auto" and profile.policy.device.startswith("cuda"))
    base = StepShape(sequences=t.per_device_batch_size, length=t.max_length,
                     compute_bytes=2 if bf16 else 4, checkpointing=t.gradient_checkpointing,
                     lora_r=t.lora_r, lora_targets=LORA_TARGET_MODULES,
                     lora_dropout=t.lora_dropout > 0)
    questions = rrhf_questions_per_device(t.per_device_batch_size, n)
    return {"dpo": replace(base, sequences=2 * t.per_device_batch_size),
            "rrhf": replace(base, sequences=questions * n),
            "sft": base}


def old_paper_steps() -> dict[str, StepShape]:
    """The paper profile's earlier passes, the table's ``old paper settings`` rows: float32, no
    checkpointing, 4,096 tokens, per-device batch 8 (questions for σ-RRHF: 8 x n = 64
    sequences; pairs for DPO); they show what the current settings save."""
    old = StepShape(sequences=8, length=4096, compute_bytes=4, checkpointing=False,
                    lora_r=32, lora_targets=("q_proj", "k_proj", "v_proj", "o_proj"),
                    lora_dropout=True)
    return {"dpo": replace(old, sequences=16), "rrhf": replace(old, sequences=64), "sft": old}


LABELS = {"dpo": "DPO", "rrhf": "σ-RRHF", "sft": "SFT/RAFT"}


def cases(profile: Profile) -> list[tuple[str, str, StepShape]]:
    """(setting, method, pass): the profile, with checkpointing flipped, in float32, and (for
    the paper's model) the paper profile's earlier settings (``old_paper_steps``)."""
    steps = profile_steps(profile)
    out = []
    for fp32 in (False, True):
        for flip in (False, True):
            for m, s in steps.items():
                step = replace(s, checkpointing=s.checkpointing != flip,
                               compute_bytes=4 if fp32 else s.compute_bytes)
                if fp32 and s.compute_bytes == 4:
                    continue  # the profile is float32 already
                changes = ([f"checkpointing {'on' if step.checkpointing else 'off'}"] * flip
                           + ["float32"] * fp32)
                out.append((", ".join(["profile", *changes]), m, step))
    if profile.policy.model in KNOWN_SHAPES:
        out += [("old paper settings", m, s) for m, s in old_paper_steps().items()]
    return out


def table(profile: Profile, card_bytes: float = 80e9) -> str:
    """The Markdown table of docs/training-memory.md for ``profile`` (GiB)."""
    model = _shape_of(profile)
    head = ("| setting | method | sequences x tokens | dtype | checkpointing | base weights "
            "| LoRA + AdamW | saved activations | largest moment | moment | allowance "
            "| **peak** | fits 80 GB? |")
    lines = [head, "|---|---|---|---|---|---:|---:|---:|---|---:|---:|---:|---|"]
    for setting, method, step in cases(profile):
        e = estimate(method, model, step)
        g = {k: v / GIB for k, v in e.held.items()}
        moment = sum(e.moments[e.peak_moment].values()) / GIB
        lines.append(
            f"| {setting} | {LABELS[method]} | {step.sequences} x {step.length} "
            f"| {'bf16' if step.compute_bytes == 2 else 'fp32'} "
            f"| {'on' if step.checkpointing else 'off'} | {g['base weights']:.2f} "
            f"| {g['LoRA weights, gradients, AdamW moments (fp32)']:.2f} "
            f"| {g['saved activations']:.2f} | {e.peak_moment} | {moment:.2f} "
            f"| {g['allowance (CUDA context, workspaces, slack)']:.0f} "
            f"| **{e.peak / GIB:.1f}** | {'yes' if e.peak <= card_bytes else 'no'} |")
    steps = profile_steps(profile)
    rrhf = steps["rrhf"]
    r = estimate("rrhf", model, rrhf)
    fp32_layer = layer_bytes_per_token(model, replace(rrhf, compute_bytes=4))
    lines += [
        "",
        f"Model {profile.policy.model}: {model.parameters() / 1e9:.2f}B parameters; LoRA "
        f"r={rrhf.lora_r} on {', '.join(rrhf.lora_targets)}: "
        f"{model.lora_parameters(rrhf.lora_r, rrhf.lora_targets) / 1e6:.2f}M parameters. "
        f"One decoder layer saves {layer_bytes_per_token(model, rrhf) / 1024:.1f} KiB per "
        f"token in the profile's precision ({fp32_layer / 1024:.1f} KiB in float32). "
        f"σ-RRHF's logits at the profile's pass: {r.moments['loss backward']['logits'] / GIB:.2f} "
        "GiB, as much again for their gradient; a float32 log_softmax + gather instead of "
        f"_TokenLogprob would add {plain_logsoftmax_extra(model, rrhf) / GIB:.1f} GiB. "
        f"80 GB is taken as 80e9 bytes ({card_bytes / GIB:.1f} GiB), below what such cards "
        "report, to leave a margin."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from saturated_dag.profiles import load_profile

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m saturated_dag.training.memory PROFILE")
    print(table(load_profile(args[0])))


if __name__ == "__main__":
    main()
