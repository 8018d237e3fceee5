"""policies/verl."""
