"""orchestrator."""
