"""The perturbation kinds of ``--ragbench-perturb``, in one place.

Standard library only: the metric registry and the format readers import it.
"""

PERTURBATION_KINDS = ("typos", "drop", "double", "case", "whitespace", "punctuation",
                      "filler", "synonyms", "injection")
