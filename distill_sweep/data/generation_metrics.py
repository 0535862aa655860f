"""Generation-based dev metrics of decoder students on instruction data: a model's greedy response to each dev
prompt scored against the reference response, as MiniLLM and DistiLLM report them.

Both texts are first normalised the same way (`normalise`: leading and trailing whitespace stripped, every run of
whitespace one space; case and punctuation kept). Then
* `exact_match`: 1 when the normalised texts are equal, else 0;
* `rouge_l`: ROUGE-L F1 over whitespace tokens: with L the length of the longest common subsequence of the two
  token lists, precision L / |response|, recall L / |reference| and F1 their harmonic mean (0 where L = 0; 1 where
  both are empty).
A dev slice's value is the mean over its examples. No torch here: the evaluator (teachers/decoder.py) generates.
"""

from __future__ import annotations

from collections.abc import Sequence

EXACT_MATCH = "exact_match"  # the dev metrics' names, in the record's epochs beside token_accuracy
ROUGE_L = "rouge_l"


def normalise(text: str) -> str:
    """Strip, and collapse every run of whitespace into one space."""
    return " ".join(text.split())


def exact_match(response: str, reference: str) -> float:
    return float(normalise(response) == normalise(reference))


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token lists (dynamic programming, one row kept)."""
    row = [0] * (len(b) + 1)
    for x in a:
        diagonal = 0  # row[j - 1] of the previous row
        for j, y in enumerate(b, start=1):
            above = row[j]
            row[j] = diagonal + 1 if x == y else max(row[j], row[j - 1])
            diagonal = above
    return row[-1]


def rouge_l(response: str, reference: str) -> float:
    """ROUGE-L F1 of `response` against `reference`, over their whitespace tokens."""
    got, want = normalise(response).split(), normalise(reference).split()
    if not got and not want:
        return 1.0
    common = lcs_length(got, want)
    if common == 0:
        return 0.0
    precision, recall = common / len(got), common / len(want)
    return 2 * precision * recall / (precision + recall)


def generation_scores(responses: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Mean exact match and ROUGE-L F1 over paired responses and references."""
    if len(responses) != len(references):
        raise ValueError(f"{len(responses)} responses for {len(references)} references")
    n = max(1, len(references))
    pairs = list(zip(responses, references, strict=True))
    return {EXACT_MATCH: sum(exact_match(r, ref) for r, ref in pairs) / n,
            ROUGE_L: sum(rouge_l(r, ref) for r, ref in pairs) / n}
