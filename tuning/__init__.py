"""Equal-budget tuning: one Optuna study per policy, every trial a real orchestrated run.

Why: the published study used one fixed setting per policy, so "policy A beats B" may only
mean "A's default happened to suit this model". Here every policy in a comparison gets the
same number of trials over the `search_space:` its YAML declares, trial 0 is the YAML's own
setting (so "how much tuning moved it" is measured inside the same budget), and the score is a
*validation* aggregate on a suite that is not the final test suite (refused otherwise).

A trial = the policy with the suggested params, trained and evaluated through the orchestrator
(ledger rows in campaign `<campaign>.tune.<policy>@<validation suite>`, Ray jobs, the evaluation stage), paired
by seed with the campaign-local reference (baseline for select/reweight, static for mix),
whose runs are shared by all trials (same run_key, trained once). Objective: mean over seeds
of the paired validation-aggregate difference (trial - reference). Trials are pruned on the same
quantity at intermediate checkpoints.

One job per module:
  * `request`: what a tuning call asks for (`TuneRequest`) and its refusal (`TuneError`);
  * `space`: a policy YAML's `search_space:`, trial 0's values, an Optuna trial's suggestions, params applied;
  * `validation`: the suite a study scores on (never the test suite, or `heldout`) and a run as a tuning run;
  * `intermediate`: the paired objective and its per-step counterpart, read while the runs train;
  * `runner`: `tune()`: one study per policy, its trials as ledger runs, pruning through the scheduler;
  * `report`: the studies read back from the ledger database and the tuned policy YAML.
"""
