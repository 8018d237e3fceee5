"""Group-sequential seed designs: spend seeds where the answer is open.

Modules, lowest first: `boundaries` (alpha spending and the efficacy boundaries on the z and t scales),
`design` (`SequentialDesign`: looks, alpha, equivalence and futility stops), `decisions` (one look's decision
and repeated CI per comparison), `family` (family-wise control: Holm step-down over group-sequential
boundaries), `estimates` (the bias-adjusted estimate after an early stop), `simulation` (operating
characteristics of a design on simulated differences), `looks` (a look over a campaign's run records and the
rows it stores), `plan` (what a campaign can decide, and at what cost) and `report` (the recorded looks as the
report's lead section).
"""

from __future__ import annotations

from wtcommon.errors import UserError


class SequentialError(UserError):
    """A sequential design or an interim input is invalid; the message names the field and the fix."""
