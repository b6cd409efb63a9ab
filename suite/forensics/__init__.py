"""Hang forensics and the evidence bundle: a rank's answer (answer), the launcher's asking (collect), the
reading into one table and one line (diagnose), the bundle for a ticket (bundle, redact), a drill (drill).
Imported by suite.launch, suite.cluster.multilaunch, suite.workloads.worker, the run and bundle commands and
reports; it imports no stage.

Every worker records its collectives in torch's own Flight Recorder (TORCH_FR_BUFFER_SIZE, set by
suite.launch.torchrun.worker_env) and answers one question through the launch's rendezvous store: its
recorded collectives and its Python stack. When a launch passes its timeout, or fails, the launcher asks
before it kills; ranks that cannot answer (stopped, dead, frozen) are told apart by their process state and
exit codes.
"""
