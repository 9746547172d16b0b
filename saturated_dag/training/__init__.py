"""LoRA training of the policy: DPO (TRL), σ-RRHF (own trainer), SFT (TRL); its losses
(``losses``) and App. B's choice among a cell's configurations (``selection``)."""
