"""scripts/multi30k.sh (the README's Multi30K command) runs end to end on a tiny stand-in
corpus with a few seconds per model, and says what is missing when the folder is wrong."""

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attnkit.data.tasks import load_task

SCRIPT = Path(__file__).parents[2] / "scripts" / "multi30k.sh"


def run(tmp_path: Path, data: Path, **env: str) -> subprocess.CompletedProcess:
    wrapper = tmp_path / "attnkit"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m attnkit "$@"\n')
    wrapper.chmod(0o755)
    full = {**os.environ, "ATTNKIT": str(wrapper), "OMP_NUM_THREADS": "1", **env}
    return subprocess.run(
        ["bash", str(SCRIPT), str(data), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=full,
        timeout=300,
    )


@pytest.mark.slow  # suite: pytest -m slow (.ci/run runs it)
def test_multi30k_script_trains_and_scores_both_models(tmp_path) -> None:
    sp = load_task("toy-ko", seed=0, train_size=300, valid_size=10, test_size=12)
    data = tmp_path / "data"
    data.mkdir()
    for split, name in (("train", "train"), ("valid", "val"), ("test", "test_2016_flickr")):
        for side, lang in (("src", "de"), ("tgt", "en")):
            with gzip.open(data / f"{name}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write("\n".join(" ".join(getattr(e, side)) for e in sp.get(split)) + "\n")
    done = run(tmp_path, data, SECONDS_EACH="2", SPM_VOCAB="200")
    assert done.returncode == 0, done.stderr[-2000:]
    for model in ("rnnsearch", "transformer"):
        text = (tmp_path / "out" / f"{model}.test.txt").read_text()
        assert "test: 12 sentences, beam 5" in text and "sacreBLEU" in text


def test_multi30k_script_names_a_missing_file(tmp_path) -> None:
    done = run(tmp_path, tmp_path)
    assert done.returncode == 2 and "missing" in done.stderr and "train.de.gz" in done.stderr
