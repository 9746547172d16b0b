"""LoRA training of the policy: DPO (TRL), σ-RRHF (own trainer), SFT (TRL)."""
