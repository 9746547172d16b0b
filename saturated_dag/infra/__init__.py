"""What every stage stands on: atomic writes (``atomic``), resumable shards (``shards``), the
run's lifeline for worker processes (``lifeline``), the step layout on the machine's cores
and devices (``parallel``), which model stays loaded (``residency``), output folders' stamps
(``output_stamp``), passwords hidden from what is written and logged (``redact``) and the log
callback type (``log``)."""
