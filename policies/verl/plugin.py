"""verl plugin entry point (`[project.entry-points."verl.plugins"] windtunnel = "policies.verl.plugin"`).

Importing this module registers the `windtunnel_sync` trainer in verl's TRAINER_REGISTRY. verl imports it
on every `import verl` and swallows any exception (VERL.md §2), so run `campaign policies check` (or
`policies.verl.checks.self_check()`) to see a failure.
"""

from policies.verl.trainer import TRAINER_NAME, WindtunnelTrainer  # noqa: F401  (registers the trainer)

__all__ = ["TRAINER_NAME", "WindtunnelTrainer"]
