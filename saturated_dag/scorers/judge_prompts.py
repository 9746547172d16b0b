r"""The paper's LLM-as-a-judge prompts (App. D, "Select Best Correct Completion"), verbatim.

Why verbatim: the self-judge of the embedded base model is trained on exactly these prompts, and
any real LLM judge gets the same text, so scorers are compared on one footing. How the .tex
text becomes what the model saw (decisions, not guesses hidden in code):

* The prompts sit in a ``tcblisting`` (verbatim), so ``--``, ``$`` and ``**`` are literal
  characters and are kept (``0--{max_idx}``, ``more direct --``, ``$0 - 1$``).
* Backslashes: the listings show escaped source strings (``\\[``, ``\\\\frac``), while the judged
  solutions are ordinary LaTeX, so every run of escaped backslashes collapses to one (``\[``,
  ``\boxed``, ``\frac``, ``\$``); the criterion line's single ``\boxed{}`` is unchanged.
* The GSM8K few-shot template doubles braces (``{{12}}``): it is a ``str.format`` template and
  is filled with ``str.format``. The chain-sum template has single braces inside
  (``\boxed{}``), so its ``{problem}``, ``{solutions}``, ``{max_idx}`` are filled by replacement.
* The chain-sum few-shot listing's two-space indent of its instruction part is LaTeX source
  layout and is removed. Line breaks are kept exactly as the paper prints them.
* The paper has no system/user pair for chain sum. ``CHAIN_SUM_SYSTEM`` is the GSM8K system
  prompt with "mathematical word problem solutions" -> "mathematical solutions" and "word
  problem" -> "math problem"; the user prompt is the GSM8K one unchanged.
"""

# ruff: noqa: E501  (the prompts are verbatim, their long lines included)

from __future__ import annotations

import re
from typing import Literal

Task = Literal["chain_sum", "gsm8k"]

CHAIN_SUM_FEW_SHOT = r"""# Mathematical Solution Evaluation

There are math problems followed by a number of solutions. The task is to
systematically analyze these solutions to identify the most mathematically
sound approach.

### Evaluation Process

#### 1. Initial Screening
* Group solutions by their final answers.
* Identify and explain mathematical contradictions between different answers.
* Eliminate solutions with clear mathematical errors.

#### 2. Detailed Analysis
For remaining solutions, evaluate:
* **Mathematical Precision and Accuracy:** Correctness of calculations and
theorem applications.
* **Logical Progression:** The flow and sequence of steps.
* **Completeness:** Whether the mathematical reasoning is fully documented.
* **Notation:** Proper use of mathematical symbols and the `\boxed{}` format.
* **Special Conditions:** Handling of edge cases or specific constraints.
* **Error Correction:** For solutions containing and addressing errors,
evaluate the identification and correction methodology.

#### 3. Solution Comparison
Compare viable solutions based on:
* **Efficiency:** The elegance of the approach.
* **Clarity:** How well the reasoning is communicated.
* **Sophistication:** The depth of the method used.
* **Robustness:** Whether the solution works for all cases.

### Response Requirements
1. **Brief Analysis** of conflicting answers.
2. **Detailed Evaluation** of mathematically sound solutions.
3. **Justification** for eliminating incorrect solutions.
4. **Clear Explanation** for selecting the best approach.

An evaluation ends with:
**Judgment: [IDX]** *(Where `IDX` is the index $0 - {max_idx}$ of the best
solution.)*

---

## EVALUATION A
**Problem:** Compute the following step by step:
593615 + 204846 - 838944 + 816336 - 913166 - 338746 =

**Solutions (all correct, ground truth = -476059):**
0) Let's solve the problem step by step:

1. **Addition:**
\[
  593615 + 204846 = 798461
\]

2. **Subtraction:**
\[
  798461 - 838944 = -40483
\]

3. **Addition:**
\[
  -40483 + 816336 = 775853
\]

4. **Subtraction:**
\[
  775853 - 913166 = -137313
\]

5. **Subtraction:**
\[
  -137313 - 338746 = -476059
\]

The final answer is: \boxed{-476059}

1) Let's solve this step by step:

1. Compute 593615 + 204846
2. Subtract 838944 from the result
3. Add 816336 to the new result
4. Subtract 913166 from the new result
5. Subtract 338746 from the new result

Now, let's compute each step:

1. 593615 + 204846 = 798461
2. 798461 - 838944 = -40483
3. -40483 + 816336 = 775853
4. 775853 - 913166 = -137313
5. -137313 - 338746 = -476059

So, the final answer is \boxed{-476059}.

### EVALUATION
**Initial Screening:** Both solutions arrive at -476059. No answer
disagreement; both are arithmetically correct.

**Analysis:**
- Solution 0: Proceeds directly to computation. Each step is labeled by
operation type (**Addition:**, **Subtraction:**) and formatted in LaTeX
display math. The structure is clean: one numbered item per operation,
intermediate result immediately visible.
- Solution 1: Opens with a planning phase that lists all five steps as
instructions before computing anything. The plan is redundant given the
computations that follow. The inline `number = result` style lacks the
visual clarity of display math.

**Comparison:** Both are correct and complete. Solution 0 is more direct --
it computes each step immediately without a preamble. The operation-type
labels and LaTeX formatting make intermediate values easy to scan and verify.
Solution 1's two-phase structure (plan then execute) adds length without
adding information.

**Judgment: [0]**

---

## EVALUATION B
**Problem:** {problem}

**Solutions:** {solutions}

### EVALUATION"""
"""chain sum, full few-shot (instruct=False); filled by replacement."""

CHAIN_SUM_SYSTEM = r"""You are an expert evaluator of mathematical solutions. Given a
math problem and candidate solutions, determine which demonstrates the best
reasoning quality.

Evaluate on:
- **Problem comprehension**: Does the solution correctly identify all
quantities and relationships?
- **Step-by-step correctness**: Are all calculations accurate?
- **Logical clarity**: Is the reasoning easy to follow?
- **Completeness**: Are all sub-steps documented?
- **Directness**: Is the approach efficient without unnecessary repetition?

Provide a brief comparative analysis, then end your response with exactly:
**Judgment: [IDX]**
where IDX is the 0-based index of the best solution."""
"""chain sum, system prompt (instruct=True): the GSM8K one, minimally adapted."""

GSM8K_FEW_SHOT = r"""# Word Problem Solution Evaluation

There are word problems followed by a number of solutions. The task is to systematically analyze these solutions to identify the most mathematically sound approach.

### Evaluation Process

#### 1. Initial Screening
* Group solutions by their final answers.
* Identify and explain contradictions between different answers.
* Eliminate solutions with clear mathematical or logical errors.

#### 2. Detailed Analysis
For remaining solutions, evaluate:
* **Problem Comprehension:** Does the solution correctly identify all given quantities and what is being asked?
* **Step-by-step Correctness:** Are all arithmetic operations and unit conversions accurate?
* **Logical Flow:** Does each step follow naturally from the previous one?
* **Completeness:** Are all sub-problems addressed before combining into a final answer?
* **Clarity:** Is the solution easy to follow without unnecessary repetition?

#### 3. Solution Comparison
Compare viable solutions based on:
* **Directness:** Does the solution get to the point without redundant preambles?
* **Organization:** Are the steps well-structured and labeled?
* **Presentation:** Is the final answer clearly stated?

### Response Requirements
1. **Brief Analysis** of any answer disagreements.
2. **Detailed Evaluation** of mathematically sound solutions.
3. **Clear Explanation** for selecting the best approach.

An evaluation ends with:
**Judgment: [IDX]** *(Where `IDX` is the index $0 - {max_idx}$ of the best solution.)*

---

## EVALUATION A
**Problem:** For every 12 cans you recycle, you receive $0.50, and for every 5 kilograms of newspapers, you receive $1.50. If your family collected 144 cans and 20 kilograms of newspapers, how much money would you receive?

**Solutions (all correct, ground truth = 12):**
0) To solve this problem, we need to calculate the amount of money received from recycling the cans and the newspapers separately, and then add those amounts together.

1. **Calculate the money received from recycling cans:**

   We know that for every 12 cans, you receive $0.50. Your family collected 144 cans. To find out how many sets of 12 cans they have, we divide the total number of cans by 12:
   \[
     \frac{{144 \text{{ cans}}}}{{12 \text{{ cans/set}}}} = 12 \text{{ sets}}
   \]

   Since each set of 12 cans gives $0.50, we multiply the number of sets by $0.50:
   \[
     12 \text{{ sets}} \times \$0.50/\text{{set}} = \$6.00
   \]

2. **Calculate the money received from recycling newspapers:**

   We know that for every 5 kilograms of newspapers, you receive $1.50. Your family collected 20 kilograms. To find out how many sets of 5 kilograms they have:
   \[
     \frac{{20 \text{{ kg}}}}{{5 \text{{ kg/set}}}} = 4 \text{{ sets}}
   \]

   Since each set of 5 kilograms gives $1.50:
   \[
     4 \text{{ sets}} \times \$1.50/\text{{set}} = \$6.00
   \]

3. **Add the amounts:**
   \[
     \$6.00 + \$6.00 = \$12.00
   \]

Therefore, the total amount of money your family would receive is $\boxed{{12}}$.

1) Let's solve this step by step:

1. Calculate the money earned from recycling cans:
   - For every 12 cans, you receive $0.50.
   - Your family collected 144 cans.
   - To find out how many sets of 12 cans there are in 144 cans, divide 144 by 12: 144 / 12 = 12 sets.
   - Multiply the number of sets by the amount earned per set: 12 sets * $0.50/set = $6.00.

2. Calculate the money earned from recycling newspapers:
   - For every 5 kilograms of newspapers, you receive $1.50.
   - Your family collected 20 kilograms of newspapers.
   - To find out how many sets of 5 kilograms there are in 20 kilograms, divide 20 by 5: 20 / 5 = 4 sets.
   - Multiply the number of sets by the amount earned per set: 4 sets * $1.50/set = $6.00.

3. Add the money earned from both cans and newspapers:
   - Money earned from cans: $6.00
   - Money earned from newspapers: $6.00
   - Total money earned: $6.00 + $6.00 = $12.00

Final answer: You would receive $12.00.

### EVALUATION
**Initial Screening:** Both solutions arrive at $12.00. No answer disagreement; both are arithmetically correct.

**Analysis:**
- Solution 0: Each sub-problem is clearly labeled (**Calculate the money received from recycling cans/newspapers**). Uses LaTeX display math for key calculations, making intermediate values easy to verify at a glance. The structure is clean with numbered sections and a boxed final answer.
- Solution 1: Correct and complete, but uses a flat inline style throughout. The final answer lacks \boxed formatting. A separate summary block ("Money earned from cans: $6.00...") restates values already computed, adding length without information.

**Comparison:** Both are correct. Solution 0 is better organized -- bold section headers, LaTeX for key steps, and a boxed answer make it easier to scan and verify. Solution 1 is slightly redundant with its summary block.

**Judgment: [0]**

---

## EVALUATION B
**Problem:** A baker makes 48 cookies. He keeps one-quarter for himself and divides the rest equally among 3 friends. How many cookies does each friend get?

**Solutions (all correct, ground truth = 12):**
0) The total number of cookies baked is 48.

Step 1: The baker keeps one-quarter for himself.
One-quarter of 48: 48 / 4 = 12 cookies kept.

Step 2: Find the remaining cookies.
Remaining = 48 - 12 = 36 cookies.

Step 3: Divide among 3 friends.
Each friend gets: 36 / 3 = 12 cookies.

Check: 12 + 12 + 12 + 12 = 48 (ok)

Each friend receives $\boxed{{12}}$ cookies.

1) Cookies the baker keeps: 48 / 4 = 12

Remaining to share: 48 - 12 = 36

Each friend gets: 36 / 3 = 12

$\boxed{{12}}$

### EVALUATION
**Initial Screening:** Both solutions reach 12. No disagreement.

**Analysis:**
- Solution 0: Correct and systematic, but adds a verification step (12 + 12 + 12 + 12 = 48) that restates values already established by the arithmetic. The labeled steps are helpful, but the check adds length without new information.
- Solution 1: Three concise lines, one arithmetic step each. Reaches the same conclusion without redundancy.

**Comparison:** Both are correct. Solution 1 is more direct -- the verification in Solution 0 is unnecessary when every step is already clearly shown. Solution 1 is preferred.

**Judgment: [1]**

---

## EVALUATION C
**Problem:** A car drives at 60 mph for 2 hours, then at 40 mph for 1.5 hours. How many miles does it travel in total?

**Solutions (all correct, ground truth = 180):**
0) The car drives at 60 mph for 2 hours, so that's 60 * 2 = 120 miles. Then it goes at 40 mph for 1.5 hours, which is 40 * 1.5 = 60 miles. Total: 120 + 60 = 180 miles. The answer is $\boxed{{180}}$.

1) Distance in first segment: 60 mph * 2 hours = 120 miles

Distance in second segment: 40 mph * 1.5 hours = 60 miles

Total distance: 120 + 60 = 180 miles

$\boxed{{180}}$

### EVALUATION
**Initial Screening:** Both solutions reach 180. No disagreement.

**Analysis:**
- Solution 0: Correct, but merges all steps into a continuous sentence. While compact, it makes it harder to scan each individual computation.
- Solution 1: Computes each segment on a dedicated labeled line; the final sum is on its own line. Each step is easy to locate and verify in isolation.

**Comparison:** Solution 1's one-operation-per-line structure is easier to read and audit than Solution 0's run-on prose. Solution 1 is preferred for clarity.

**Judgment: [1]**

---

## EVALUATION D
**Problem:** {problem}

**Solutions (indices 0--{max_idx}):**
{solutions}

### EVALUATION"""
"""GSM8K, full few-shot (instruct=False); a str.format template."""

GSM8K_SYSTEM = r"""You are an expert evaluator of mathematical word problem solutions. Given a
word problem and candidate solutions, determine which demonstrates the best
reasoning quality.

Evaluate on:
- **Problem comprehension**: Does the solution correctly identify all
quantities and relationships?
- **Step-by-step correctness**: Are all calculations accurate?
- **Logical clarity**: Is the reasoning easy to follow?
- **Completeness**: Are all sub-steps documented?
- **Directness**: Is the approach efficient without unnecessary repetition?

Provide a brief comparative analysis, then end your response with exactly:
**Judgment: [IDX]**
where IDX is the 0-based index of the best solution."""
"""GSM8K, system prompt (instruct=True)."""

GSM8K_USER = r"""**Problem:** {problem}

**Solutions (indices 0-{max_idx}):**
{solutions}"""
"""User prompt (instruct=True) for both tasks; a str.format template."""

JUDGMENT_REGEX = re.compile(r"(?:\*\*)?Judgment:\s*\[(\d+)\](?:\*\*)?\s*$")
"""A response ending ``Judgment: [N]``, bold markers optional (App. D's regex constraint)."""


def format_solutions(solutions: list[str]) -> str:
    """The paper's solution list: ``0) ...`` blocks separated by a blank line."""
    return "\n\n".join(f"{i}) {s.strip()}" for i, s in enumerate(solutions))


def _fill(template: str, problem: str, solutions: list[str], use_format: bool) -> str:
    values = {
        "problem": problem,
        "solutions": format_solutions(solutions),
        "max_idx": str(len(solutions) - 1),
    }
    if use_format:
        return template.format(**values)
    out = template
    for key, value in values.items():
        out = out.replace("{" + key + "}", value)
    return out


def judge_messages(task: str, problem: str, solutions: list[str], instruct: bool) -> list[dict]:
    """Chat messages asking a judge for the best of ``solutions``.

    ``instruct=False`` gives one user message holding the full few-shot prompt (a base model
    continues it as plain text); ``instruct=True`` the system/user pair.
    """
    if len(solutions) < 2:
        raise ValueError("a judge compares at least two solutions")
    if task not in ("chain_sum", "gsm8k"):
        raise ValueError(f"unknown judge task {task!r}; expected 'chain_sum' or 'gsm8k'")
    if not instruct:
        if task == "chain_sum":
            text = _fill(CHAIN_SUM_FEW_SHOT, problem, solutions, use_format=False)
        else:
            text = _fill(GSM8K_FEW_SHOT, problem, solutions, use_format=True)
        return [{"role": "user", "content": text}]
    system = CHAIN_SUM_SYSTEM if task == "chain_sum" else GSM8K_SYSTEM
    user = _fill(GSM8K_USER, problem, solutions, use_format=True)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_judgment(text: str) -> int | None:
    """The judged index when ``text`` ends with ``Judgment: [N]``, else ``None``."""
    match = JUDGMENT_REGEX.search(text.strip())
    return int(match.group(1)) if match else None
