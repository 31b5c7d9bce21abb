"""Airflow's Spark provider pulls pyspark-client, which installs into the same ``pyspark/`` folder as the full
pyspark: the two must be the same version and the full pyspark must stay whole (its jars, its scripts)."""

from __future__ import annotations

import importlib.metadata as metadata
from pathlib import Path

import pyspark


def test_pyspark_and_pyspark_client_are_one_version():
    assert metadata.version("pyspark") == metadata.version("pyspark-client") == pyspark.__version__


def test_every_file_the_full_pyspark_installed_is_there():
    distribution = metadata.distribution("pyspark")
    files = [f for f in distribution.files if f.parts[0] == "pyspark"]
    missing = [str(f) for f in files if not Path(distribution.locate_file(f)).exists()]
    assert len(files) > 1000 and not missing, missing[:20]
    jars = Path(pyspark.__file__).parent / "jars"
    assert any(j.name.startswith("spark-core_") for j in jars.iterdir())
    assert any(j.name.startswith("spark-connect_") for j in jars.iterdir())
    assert (Path(pyspark.__file__).parent / "bin" / "spark-submit").exists()


def test_the_files_pyspark_client_shares_with_pyspark_are_pysparks_own():
    import base64
    import hashlib

    client = {str(f): f for f in metadata.distribution("pyspark-client").files if f.parts[0] == "pyspark"}
    full = metadata.distribution("pyspark")
    shared = [f for f in full.files if str(f) in client and f.hash is not None]
    assert len(shared) > 300
    changed = []
    for f in shared:
        digest = base64.urlsafe_b64encode(hashlib.sha256(Path(full.locate_file(f)).read_bytes()).digest()).rstrip(b"=")
        if digest.decode() != f.hash.value:
            changed.append(str(f))
    assert not changed, f"pyspark files overwritten with other content: {changed[:20]}"
