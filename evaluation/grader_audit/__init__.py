"""`campaign audit graders`: a generated adversarial suite per grader family (`strategies`, `suite`) and the
agreement of our grades with the field's other verifiers on a campaign's stored generations (`agreement`)."""
