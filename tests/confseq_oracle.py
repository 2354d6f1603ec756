"""The confseq package (Waudby-Smith, Howard, Ramdas: confidence sequences by the methods'
authors) as a test oracle.

Its betting module is pure Python, but the package builds C++ extensions that need the
Boost headers, so ``pip install confseq`` fails on machines without them. When it is not
installed, its source distribution is fetched from the package registry (pinned by its
sha256; ``pip download`` would try to build it) and its pure-Python modules (betting,
predmix, betting_strategies, misc, types) are imported from there. Unavailable either
way: the test skips, or fails with RAGBENCH_REQUIRE_ORACLES=1.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import os
import ssl
import sys
import tarfile
import urllib.request
from pathlib import Path
from types import ModuleType

import pytest

VERSION = "0.0.11"
SDIST = ("https://files.pythonhosted.org/packages/68/3d/b0ccdd8cd7b3e4ae10f028f6233509cd5f"
         "d7d446091cc7785e9ac250d78f/confseq-0.0.11.tar.gz")
SHA256 = "b4f7723089478dda4b011a0bfe4d449f017d7ce0ec0d5039181c3e4a576bc914"
PURE_MODULES = ("__init__.py", "betting.py", "betting_strategies.py", "predmix.py",
                "misc.py", "types.py")


def _unavailable(reason: str) -> None:
    if os.environ.get("RAGBENCH_REQUIRE_ORACLES") == "1":
        pytest.fail(f"confseq oracle unavailable: {reason}")
    pytest.skip(f"confseq oracle unavailable: {reason}")


def load_betting(folder: Path) -> ModuleType:
    """``confseq.betting``, installed or from the source distribution unpacked in ``folder``."""
    try:
        return importlib.import_module("confseq.betting")
    except ImportError:
        pass
    target = folder / "confseq_src"
    package = target / "confseq"
    if not (package / "betting.py").is_file():
        cafile = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
        try:
            context = ssl.create_default_context(cafile=cafile)
            with urllib.request.urlopen(SDIST, context=context, timeout=60) as response:
                data = response.read()
        except OSError as exc:
            _unavailable(f"{SDIST} could not be fetched ({exc})")
        if hashlib.sha256(data).hexdigest() != SHA256:
            _unavailable(f"{SDIST}: unexpected sha256")
        package.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            for member in archive.getmembers():
                name = Path(member.name)
                if name.parent.name == "confseq" and name.name in PURE_MODULES:
                    extracted = archive.extractfile(member)
                    assert extracted is not None
                    (package / name.name).write_bytes(extracted.read())
    for needed in ("multiprocess", "matplotlib"):  # betting.py imports them at the top
        try:
            importlib.import_module(needed)
        except ImportError:
            _unavailable(f"confseq's betting module needs {needed}")
    import numpy as np

    if not hasattr(np, "float_"):  # confseq 0.0.11's annotations name NumPy 1's alias
        np.float_ = np.float64  # type: ignore[attr-defined]
    sys.path.insert(0, str(target))
    try:
        return importlib.import_module("confseq.betting")
    finally:
        sys.path.remove(str(target))
