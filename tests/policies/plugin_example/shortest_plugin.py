"""A researcher's own policy signal, outside the `policies` package: one class, registered when imported."""

from policies import register_scorer, signals
from policies.scorers import Scorer


@register_scorer("response_length")
class ResponseLength(Scorer):
    """s_i = number of valid response tokens of sequence i (a brevity signal)."""

    reads = ("response_mask",)

    def score(self, batch):
        return signals.response_length(batch)
