"""Evaluation: eval reports of sampled, verified completions and pass@k (``reports``,
``metrics``), and the paired bootstrap intervals every table and finding reads
(``statistics``)."""
