from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session", autouse=True)
def own_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The suite's own $XDG_CACHE_HOME: the pass_rate scorer caches verdicts there by default,
    and a user's cache must neither answer for the code under test nor get its entries."""
    folder = tmp_path_factory.mktemp("cache")
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(folder)
    yield folder
    if old is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = old


@pytest.fixture
def shared_data() -> Path:
    """../shared/data beside the clone; tests that need it skip when it is absent."""
    if not SHARED_DATA.exists():
        pytest.skip(f"{SHARED_DATA} is not present (it sits beside the clone in CI)")
    return SHARED_DATA


PLUGIN = '''
import time
from pathlib import Path

import pandas as pd

from hybridmetric.scorers import Scorer, Setting


class LengthRatio(Scorer):
    """len(candidate) / len(first reference); optionally slow, logging each row it scores."""

    name = "length_ratio"
    description = "a third-party test scorer"
    settings_spec = {
        "delay": Setting(0.0, "seconds to sleep per row"),
        "log": Setting("", "file to append scored candidates to"),
    }

    def score(self, frame: pd.DataFrame) -> pd.DataFrame:
        values = []
        for candidate, refs in zip(frame["candidate"], frame["references"]):
            time.sleep(self.settings["delay"])
            if self.settings["log"]:
                with open(self.settings["log"], "a") as handle:
                    handle.write(candidate + "\\n")
            values.append(len(candidate) / max(1, len(refs[0])))
        return pd.DataFrame({self.columns[0]: values}, index=frame.index)
'''


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    """A folder that, on sys.path, installs a third-party scorer through the entry-point group."""
    root = tmp_path / "plugin"
    (root / "hm_plugin_demo").mkdir(parents=True)
    (root / "hm_plugin_demo" / "__init__.py").write_text(PLUGIN)
    info = root / "hm_plugin_demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hm-plugin-demo\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[hybridmetric.scorers]\nlength_ratio = hm_plugin_demo:LengthRatio\n")
    return root
