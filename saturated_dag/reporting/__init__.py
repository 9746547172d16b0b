"""What a reader sees: the result tables (``result_tables``, ``runs_table``), figures
(``plots``), model cards (``model_card``), MLflow runs (``tracking``), the paper run's cost
(``paper_cost``) and the experiment plan as a table (``plan_text``)."""
