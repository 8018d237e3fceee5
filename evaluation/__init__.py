"""Evaluation: graders written once (also the training reward), the suite as lm-eval tasks,
`evaluate_checkpoint` with health gates, calibration, benchmark data and the contamination audit.

Entry points: `evaluation.graders.grade`, `evaluation.reward.compute_score` (verl),
`evaluation.evaluator.evaluate_checkpoint`, `evaluation.calibrate.calibrate`,
`evaluation.contamination.audit`. Heavy imports (lm-eval, torch) stay inside those modules.
"""
