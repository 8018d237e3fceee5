"""Training backends behind one interface: the verl launcher (GPU) and the local GRPO backend (CPU)."""
