"""The ``robust`` kind: perturbed variants of a case with metamorphic checks."""
