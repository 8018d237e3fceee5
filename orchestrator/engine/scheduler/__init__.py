"""The scheduler: `loop` (the `Scheduler` and its poll loop) over `core` (config, job handles), `admission` (what
may start now, by capacity and placement), `jobs` (submitting a stage), `watch` (a job's end) and `retries`."""
