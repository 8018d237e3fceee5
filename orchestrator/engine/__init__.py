"""The engine: a campaign spec (`spec`) expands into a grid of runs (`grid`), registered in the run ledger
(`ledger`), admitted and retried by the `scheduler`, submitted as Ray jobs by the `executor`, each running one
`stages` entrypoint (train, evaluate) in its run dir (`paths`, `workdir`). Imports only the layers below the
orchestrator and itself."""
