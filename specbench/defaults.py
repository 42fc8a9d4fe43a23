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
