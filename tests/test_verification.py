from concurrent.futures import ThreadPoolExecutor

import pytest

from saturated_dag.verification import extract_last_boxed, verify_answer, verify_many


@pytest.mark.parametrize(
    ("completion", "gold", "correct"),
    [
        ("so the answer is \\boxed{-544}.", "-544", True),
        ("\\boxed{544}", "-544", False),
        ("\\boxed{1,234}", "1234", True),
        ("\\boxed{1 234}", "1234", True),  # Math-Verify alone reads 1 234 as 235
        ("\\boxed{1234.0}", "1234", True),
        ("\\boxed{1234.5}", "1234", False),
        ("\\boxed{}", "0", False),
        ("first \\boxed{5}, then corrected: \\boxed{12}", "12", True),
        ("first \\boxed{12}, then changed to \\boxed{5}", "12", False),
        ("\\boxed{123456789012}", "123456789012", True),
        ("\\boxed{123456789013}", "123456789012", False),
        ("\\boxed{-987654321098}", "-987654321098", True),
        ("The answer is 12.", "12", False),  # no box: not an answer
        ("\\boxed{\\frac{1}{2}}", "0.5", True),
        ("\\boxed{12", "12", False),  # unclosed
    ],
)
def test_verify_answer(completion: str, gold: str, correct: bool) -> None:
    assert verify_answer(completion, gold).correct is correct


def test_extract_last_boxed_handles_nesting_and_absence() -> None:
    assert extract_last_boxed("x \\boxed{\\frac{1}{2}} y") == "\\frac{1}{2}"
    assert extract_last_boxed("a \\boxed{1} b \\boxed{2}") == "2"
    assert extract_last_boxed("nothing here") is None
    assert verify_answer("\\boxed{}", "3").answer == ""


def test_gold_that_cannot_parse_is_an_error() -> None:
    with pytest.raises(ValueError, match="gold answer"):
        verify_answer("\\boxed{3}", "")


def test_safe_in_worker_threads() -> None:
    # Math-Verify's default timeouts use signal.alarm, which raises outside the main thread.
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda g: verify_answer(f"\\boxed{{{g}}}", g).correct,
                                [str(i) for i in range(-5, 5)]))
    assert all(results)


def test_process_pool_matches_serial() -> None:
    completions = [f"\\boxed{{{i}}}" for i in range(60)]
    golds = [str(i if i % 3 else i + 1) for i in range(60)]
    serial = verify_many(completions, golds)
    parallel = verify_many(completions, golds, workers=2, min_parallel=10)
    assert serial == parallel
    assert sum(v.correct for v in serial) == 40


def test_length_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="2 completions but 1 golds"):
        verify_many(["a", "b"], ["1"])
