"""Prompt curricula: pre-rollout, per-prompt, stateful rules choosing which prompts are rolled out next
(`Curriculum` in `base`, the table and `build_curriculum` in `registry`, on-disk state in `state`)."""
