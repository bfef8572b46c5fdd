"""Dibia et al. 2022's COMBINED metric (arXiv 2210.16494): min(1, PASS + EDIT-SIM).

PASS is 1.0 when every unit-test case passes (the ``pass_rate`` scorer's ``score.pass``), EDIT-SIM
is 1 - normalized Levenshtein distance to the closest reference (the ``edit_sim`` scorer). Code
that passes scores 1; code that fails scores the share of the reference a programmer would not
have to retype. The formula is our reading of the paper. Rows without tests or without references
get NaN (not applicable), as their parts do.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pandas as pd

from hybridmetric.combine import dibia_combined
from hybridmetric.scorers.base import Scorer, Setting, single_column
from hybridmetric.scorers.edit_sim import EditSim
from hybridmetric.scorers.pass_rate import PassRate, check_sandbox_settings


class DibiaCombined(Scorer):
    name = "dibia_combined"
    needs = ("references", "tests")
    version = "1"
    description = "Dibia et al. 2022 COMBINED: min(1, PASS + EDIT-SIM)"
    settings_spec: ClassVar[dict[str, Setting]] = {
        "edit_level": EditSim.settings_spec["level"],
        **PassRate.settings_spec,
    }
    packages = (*EditSim.packages, *PassRate.packages)

    def __init__(self, **settings: Any):
        super().__init__(**settings)
        check_sandbox_settings(self.settings, self.name)
        self._edit = EditSim(level=self.settings["edit_level"])
        self._pass = PassRate(**{k: self.settings[k] for k in PassRate.settings_spec})

    def signature_fields(self) -> dict[str, Any]:
        return {"edit_sim_v": EditSim.version, "pass_rate_v": PassRate.version,
                **self._pass.signature_fields()}

    def check(self, frame: pd.DataFrame) -> None:
        self._pass.check(frame)

    def score(self, frame: pd.DataFrame) -> pd.DataFrame:
        edit = self._edit.score(frame)[self._edit.columns[0]].to_numpy(float)
        passed = self._pass.score(frame)[self._pass.columns[1]].to_numpy(float)
        return single_column(self, frame, dibia_combined(passed, edit))

    def close(self) -> None:
        self._pass.close()
