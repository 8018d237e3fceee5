"""Actuators by mechanism; importing this package registers them all."""

from policies.actuators import mix, reweight, select  # noqa: F401  (registration side effects)
from policies.actuators.base import Actuator, Reweighter, Selector
from policies.actuators.mix import DomainStats, Mixer

__all__ = ["Actuator", "Selector", "Reweighter", "Mixer", "DomainStats"]
