"""The tasks' own code: question builders (``chain_sum``, ``gsm8k``), the policy's prompts
(``prompts``), answer checks (``verification``) and chain sum's solution styles
(``solution_styles``). Which questions a profile's pools hold is the data stage's
(``saturated_dag.data.questions``)."""
