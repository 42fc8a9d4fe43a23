"""Defaults shared by the commands, stated once (docs/configuration.md, "Defaults shared by the commands").

run / verify / compare read them through `config.RunConfig`; accept, simulate and roi use them for
their flags, so every command starts from the same γ range and the same decision settings.
"""

from __future__ import annotations

GAMMAS = (1, 2, 4, 8)  # `run`'s γ grid (config `gammas`)
GAMMA_MAX = max(GAMMAS)  # the largest γ `accept` considers (--gamma-max)
ROI_GAMMA_MAX = 16  # `roi` is analytic: its table may look further at no cost
MARGIN = 0.05  # ON only if the speedup's lower bound exceeds 1 + margin
CI_LEVEL = 0.95  # two-sided level of every interval; the ON bound is one-sided at 97.5 %
CI_HALFWIDTH = 0.05  # α CI half-width a `run` is sized for ("too few prompts" beyond it)
# `accept` scores every response position teacher-forced, so it reaches a tighter α cheaply
ACCEPT_CI_HALFWIDTH = 0.02
COST_RATIO = 0.1  # T_d / T_ar assumed by roi and accept when no timing is given
# `roi`'s bounds keep every derived figure finite (γ·T_d at γ = 1024 must not overflow JSON)
MAX_ROI_GAMMA = 1024  # roi is analytic: a longer grid is cheap, but not unbounded
MAX_ROI_MS = 1e9  # times in ms (about 11.6 days per step): beyond any real model
MAX_ROI_RATIO = 1e6  # T_d / T_ar: a draft a million times slower than the target never pays
