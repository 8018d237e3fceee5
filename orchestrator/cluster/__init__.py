"""Ray clusters the engine's executor submits to: the work dir's local head (`local_head`, `head_guard`), a
multi-node cluster on one machine (`local_cluster`), the cluster a campaign ran on (`cluster_record`), which
address a command uses (`ray_address`) and the cluster doctor (`doctor`). The training job's own reservation of
nodes is `training/reservation.py` (training sits below the orchestrator)."""
