"""Benchmarks of the hot stages against the straightforward implementations (issue 8).

One module per benchmark, each runnable as ``python -m benchmarks.bench_<name>``; they are not
part of the default test run (``tests/project/test_benchmarks.py`` runs each at a toy size).
"""
